"""`flywheel report --html` over evaluations: pass@1 beside pass@k over iterations, the
inference-time scaling table (the numbers eval_stats.summarize gives) and the ablation grid, from
an `evaluations` table written with the project's own writer."""

import base64
import json
import random
import re
import shutil
import subprocess

import pytest

from flywheel.pipelines.eval_stats import summarize, to_metrics_rows
from flywheel.reports.html import render_report, write_report
from flywheel.schemas import TABLES
from flywheel.schemas.write import write_rows

from .test_html_report import CHECK_IMAGES, IMAGES, chromium_dump

NAMES = ("n=4,t=1,turns=0,tokens=0", "n=4,t=0.7,turns=0,tokens=0")
DOMAINS = ("code", "math")
KS = (1, 2, 4)  # what the run's metrics say pass@k was summarized for
STANDARD = ["Held-out pass@1", "Training reward and pass rate", "Learning signal", "Errors by kind"]
CURVES, GRID = "pass@1 and pass@k over training", "Ablation grid"
ROW = re.compile(r"<tr>(<td>.*?</td>)</tr>")


def evaluation_rows(iteration: int, name: str, domain: str) -> list[dict]:
    """3 tasks x (4 sampled + 1 greedy), chances of passing growing with the iteration; `math`
    answers have keys but no visible tests, `code` the other way round; the second evaluation
    has no self-verification; one task has an extra (environment) error row."""
    rng = random.Random(f"{iteration}/{name}/{domain}")
    rows = []
    for task in range(3):
        for index in range(5):
            greedy = index == 4
            passed = rng.random() < 0.2 + 0.25 * iteration
            row = dict.fromkeys(TABLES["evaluations"].names)
            row.update(run_id="r", iteration=iteration, domain=domain, task_id=f"{domain}-{task}",
                       group_id=f"{domain}-{task}", sample_index=0 if greedy else index,
                       policy_version=iteration, prompt="q", response="a",
                       sampling_temperature=0.0 if greedy else 1.0, reward_raw=float(passed),
                       verdict="pass" if passed else "fail", evaluation=name, greedy=greedy,
                       answer_key=("42" if passed else rng.choice("78")) if domain == "math" else None,
                       visible_score=rng.random() if domain == "code" else None,
                       self_score=rng.random() if name == NAMES[0] else None)
            rows.append(row)
    rows.append({**rows[0], "sample_index": 5, "verdict": "error", "greedy": False})
    return rows


def write_evaluations(root, iterations=(1, 2), names=NAMES, metrics=True) -> dict:
    """Every evaluation row written, as `flywheel eval` lays them out; {(iteration, name): rows}."""
    written = {}
    for iteration in iterations:
        for i, name in enumerate(names):
            rows = []
            for domain in DOMAINS:
                part = evaluation_rows(iteration, name, domain)
                write_rows(f"{root}/tables/evaluations/iteration={iteration}/domain={domain}/"
                              f"eval-{i}.parquet", "evaluations", part)
                rows += part
            written[(iteration, name)] = rows
            if metrics:
                eval_metrics = [{**m, "name": f"{m['name']}[{name}]"}
                                for m in to_metrics_rows(summarize(rows, KS), "r", iteration)]
                write_rows(f"{root}/tables/metrics/iteration={iteration}/eval-{i}.parquet",
                              "metrics", eval_metrics)
    return written


def write_run(root, iterations=(1, 2)) -> None:
    """A run's committed iterations: held-out and training metrics, commit markers, run.json."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.json").write_text(json.dumps({"config": {}}))
    for k in iterations:
        rows = [{"run_id": "r", "iteration": k, "domain": d, "name": name, "value": 0.1 * k,
                 "policy_version": k} for d in (*DOMAINS, "*")
                for name in ("heldout_pass@1", "train_mean_reward", "train_pass_rate",
                             "zero_variance_frac")]
        write_rows(f"{root}/tables/metrics/iteration={k}/part-00000.parquet", "metrics", rows)
        (root / "iterations" / str(k)).mkdir(parents=True)
        (root / "iterations" / str(k) / "_COMMITTED").write_text("")


def fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def expected_table(written, iteration: int, ks=KS) -> list[list[str]]:
    """The scaling table's rows as summarize gives them, for the evaluations of `iteration`."""
    out = []
    for (i, name), rows in sorted(written.items()):
        if i != iteration:
            continue
        for s in summarize(rows, ks):
            n, k = s["n"], max(ks)
            out.append([name, s["domain"], str(s["tasks"]), str(n), str(s["errors"]),
                        fmt(s["pass@1"]), str(k), fmt(s[f"pass@{k}"]), fmt(s["greedy_pass@1"]),
                        fmt(s[f"maj@{n}"]), fmt(s[f"best_of_{n}_visible"]),
                        fmt(s[f"best_of_{n}_self"]), fmt(s[f"oracle_best_of_{n}"])])
    return out


