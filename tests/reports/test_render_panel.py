"""The render panel: a committed iteration's best and worst render attempts, drawn again in the
real `local` sandbox beside their targets, as inline PNGs."""

import json
import os
import re
import tempfile

import pytest

from flywheel.domains.registry import get_domain
from flywheel.reports.render_panel import best_and_worst, render_panel_for_run
from flywheel.schemas import TABLES
from flywheel.schemas.write import write_rows

IMAGE = re.compile(r'<img alt="(target|response)" width="128" height="128" src="data:image/png;base64,[A-Za-z0-9+/=]+">')


@pytest.fixture(scope="module")
def render_env():
    pytest.importorskip("matplotlib")
    from flywheel.families.render.render_environment import copy_installed
    before = os.environ.get("FLYWHEEL_ENVIRONMENTS")
    os.environ["FLYWHEEL_ENVIRONMENTS"] = os.path.join(tempfile.gettempdir(), "flywheel-render-envs")
    copy_installed()
    yield
    if before is None:
        os.environ.pop("FLYWHEEL_ENVIRONMENTS")
    else:
        os.environ["FLYWHEEL_ENVIRONMENTS"] = before


def row(task, response, reward):
    out = dict.fromkeys(TABLES["trajectories"].names)
    out.update(run_id="r", iteration=0, domain=task["domain"], task_id=task["task_id"], group_id="g",
               sample_index=0, policy_version=0, response=response, reward_raw=reward, verdict="fail")
    return out


def test_best_and_worst_pick_each_row_once():
    rows = [{"task_id": str(i), "reward_raw": r} for i, r in enumerate([0.2, 1.0, 0.0, 0.5])]
    assert [r["task_id"] for r in best_and_worst(rows, 2)] == ["1", "3", "2", "0"]
    assert [r["task_id"] for r in best_and_worst(rows[:1], 2)] == ["0"]


def test_the_panel_shows_targets_beside_renders(tmp_path, render_env):
    domain = get_domain("chart_to_code")
    task = domain.make_task("train", 3, 11)
    rows = [row(task, task["answer"], 1.0), row(task, "```python\nimport matplotlib.pyplot as plt\n"
                                                     "plt.plot([1, 2], [3, 1])\n```", 0.12)]
    write_rows(f"{tmp_path}/tables/trajectories/iteration=0/domain=chart_to_code/part-00000.parquet",
                  "trajectories", rows)
    (tmp_path / "run.json").write_text(json.dumps({"seed": 11, "config": {}}))
    (tmp_path / "iterations" / "0").mkdir(parents=True)
    (tmp_path / "iterations" / "0" / "_COMMITTED").write_text("")
    fragment = render_panel_for_run(str(tmp_path))
    assert fragment.startswith("<section><h2>Renders of iteration 0</h2>")
    assert [m.group(1) for m in IMAGE.finditer(fragment)] == ["target", "response"] * 2
    assert "reward 1.000 (now 1.000, pass)" in fragment and "reward 0.120" in fragment
    (tmp_path / "out.html").write_text(f"<html><body>{fragment}</body></html>")


def test_no_render_domain_no_panel(tmp_path):
    assert render_panel_for_run(str(tmp_path)) == ""
