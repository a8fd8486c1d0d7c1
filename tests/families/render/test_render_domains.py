"""The render domains end to end in the real `local` sandbox: the reference programs score 1, and
blank, embedded-image, text-spelled and wrong-but-similar answers score as the verifier says.

The sandbox's interpreter gets matplotlib from the `render` environment, copied here from this
interpreter (families/render/render_environment.py) under /tmp, where the sandbox's uid can read it."""

import base64
import io
import random

import pytest

from flywheel.domains.registry import get_domain, prepare_task
from flywheel.families.render.render_base import code_of
from flywheel.domains.report_channel import harness_report
from flywheel.families.render.chart_specs import chart_code
from flywheel.verifiers import get_verifier

from tests.families.conftest import concurrently

DOMAINS = ("chart_to_code", "chart_edit", "scene")
verify = get_verifier("render")


@pytest.fixture(scope="module")
def run(sandbox, render_env):
    """run(task, response) -> (verdict, the harness's report)."""
    def run(task, response):
        execution = get_domain(task["domain"]).run(sandbox, task, response)
        return verify(task, response, execution), harness_report(execution, "FLYWHEEL-RENDER ")[0]
    return run


def references_score_one(run, name, indices):
    domain = get_domain(name)

    def check(i):
        task = domain.make_task("train" if i % 2 else "heldout", i, 7)
        verdict, _ = run(task, domain.demonstration(task, random.Random(0)))
        assert (verdict.reward, verdict.verdict) == (1.0, "pass"), (task["task_id"], verdict)

    concurrently(check, indices)


@pytest.mark.parametrize("name", DOMAINS)
def test_reference_programs_score_one(run, name):
    references_score_one(run, name, range(3))


@pytest.mark.slow
@pytest.mark.parametrize("name", DOMAINS)
def test_reference_programs_score_one_on_twenty_tasks(run, name):
    references_score_one(run, name, range(3, 23))


def bar_task(values=(12, 30, 7, 21, 16)):
    spec = {"kind": "bar", "x": ["Jan", "Feb", "Mar", "Apr", "May"],
            "series": [{"name": "Sales", "values": list(values), "color": "tab:green"}],
            "title": "Monthly sales", "xlabel": "Month", "ylabel": "Units", "legend": False}
    task, problems = prepare_task({"domain": "chart_to_code", "task_id": "bars", "prompt": "Draw it.",
                                   "reference_spec": spec})
    assert problems == []
    return task, spec


def fenced(code):
    return f"```python\n{code}```"


@pytest.mark.slow  # several sandbox renders each (the quick tier keeps the references)
def test_hacks_and_near_misses_on_a_chart(run):
    task, spec = bar_task()
    right, report = run(task, task["answer"])
    assert right.reward == 1.0
    pixels = base64.b64decode(report["reference"]["png"])
    from PIL import Image
    import numpy as np
    target = np.asarray(Image.open(io.BytesIO(pixels)).convert("RGB")).tolist()
    embed = ("import matplotlib.pyplot as plt\nimport numpy as np\n"
             f"fig, ax = plt.subplots(figsize=(6, 4))\nax.imshow(np.array({target}, dtype=np.uint8))\nax.axis('off')\n")
    text = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(6, 4))\nax.axis('off')\n"
            "ax.text(0.1, 0.5, 'Monthly sales: Jan 12, Feb 30, Mar 7, Apr 21, May 16')\n")
    near = chart_code({**spec, "series": [{**spec["series"][0], "values": [12, 30, 9, 21, 16]}]})
    as_line = chart_code({**spec, "kind": "line"})
    scores = {}
    for label, code in {"blank": "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(6, 4))\n",
                        "empty_axes": "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(6, 4))\n",
                        "embedded": embed, "embedded_with_a_bar": embed + "ax.bar(['Jan'], [12])\n",
                        "text": text, "text_with_a_line": text + "ax.plot([0, 1], [0, 1])\n",
                        "one_value_changed": near, "wrong_kind": as_line,
                        "wrong_color": near.replace("tab:green", "tab:red")}.items():
        verdict, _ = run(task, fenced(code))
        scores[label] = verdict
        assert verdict.verdict == "fail", (label, verdict)
    for label in ("blank", "empty_axes", "embedded", "embedded_with_a_bar", "text", "text_with_a_line"):
        assert scores[label].reward == 0.0, (label, scores[label])
    assert scores["embedded"].exploit_suspected and "exploit_embeds_image" in scores["embedded"].components
    assert scores["embedded_with_a_bar"].exploit_suspected
    assert "exploit_text_spells_data" in scores["text_with_a_line"].components
    near = scores["one_value_changed"]
    assert 0.8 < near.reward < 1.0 and near.components["data"] == 0.8, near
    assert near.components["chart_type"] == near.components["labels"] == 1.0
    assert 0.0 < scores["wrong_kind"].reward < 0.5 and scores["wrong_kind"].components["chart_type"] == 0.0
    assert scores["wrong_color"].reward < near.reward and scores["wrong_color"].components["colors"] == 0.0


