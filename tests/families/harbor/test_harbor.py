"""Harbor task folders, for real: the shipped examples read on sight and validate (solution 1,
nothing 0) on `local`; a golden episode through the episode machinery solves them; hostile
folders are refused naming the path; a test.sh that writes no reward earns 0 with the error
classified; an agent that writes /logs/verifier/reward.txt itself, rewrites /tests, leaves a
daemon writing the reward file or plants Python start-up code in its home earns nothing."""

import json
import os
from pathlib import Path

import pytest

from flywheel.cli.tasks import load_tasks
from flywheel.cli.tasks import main as tasks_main
from flywheel.domains.registry import get_domain
from flywheel.families.harbor.dockerfile import parse_dockerfile
from flywheel.families.harbor.verifier import RewardError, parse_reward
from flywheel.verifiers import get_verifier

EXAMPLES = Path(__file__).resolve().parents[3] / "families" / "harbor" / "examples"


def examples():
    tasks, problems = load_tasks([str(EXAMPLES)])
    assert not problems
    return {t["task_id"]: t for t in tasks}


@pytest.mark.slow  # ten cold sandbox runs, about 4 s
def test_the_examples_validate_on_local(capsys):
    assert tasks_main(["tasks", "validate", str(EXAMPLES), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["tasks"] == 5 and report["problems"] == []
    assert set(report["formats"]) == {str(EXAMPLES / n / "task.toml") for n in os.listdir(EXAMPLES)}


def test_a_golden_episode_solves_and_a_hostile_one_earns_nothing(sandbox, play):
    tasks = examples()
    for name in ("fix-median", "csv-totals"):
        task = tasks[name]
        verdict, state, _ = play(task, sandbox, [
            {"name": "run_shell", "arguments": {"command": "ls -R /app && cd /app"}},
            {"name": "run_shell", "arguments": {"command": task["reference_script"]}},
            {"name": "submit", "arguments": {"answer": ""}}])
        assert (verdict.reward, verdict.verdict) == (1.0, "pass"), verdict
    cheat = ("mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt\n"
             "echo '{\"reward\": 1}' > /logs/verifier/reward.json\n"
             "printf 'echo 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh\n"
             "setsid bash -c 'while true; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt;"
             " sleep 0.01; done' >/dev/null 2>&1 &\n"
             "site=$HOME/.local/lib/python3.11/site-packages; mkdir -p $site\n"
             "echo 'import os; os.makedirs(\"/logs/verifier\", exist_ok=True); "
             "open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")' > $site/usercustomize.py\n"
             "ln -sf /logs/verifier/reward.txt /app/count.txt\n")
    domain, verifier = get_domain("harbor"), get_verifier("harbor_reward")
    for name in ("count-words", "fix-median"):
        task = tasks[name]
        verdict = verifier(task, cheat, domain.run(sandbox, task, cheat))
        assert (verdict.reward, verdict.verdict) == (0.0, "fail"), (name, verdict)


def test_a_test_script_that_writes_no_reward_earns_0_with_the_error_named(sandbox):
    task = {**examples()["count-words"], "tests": {"test.sh": "#!/bin/bash\necho checked\nexit 3\n"}}
    domain = get_domain("harbor")
    verdict = get_verifier("harbor_reward")(task, task["reference_script"],
                                            domain.run(sandbox, task, task["reference_script"]))
    assert (verdict.reward, verdict.verdict) == (0.0, "fail")
    assert verdict.components["error:RewardFileNotFoundError"] == 1.0
    assert "test.sh exit 3" in verdict.detail and "checked" in verdict.detail


def _folder(root, files, links=()):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for rel, target in links:
        (root / rel).symlink_to(target)
    return root


GOOD = {"task.toml": "[verifier]\ntimeout_sec = 10\n", "instruction.md": "do it",
        "environment/Dockerfile": "FROM python:3.11\nWORKDIR /app\nCOPY a.txt .\n",
        "environment/a.txt": "a", "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"}


@pytest.mark.parametrize("files, links, problem", [
    ({}, [("environment/secret", "/etc/passwd")], "environment/secret: a link out of the task folder"),
    ({"environment/Dockerfile": "FROM python:3.11\nCOPY ../../x /app/\n"}, [], "leaves the build context"),
    ({"environment/bad\nname": "x"}, [], "control characters"),
    ({"task.toml": "[verifier\n"}, [], "task.toml: not readable TOML"),
    ({"task.toml": "[agent]\ntimeout_sec = -1\n"}, [], "`agent.timeout_sec` must be a positive number"),
], ids=["link-out", "copy-escape", "newline-name", "bad-toml", "bad-timeout"])
def test_hostile_folders_are_refused_naming_the_path(tmp_path, files, links, problem):
    folder = _folder(tmp_path / "t", {**GOOD, **files}, links)
    tasks, problems = load_tasks([str(tmp_path)])
    assert not tasks and len(problems) == 1 and problem in problems[0], problems
    assert str(folder / "task.toml") in problems[0]


def test_what_a_dockerfile_needs():
    plain = parse_dockerfile("# c\nFROM python:3.11-slim\nWORKDIR /app\nCOPY a b /app/\nENV X=1 \\\n Y=2\n")
    assert (plain.needs_image, plain.workdir, plain.env) == (None, "/app", {"X": "1", "Y": "2"})
    for text, why in [("FROM python:3.11\nRUN pip install x\n", "RUN pip install x"),
                      ("FROM alpine\n", "not a plain base"),
                      ("FROM python:3 AS b\nFROM b\n", "multi-stage"),
                      ("FROM ubuntu\nCOPY --from=b /x /app/\n", "--from"),
                      ("FROM ubuntu\nCOPY x /etc/x\n", "outside the working directory")]:
        assert why in (parse_dockerfile(text).needs_image or ""), text


@pytest.mark.parametrize("files, reward, kind", [
    (('{"reward": 0.5, "style": 1}', None), 0.5, None),
    (('{"a": 1, "b": 0}', "1"), 0.5, None),          # reward.json first, its mean without `reward`
    ((None, " 1\n"), 1.0, None),
    ((None, ""), None, "RewardFileEmptyError"),
    ((None, "yes"), None, "VerifierOutputParseError"),
    (('{"reward": true}', None), None, "VerifierOutputParseError"),
    (('{"reward": NaN}', None), None, "VerifierOutputParseError"),
    ((None, None), None, "RewardFileNotFoundError"),
])
def test_reward_files_read_as_harbor_reads_them(files, reward, kind):
    if kind is None:
        assert parse_reward(*files)[0] == reward
    else:
        with pytest.raises(RewardError) as e:
            parse_reward(*files)
        assert e.value.kind == kind


@pytest.mark.slow  # a whole `flywheel run` (Beam rollout, training step), about 25 s
def test_a_scripted_run_solves_every_example(tmp_path):
    from flywheel.cli.main import main
    from flywheel.domains.tools import ToolCall, render_call
    from flywheel.settings.layout import RunLayout
    tasks = examples()
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps({"prompt": t["prompt"], "actions": [
        render_call(ToolCall("run_shell", {"command": "ls"})),
        render_call(ToolCall("run_shell", {"command": t["reference_script"]})),
        render_call(ToolCall("submit", {"answer": ""}))]}) + "\n" for t in tasks.values()))
    assert main(["run", "--run-dir", str(tmp_path / "run"), "--tasks", str(EXAMPLES),
                 "--policy", "scripted", "--set", f"policy.options=script={script}",
                 "--iterations", "1", "--n-samples", "1", "--tasks-per-domain", "5",
                 "--heldout-per-domain", "0", "--max-turns", "4", "--eval-every", "0"]) == 0
    rows = RunLayout(str(tmp_path / "run")).read_table("trajectories").to_pylist()
    assert sorted((r["task_id"], r["reward_raw"], len(r["turns"])) for r in rows) == \
        sorted((name, 1.0, 3) for name in tasks)
