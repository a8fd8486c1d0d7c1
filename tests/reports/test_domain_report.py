"""The HTML report's Domains section: curves of the `watch/*` metrics a run recorded (as
loop/domain_watch.py computes them from real trajectories tables) and its warnings, the
many-domain case drawn as the top domains plus "others"; a run without them renders as before."""

import base64
import json
import re
import shutil
import subprocess

import pytest

from flywheel.loop.domain_watch import domain_rows, warning_rows, warnings
from flywheel.reports.html import render_report, write_report
from flywheel.reports.report import OTHERS, domain_watch
from flywheel.schemas import TABLES
from flywheel.schemas.write import write_rows

IMAGES = re.compile(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')
DOMAINS = [f"d{i:02d}" for i in range(14)]  # d00 has the most attempts, d13 the fewest
ITERATIONS = range(4)


def attempts(k: int, i: int, domain: str) -> list[dict]:
    """16 - i attempts of one token each; d00's pass rate climbs 0.2 a step while every other
    domain's falls 0.2; d01's sampled token grows certain (entropy 1, 0.5, 0.1, 0.01)."""
    n = 16 - i
    rate = 0.2 + 0.2 * k if domain == "d00" else 0.8 - 0.2 * k
    surprisal = (1.0, 0.5, 0.1, 0.01)[k] if domain == "d01" else 1.0
    rows = []
    for j in range(n):
        row = dict.fromkeys(TABLES["trajectories"].names)
        row.update(run_id="r", iteration=k, domain=domain, task_id=f"{domain}-{j}", group_id="g",
                   sample_index=0, policy_version=k, response_token_ids=[5],
                   response_logprobs=[-surprisal], verdict="pass" if j < round(rate * n) else "fail",
                   filtered=j % 4 == 3, advantage=1.0)
        rows.append(row)
    return rows


def write_watched_run(root) -> list[dict]:
    """Each iteration: trajectories, then what the driver writes from them (watch rows, warnings
    over the run so far); returns every warning found."""
    found, metrics = [], []
    for k in ITERATIONS:
        for i, domain in enumerate(DOMAINS):
            write_rows(f"{root}/tables/trajectories/iteration={k}/domain={domain}/"
                          "part-00000.parquet", "trajectories", attempts(k, i, domain))
        metrics += domain_rows(str(root), k, "r")
        now = warnings(metrics, k)
        found += now
        write_rows(f"{root}/tables/metrics/iteration={k}/watch.parquet", "metrics",
                      [r for r in metrics if r["iteration"] == k] + warning_rows(now, "r"))
        commit(root, k)
    return found


def commit(root, k: int) -> None:
    (root / "iterations" / str(k)).mkdir(parents=True)
    (root / "iterations" / str(k) / "_COMMITTED").write_text("")


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    root = tmp_path_factory.mktemp("watched")
    (root / "run.json").write_text(json.dumps({"config": {}}))
    return root, write_watched_run(root)


def test_the_run_warns_where_it_was_made_to(watched):
    _, found = watched
    assert [(w["iteration"], w["domain"], w["kind"]) for w in found] == [
        (1, "d00", "diverging"), (2, "d00", "diverging"), (2, "d01", "entropy_collapse"),
        (3, "d00", "diverging"), (3, "d01", "entropy_collapse")]


def test_the_domains_section_draws_the_curves_and_lists_the_warnings(watched, tmp_path):
    root, _ = watched
    page, plots = render_report(str(root))
    assert [p.title for p in plots][-1] == "Domains"
    images = dict(IMAGES.findall(page))
    png = base64.b64decode(images["Domains"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    section = page[page.index("<h2>Domains</h2>"):]
    section = section[:section.index("</section>")]
    assert "The 12 domains with the most attempts are drawn alone; the other 2" in section
    items = re.findall(r"<li>(.*?)</li>", section)
    assert items == [
        "iteration 1, d00: <strong>diverging</strong>, its success rose while the other domains' fell",
        "iteration 2, d00: <strong>diverging</strong>, its success rose while the other domains' fell",
        "iteration 2, d01: <strong>entropy_collapse</strong>, its sampled tokens' entropy collapsed",
        "iteration 3, d00: <strong>diverging</strong>, its success rose while the other domains' fell",
        "iteration 3, d01: <strong>entropy_collapse</strong>, its sampled tokens' entropy collapsed"]
    assert "4 committed iterations" in page


def test_a_run_without_watch_metrics_has_no_domains_section(tmp_path):
    for k in (0, 1):
        write_rows(f"{tmp_path}/tables/metrics/iteration={k}/part-00000.parquet", "metrics",
                      [{"run_id": "r", "iteration": k, "domain": d, "name": name, "value": 0.5,
                        "policy_version": k} for d in ("add", "*")
                       for name in ("heldout_pass@1", "train_pass_rate")])
        commit(tmp_path, k)
    page, plots = render_report(str(tmp_path))
    assert [p.title for p in plots] == ["Held-out pass@1", "Training reward and pass rate",
                                        "Learning signal", "Errors by kind"]
    assert "Domains" not in page and "domain-warnings\"" not in page


def test_many_domains_are_the_top_ones_and_the_rest_pooled():
    rows = [(k, d, "watch/attempt_share", share) for k in (0, 1)
            for d, share in (("a", 0.5), ("b", 0.3), ("c", 0.15), ("e", 0.05))]
    rows += [(k, d, "watch/success", value) for k in (0, 1)
             for d, value in (("a", 0.1), ("b", 0.2), ("c", 0.4), ("e", 0.8), ("*", 0.2))]
    rows += [(1, d, "watch/update_share", value) for d, value in (("c", 0.1), ("e", 0.3), ("*", 1.0))]
    watch = domain_watch(rows, top=2)
    assert (watch.shown, watch.others, watch.warnings) == (["a", "b"], ["c", "e"], [])
    success = watch.curves["watch/success"]
    assert list(success) == ["a", "b", OTHERS, "*"]
    assert success[OTHERS] == [(0, pytest.approx(0.5)), (1, pytest.approx(0.5))]  # (.4x.15+.8x.05)/.2
    assert watch.curves["watch/update_share"] == {OTHERS: [(1, pytest.approx(0.4))]}  # no '*'
    assert domain_watch([(0, "a", "train_pass_rate", 1.0)]) is None


CHECK_IMAGES = """<script>window.addEventListener("load", () => {
  const all = [...document.images], ok = all.filter(i => i.complete && i.naturalWidth > 0);
  const out = document.createElement("pre"); out.id = "image-check";
  out.textContent = `loaded ${ok.length} of ${all.length}`; document.body.appendChild(out);
});</script>"""


@pytest.mark.skipif(not shutil.which("chromium"), reason="headless Chromium is not installed")
def test_the_domains_image_loads_in_headless_chromium(watched, tmp_path):
    root, _ = watched
    page = tmp_path / "report.html"
    plots = write_report(str(root), str(page))
    page.write_text(page.read_text().replace("</body>", CHECK_IMAGES + "</body>"))
    done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=5000", "--dump-dom", f"file://{page}"],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="image-check">([^<]*)</pre>', done.stdout)
    assert found, done.stderr[-2000:]
    assert found.group(1) == f"loaded {len(plots)} of {len(plots)}"