def table_rows(page: str) -> list[list[str]]:
    table = page[page.index('<table class="eval-scaling">'):page.index("</table>")]
    return [re.findall(r"<td>(.*?)</td>", row) for row in ROW.findall(table)]


def assert_pngs(page: str) -> list[str]:
    images = IMAGES.findall(page)
    for _, data in images:
        png = base64.b64decode(data)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    return [alt for alt, _ in images]


@pytest.fixture
def run_with_evaluations(tmp_path):
    root = tmp_path / "run"
    write_run(root)
    return root, write_evaluations(root)


def test_a_run_with_evaluations_gets_curves_scaling_table_and_ablation_grid(run_with_evaluations):
    root, written = run_with_evaluations
    page, plots = render_report(str(root))
    assert [p.title for p in plots] == [*STANDARD, CURVES, GRID]
    assert assert_pngs(page) == [*STANDARD, CURVES, GRID]
    assert "2 committed iterations" in page and "Inference-time scaling" in page
    # the table holds the latest iteration's evaluations, each number summarize's
    rows = table_rows(page)
    assert rows == expected_table(written, 2)
    assert len(rows) == 2 * 3 and {r[0] for r in rows} == set(NAMES)
    by = {(r[0], r[1]): r for r in rows}
    assert by[(NAMES[0], "code")][9] == "n/a" and by[(NAMES[0], "math")][9] != "n/a"    # maj@N
    assert by[(NAMES[0], "math")][10] == "n/a" and by[(NAMES[0], "code")][10] != "n/a"  # visible
    assert by[(NAMES[1], "all")][11] == "n/a" and by[(NAMES[0], "all")][11] != "n/a"    # self
    assert by[(NAMES[0], "code")][4] == "1" and by[(NAMES[0], "code")][6] == "4"  # errors, k
    curves = next(p for p in plots if p.title == CURVES)
    assert f"Evaluation `{NAMES[1]}` at iterations 1, 2" in curves.caption  # most iterations: tie -> first sorted
    assert NAMES[0] in curves.caption
    assert "Iteration 2" in next(p for p in plots if p.title == GRID).caption


def test_pass_at_k_defaults_without_recorded_metrics_and_one_evaluation_has_no_grid(tmp_path):
    """An eval output dir (no run.json, no commit marker, no eval metrics): the scaling table
    alone (one iteration is no curve), pass@k for k in 1, 4 and n."""
    root = tmp_path / "evals" / "base"
    written = write_evaluations(root, iterations=(0,), names=NAMES[:1], metrics=False)
    page, plots = render_report(str(root))
    assert plots == [] and assert_pngs(page) == [] and CURVES not in page
    assert "Held-out pass@1" not in page and "Ablation grid" not in page
    assert "1 evaluations and no training iterations" in page
    assert table_rows(page) == expected_table(written, 0, ks=(1, 4))
    path = tmp_path / "eval.html"  # the command takes such a dir too
    done = subprocess.run(f"flywheel report --run-dir {root} --html {path} | cat", shell=True,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and 'class="eval-scaling"' in path.read_text(), done.stdout + done.stderr


def test_a_run_without_evaluations_renders_as_before(tmp_path):
    root = tmp_path / "run"
    write_run(root)
    page, plots = render_report(str(root))
    assert [p.title for p in plots] == STANDARD and assert_pngs(page) == STANDARD
    assert "Inference-time scaling" not in page and "<table" not in page and CURVES not in page


def test_an_evaluation_being_written_is_left_out_and_said(run_with_evaluations):
    root, written = run_with_evaluations
    part = root / "tables" / "evaluations" / "iteration=3" / "domain=code" / "eval-0.parquet"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"PAR1 half a file being written")
    page, plots = render_report(str(root))
    assert "evaluations of iteration 3 left out: unreadable" in page
    assert table_rows(page) == expected_table(written, 2) and len(plots) == 6


def test_the_command_writes_the_evaluation_sections(run_with_evaluations, tmp_path):
    root, _ = run_with_evaluations
    path = tmp_path / "report.html"
    done = subprocess.run(f"flywheel report --run-dir {root} --html {path} | cat", shell=True,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout == f"wrote {path}: {', '.join([*STANDARD, CURVES, GRID])}\n", done.stderr
    assert 'class="eval-scaling"' in path.read_text()


@pytest.mark.skipif(not shutil.which("chromium"), reason="headless Chromium is not installed "
                    "(Debian package `chromium`; .ci/run installs it where apt can)")
def test_every_evaluation_image_loads_in_headless_chromium(run_with_evaluations, tmp_path):
    root, _ = run_with_evaluations
    page = tmp_path / "report.html"
    write_report(str(root), str(page))
    checked = tmp_path / "checked.html"
    checked.write_text(page.read_text().replace("</body>", CHECK_IMAGES + "</body>"))
    assert chromium_dump(checked) == "loaded 6 of 6"