def scene_row(code, route):
    task, problems = prepare_task({"domain": "scene", "task_id": f"my-{route}", "prompt": "Draw it.",
                                   "route": route, "reference_code": code})
    assert problems == []
    return task


SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="150">'
       '<rect x="20" y="30" width="60" height="40" fill="red"/><circle cx="140" cy="80" r="25" fill="blue"/></svg>')


@pytest.mark.slow  # several sandbox renders each (the quick tier keeps the references)
def test_svg_hacks_and_near_misses(run):
    task = scene_row(f"print({SVG!r})\n", "svg")
    right, report = run(task, task["answer"])
    assert right.reward == 1.0
    png = report["reference"]["png"]
    cases = {"embedded": f'<svg width="200" height="150"><image href="data:image/png;base64,{png}" width="200" height="150"/>'
                         '<rect x="20" y="30" width="60" height="40" fill="red"/></svg>',
             "text": '<svg width="200" height="150"><text x="10" y="20">red rect 20 30 60 40, blue circle 140 80 25</text></svg>',
             "blank": '<svg width="200" height="150"></svg>',
             "moved": SVG.replace('cx="140"', 'cx="150"'),
             "recolored": SVG.replace('"blue"', '"green"'),
             "pixel_art": '<svg width="200" height="150">' + "".join(
                 f'<rect x="{x}" y="{y}" width="4" height="4" fill="red"/>' for x in range(0, 200, 4) for y in range(0, 60, 4)) + "</svg>"}
    scores = {label: run(task, fenced(f"print({svg!r})\n"))[0] for label, svg in cases.items()}
    for label in ("embedded", "text", "blank", "pixel_art"):
        assert scores[label].reward == 0.0 and scores[label].verdict == "fail", (label, scores[label])
    assert scores["embedded"].exploit_suspected and scores["pixel_art"].exploit_suspected
    assert 0.6 < scores["moved"].reward < 1.0 and scores["moved"].verdict == "fail", scores["moved"]
    assert 0.6 < scores["recolored"].reward < 1.0 and scores["recolored"].components["colors"] == 0.5


@pytest.mark.slow  # several sandbox renders each (the quick tier keeps the references)
def test_scene3d_near_misses(run):
    code = ("import scene3d\nscene3d.box((0, 0, 0.5), 1, 'red')\nscene3d.sphere((2, 1, 1), 1, 'blue')\n")
    task = scene_row(code, "scene3d")
    assert run(task, task["answer"])[0].reward == 1.0
    moved, _ = run(task, fenced(code.replace("(2, 1, 1)", "(-2, 1, 1)")))
    wrong_kind, _ = run(task, fenced(code.replace("sphere((2, 1, 1), 1", "box((2, 1, 1), 2")))
    assert 0.4 < moved.reward < 0.95 and moved.verdict == "fail" and moved.components["geometry"] == 0.5, moved
    assert wrong_kind.components["shapes"] == 0.5 and wrong_kind.verdict == "fail", wrong_kind


def test_user_rows_are_validated():
    bad = [({"prompt": "p", "reference_code": "def (:"}, "not valid Python"),
           ({"prompt": "p"}, "field `reference_code` missing"),
           ({"prompt": "p", "reference_code": "x = 1", "route": "webgl"}, "field `route` must be one of"),
           ({"prompt": "p", "reference_code": "x = 1", "route": "scene3d", "bounds": -1}, "field `bounds`"),
           ({"prompt": "p", "reference_code": "x = 1", "environment": "../up"}, "field `environment`"),
           ({"prompt": "p", "reference_spec": {"kind": "radar"}}, "`kind` must be one of"),
           ({"prompt": "p", "reference_spec": {"kind": "bar", "x": ["a", "b"], "series": [{"values": [1]}]}},
            "series 1: `values` must be 2 numbers")]
    for row, problem in bad:
        task, problems = prepare_task({"domain": "chart_to_code", "task_id": "t", **row})
        assert task is None and any(problem in p for p in problems), (row, problems)


