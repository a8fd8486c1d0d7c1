"""The `render` verifier: the response's render against the reference's, by attributes and pixels.

The harness (families/render/harnesses/render.py) rendered both programs in the sandbox and reported,
for each, the attributes read from the rendering's own objects and a 128 x 128 PNG. Reward is a
weighted sum of components (WEIGHTS; render_attributes.py says what each one measures), partial
credit throughout; the verdict is pass only when every attribute is as the reference's and the
picture is close (PASS_AT). Nothing is paid when:
- the response draws no data series (charts) or no shape (SVG, scene3d): a blank canvas, a
  picture alone, or text alone earns 0 whatever its pixels;
- the render embeds a picture the reference does not (`embeds_image`: imshow/figimage of pixels,
  a mesh of pixel cells, an SVG <image>/<use>/href), draws far more shapes than the reference
  (`pixel_art`), writes the reference's data out as text instead of drawing it (`text_spells_data`;
  value labels on a chart whose data is right are no hack), or the harness saw
  matplotlib's drawing classes patched or foreign artists (`patched_matplotlib`, `custom_artist`,
  `agg_filter`): flagged as suspected exploits;
- an edit task's render is no closer to the reference than to the program it started from
  (`unchanged`: the original handed back, or an edit that misses).
A reference that does not render, or a sandbox without the render packages, is an `error`.
"""

from __future__ import annotations

from typing import Any

from flywheel.families.render.render_base import REPORT_MARKER, code_of, route_of
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.hacks import python_flags
from flywheel.families.render.render_attributes import chart_scores, primitive_scores, series_of, spells_data
from flywheel.families.render.render_compare import decode_png, is_blank, items, visual_scores
from flywheel.verifiers.scoring import harness_report

WEIGHTS = {
    "chart": {"chart_type": 0.2, "data": 0.3, "labels": 0.15, "colors": 0.1, "visual": 0.25},
    "shapes": {"shapes": 0.2, "geometry": 0.3, "colors": 0.2, "labels": 0.05, "visual": 0.25},
}
PASS_AT = {"attributes": 0.99, "geometry": 0.9, "colors": 0.9, "visual": 0.6}
HARNESS_SIGNALS = ("patched_matplotlib", "custom_artist", "agg_filter")


def _fail(detail: str, components: dict | None = None, flags: list[str] = ()) -> Verdict:
    components = {**(components or {}), **{f"exploit_{f}": 1.0 for f in flags}}
    if flags:
        detail = f"exploit suspected: {', '.join(flags)}; {detail}"
    return Verdict(0.0, "fail", components, bool(flags), detail)


def _chart_flags(got: dict, want: dict) -> list[str]:
    flags = [s for s in HARNESS_SIGNALS if s in (got.get("signals") if isinstance(got.get("signals"), list) else [])]
    number = lambda d, k: d.get(k) if isinstance(d.get(k), int) and not isinstance(d.get(k), bool) else 0  # noqa: E731
    got_axes, want_axes = items(got.get("axes"), 20), items(want.get("axes"), 20)
    cells = lambda axes, k: sum(number(a, k) for a in axes)  # noqa: E731
    if number(got, "images") > number(want, "images") or cells(got_axes, "mesh_cells") > cells(want_axes, "mesh_cells") + 50:
        flags.append("embeds_image")
    if cells(got_axes, "loose_patches") > 4 * cells(want_axes, "loose_patches") + 100:
        flags.append("pixel_art")
    if spells_data(got, want) and chart_scores(got, want)["data"] < 1.0:  # written instead of drawn
        flags.append("text_spells_data")
    return flags


def _shape_flags(got: dict, want: dict, key: str) -> list[str]:
    flags = []
    refused = lambda d: len(d.get("refused")) if isinstance(d.get("refused"), list) else 0  # noqa: E731
    if refused(got) > refused(want):
        flags.append("embeds_image")
    if len(items(got.get(key), 5000)) > 4 * len(items(want.get(key), 5000)) + 100:
        flags.append("pixel_art")
    return flags


