"""The render panel: an iteration's best and worst renders beside their targets, as an HTML fragment.

For the `count` best and worst attempts of each render domain (verifier `render`) of a committed
iteration, the panel shows the target's and the response's 128 x 128 PNGs inline (base64 <img>),
with the reward the row recorded and its components. The pixels are drawn again in a sandbox
(families/render/render_again.py): rows store the response, not its render.

    fragment = render_panel_for_run("runs/r1")          # "" when no render domain ran
"""

from __future__ import annotations

import html

from flywheel.families.render.render_again import render_again, render_domains

COLUMNS = ["domain", "task_id", "response", "reward_raw"]


def best_and_worst(rows: list[dict], count: int) -> list[dict]:
    """The `count` best then the `count` worst rows by reward (each row once)."""
    ranked = sorted(rows, key=lambda r: (-(r.get("reward_raw") or 0.0), r.get("task_id") or ""))
    return ranked[:count] + [r for r in ranked[::-1][:count] if r not in ranked[:count]]


def _img(data, alt: str) -> str:
    if not isinstance(data, str) or not data:
        return f'<span class="no-render">{html.escape(alt)}: none</span>'
    return f'<img alt="{html.escape(alt)}" width="128" height="128" src="data:image/png;base64,{html.escape(data)}">'


def _row(drawn: dict) -> str:
    now = drawn["now"]
    parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(now.components.items()))
    return (f"<tr><td>{_img(drawn['target_png'], 'target')}</td><td>{_img(drawn['response_png'], 'response')}</td>"
            f"<td><code>{html.escape(str(drawn.get('task_id')))}</code><br>reward {drawn.get('reward_raw') or 0.0:.3f} "
            f"(now {now.reward:.3f}, {html.escape(now.verdict)})<br><small>{html.escape(parts)}</small></td></tr>")


def render_panel(rows: list[dict], backend, seed: int, tasks: dict | None = None, count: int = 2,
                 iteration: int | None = None) -> str:
    """The fragment for trajectory `rows` (dicts with COLUMNS) of one iteration; "" without any
    row of a render domain."""
    sections = []
    for name in sorted({r.get("domain") for r in rows} & render_domains()):
        chosen = best_and_worst([r for r in rows if r.get("domain") == name], count)
        lines = [_row(drawn) for drawn in render_again(chosen, backend, seed, tasks)]
        if lines:
            sections.append(f'<h3>{html.escape(name)}</h3>\n<table class="render-panel">'
                            "<tr><th>target</th><th>response</th><th>attempt</th></tr>\n" + "\n".join(lines) + "</table>")
    if not sections:
        return ""
    where = f" of iteration {iteration}" if iteration is not None else ""
    return (f"<section><h2>Renders{where}</h2><p>The {count} best and {count} worst attempts per render "
            "domain, drawn again in the sandbox beside their targets.</p>\n" + "\n".join(sections) + "</section>")


def render_panel_for_run(run_dir: str, iteration: int | None = None, backend: str = "local", count: int = 2,
                         tasks: dict | None = None) -> str:
    """The panel of a run's iteration (default: its last committed one); "" when it has none."""
    from flywheel.settings.layout import RunLayout
    from flywheel.families.render.render_again import open_backend
    from flywheel.schemas import read_table
    layout = RunLayout(run_dir)
    committed = layout.committed_iterations()
    if iteration is None:
        if not committed:
            return ""
        iteration = committed[-1]
    rows = read_table(layout.table_dir("trajectories", iteration), "trajectories", columns=COLUMNS).to_pylist()
    if not {r["domain"] for r in rows} & render_domains():
        return ""
    seed = int(layout.read_json(layout.run_json).get("seed") or 0)
    try:
        with open_backend(backend) as sandbox:
            return render_panel(rows, sandbox, seed, tasks, count, iteration)
    except Exception as e:  # noqa: BLE001 - no sandbox here (or none that draws): the page says so, the rest stands
        return (f'<section><h2>Renders of iteration {iteration}</h2><p class="note">not drawn: '
                f"{html.escape(type(e).__name__)}: {html.escape(str(e)[:300])}</p></section>")
