"""`flywheel report --html`: a self-contained page drawn from a real run's tables, rendered in
headless Chromium, where every image must load."""

import base64
import re
import shutil
import subprocess

import pytest

from flywheel.loop.driver import run_iterations
from flywheel.reports.html import write_report

from tests.run_configs import tiny_config

# A real two-iteration run, made once: one pytest worker runs the module.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("html_report")]

IMAGES = re.compile(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')
CHECK_IMAGES = """<script>window.addEventListener("load", () => {
  const all = [...document.images], ok = all.filter(i => i.complete && i.naturalWidth > 0);
  const out = document.createElement("pre"); out.id = "image-check";
  out.textContent = `loaded ${ok.length} of ${all.length}`; document.body.appendChild(out);
});</script>"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    bad = root / "bad.jsonl"
    bad.write_text("{not json\n")  # one `input` error row per iteration
    run_iterations(str(root / "run"), tiny_config(task_files=(str(bad),)))
    return root / "run"


def test_the_page_embeds_every_plot(run_dir, tmp_path):
    path = tmp_path / "report.html"
    done = subprocess.run(f"flywheel report --run-dir {run_dir} --html {path} | cat", shell=True,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout == (f"wrote {path}: Held-out pass@1, Training reward and pass rate, "
                           "Learning signal, Errors by kind, Trainer, Stage timeline, Domains\n"), done.stderr
    page = path.read_text()
    images = IMAGES.findall(page)
    assert [alt for alt, _ in images] == ["Held-out pass@1", "Training reward and pass rate",
                                          "Learning signal", "Errors by kind", "Trainer", "Stage timeline", "Domains"]
    for _, data in images:
        png = base64.b64decode(data)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing to fetch: self-contained
    assert "2 committed iterations" in page and "2 error rows" in page



def test_a_run_being_written_is_reported_from_its_committed_iterations(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    for table in ("metrics", "trajectories/iteration=2/domain=add", "errors"):
        part = copy / "tables" / table / ("" if "=" in table else "iteration=2") / "part-0.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(b"PAR1 half a file being written")
    plots = write_report(str(copy), str(tmp_path / "report.html"))
    assert len(plots) == 7 and "2 committed iterations" in (tmp_path / "report.html").read_text()


def chromium_dump(page_path) -> str:
    done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=5000", "--dump-dom", f"file://{page_path}"],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="image-check">([^<]*)</pre>', done.stdout)
    assert found, done.stderr[-2000:]
    return found.group(1)


@pytest.mark.skipif(not shutil.which("chromium"), reason="headless Chromium is not installed "
                    "(Debian package `chromium`; .ci/run installs it where apt can)")
def test_every_image_loads_in_headless_chromium(run_dir, tmp_path):
    page = (tmp_path / "report.html")
    write_report(str(run_dir), str(page))
    checked = tmp_path / "checked.html"
    checked.write_text(page.read_text().replace("</body>", CHECK_IMAGES + "</body>"))
    assert chromium_dump(checked) == "loaded 7 of 7"
    # the check can fail: an image whose data is no PNG does not load
    broken = tmp_path / "broken.html"
    first = IMAGES.search(checked.read_text()).group(2)
    not_png = base64.b64encode(b"no PNG here").decode()
    broken.write_text(checked.read_text().replace(first, not_png, 1))
    assert chromium_dump(broken) == "loaded 6 of 7"
    shot = tmp_path / "report.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1200,3400", f"file://{page}"],
                   capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