def _passes(components: dict, kind: str) -> bool:
    attributes = [v for k, v in components.items() if k in WEIGHTS[kind] and k not in ("visual", "geometry", "colors")]
    if kind == "chart":
        attributes.append(components["colors"])
    else:
        if components["geometry"] < PASS_AT["geometry"] or components["colors"] < PASS_AT["colors"]:
            return False
    return all(v >= PASS_AT["attributes"] for v in attributes) and components["visual"] >= PASS_AT["visual"]


# imported with this module in the bounded verifier's worker, off any deadline (verifiers/bounded.py)
WARM_IMPORTS = ("PIL.Image",)


@register_verifier("render", "1")
def render(task: dict, response: str, execution: Any = None) -> Verdict:
    route = route_of(task)
    report, problem, flags = harness_report(execution, REPORT_MARKER)
    flags = flags + [f for f in python_flags(code_of(response)) if f in ("introspects_tests", "kills_processes")]
    if report is None:
        return _fail(problem, flags=flags)
    if report.get("environment_error"):
        return Verdict(0.0, "error", detail=f"the sandbox cannot render: {str(report['environment_error'])[:300]} "
                                            f"(build the `render` environment: families/render/render_environment.py)")
    want, got = report.get("reference"), report.get("response")
    if not isinstance(want, dict) or want.get("error"):
        why = want.get("error") if isinstance(want, dict) else "missing"
        return Verdict(0.0, "error", detail=f"the reference did not render: {str(why)[:300]}")
    want_png = decode_png(want.get("png"))
    if want_png is None:
        return Verdict(0.0, "error", detail="the reference's render is missing or unreadable")
    if not isinstance(got, dict) or got.get("error"):
        why = got.get("error") if isinstance(got, dict) else "missing"
        return _fail(f"the response did not render: {str(why)[:300]}", flags=flags)
    if route == "matplotlib":
        flags += _chart_flags(got, want)
        drew_any = bool(series_of(got))
    else:
        key = "shapes" if route == "svg" else "primitives"
        flags += _shape_flags(got, want, key)
        drew_any = bool(items(got.get(key), 1))
    got_png = decode_png(got.get("png"))
    if got_png is None or is_blank(got_png):
        return _fail("the render is blank or unreadable", {"blank": 1.0}, sorted(set(flags)))
    kind, components, reward = _compare(task, got, got_png, want, want_png)
    if flags:
        return _fail("", components, sorted(set(flags)))
    if not drew_any:
        return _fail("draws no data series or shape: nothing to compare", components)
    source = report.get("source")
    if isinstance(source, dict) and not source.get("error") and (source_png := decode_png(source.get("png"))) is not None:
        _, _, unchanged = _compare(task, got, got_png, source, source_png)
        _, _, same_target = _compare(task, want, want_png, source, source_png)
        # no nearer the edit's target than the program it started from (unless the edit changes nothing)
        if unchanged >= reward and same_target < 1.0:
            return _fail("the render is no closer to the requested change than the original program",
                         {**components, "unchanged": 1.0})
    passed = _passes(components, kind) and reward >= 0.9
    detail = ", ".join(f"{k} {components[k]:.2f}" for k in WEIGHTS[kind] if k in components)
    return Verdict(round(reward, 4), "pass" if passed else "fail", components, False, detail)


def _compare(task: dict, got: dict, got_png, want: dict, want_png) -> tuple[str, dict[str, float], float]:
    """(score kind, components, weighted reward) of render `got` against render `want`."""
    route = route_of(task)
    if route == "matplotlib":
        kind, scores = "chart", chart_scores(got, want)
    else:
        key = "shapes" if route == "svg" else "primitives"
        kind, scores = "shapes", primitive_scores(got, want, key, scale=2 * float(task.get("bounds") or 4.0))
    components = {**scores, **visual_scores(got_png, want_png)}
    weights = {k: w for k, w in WEIGHTS[kind].items() if k in components}
    return kind, components, sum(w * components[k] for k, w in weights.items()) / sum(weights.values())