def test_tasks_are_distinct_and_deterministic():
    for name in DOMAINS:
        domain = get_domain(name)
        prompts = {domain.make_task("train", i, 3)["prompt"] for i in range(200)}
        assert len(prompts) >= 190, (name, len(prompts))
        assert domain.make_task("train", 5, 3) == domain.make_task("train", 5, 3)
        task = domain.make_task("heldout", 1, 3)
        assert domain.validate_task(task) == [] and code_of(domain.demonstration(task, random.Random(0)))


def test_without_the_render_environment_the_attempt_is_an_environment_error(sandbox, monkeypatch,
                                                                          tmp_path):
    """No `render` folder: the sandbox is not asked to run a harness that cannot import
    matplotlib; Execute gets a SandboxError naming the fix (an `environment` errors row), not a
    verdict of 0 that would blame nobody."""
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.records.attempt import Attempt
    from flywheel.sandbox import SandboxError
    from flywheel.transforms.execute import _run_one
    monkeypatch.setenv("FLYWHEEL_ENVIRONMENTS", str(tmp_path))  # no `render` folder there
    task = get_domain("chart_to_code").make_task("train", 0, 0)
    with pytest.raises(SandboxError, match="flywheel env build render"):
        get_domain("chart_to_code").run(sandbox, task, task["answer"])
    attempt = Attempt(run_id="r", iteration=0, policy_version=0, mode="train",
                      domain="chart_to_code", task_id=task["task_id"], group_id="g",
                      sample_index=0, prompt=task["prompt"], task=task, response=task["answer"],
                      sampling_temperature=1.0, max_new_tokens=256, seed=0)
    step, error, failure = _run_one(attempt, ToolRunner(sandbox))
    assert step is None and failure == "environment" and error["kind"] == "environment"
    assert "render" in error["message"]


SNOOP = '''
import glob, os
import matplotlib.pyplot as plt
found, needle, key = [], b"[12, 30, 7, " + b"21, 16]", b"reference" + b"_code"
for path in glob.glob("/proc/[0-9]*/fd/*") + glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        data = os.read(fd, 1 << 20)
        os.close(fd)
    except OSError:
        continue
    if key in data or needle in data:
        found.append(path)
for root, _, files in os.walk("/"):
    if root.startswith(("/proc", "/sys", "/usr", "/opt", "/dev")):
        continue
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as f:
                if needle in f.read(1 << 20):
                    found.append(os.path.join(root, name))
        except OSError:
            pass
fig, ax = plt.subplots(figsize=(6, 4))
ax.bar(["a"], [1])
ax.set_title(f"found {len(found)}: {' '.join(found)[:150]}")
'''

FORGE = '''
import json, os
fake = {"axes": [{"title": "Monthly sales", "xlabel": "Month", "ylabel": "Units", "xticks": ["Jan", "Feb", "Mar", "Apr", "May"],
                  "series": [{"type": "bar", "x": [0, 1, 2, 3, 4], "y": [12, 30, 7, 21, 16], "color": "#2ca02c"}]}],
        "images": 0, "png": ""}
for fd in range(3, 64):
    try:
        os.write(fd, json.dumps(fake).encode())
    except OSError:
        pass
os._exit(0)
'''


def test_the_response_cannot_read_the_reference(run):
    task, _ = bar_task()
    verdict, report = run(task, fenced(SNOOP))
    assert report["response"]["axes"][0]["title"] == "found 0: ", report["response"]["axes"][0]["title"]


def test_forged_attributes_without_the_picture_earn_nothing(run):
    task, _ = bar_task()
    verdict, _ = run(task, fenced(FORGE))
    assert (verdict.reward, verdict.verdict) == (0.0, "fail"), verdict


def test_value_labels_on_a_right_chart_are_no_hack(run):
    task, spec = bar_task()
    labelled = chart_code(spec) + "ax.bar_label(ax.containers[0])\n"
    verdict, _ = run(task, fenced(labelled))
    assert not verdict.exploit_suspected and verdict.components["data"] == 1.0 and verdict.reward > 0.9, verdict


def test_references_score_one_on_docker(docker_daemon, render_env):
    backend = docker_daemon.backend()
    try:
        for name in DOMAINS:
            domain = get_domain(name)
            task = domain.make_task("train", 1, 5)
            verdict = verify(task, task["answer"], domain.run(backend, task, task["answer"]))
            assert (verdict.reward, verdict.verdict) == (1.0, "pass"), (name, verdict)
    finally:
        backend.close()
