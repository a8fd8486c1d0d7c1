"""Every path that scores attempts applies the bounds: the Beam Verify stage (a TestPipeline) and
`flywheel verify` (which also takes --sandbox-options to choose the sandbox path)."""

import json

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from flywheel.domains.registry import get_domain
from flywheel.cli import verify as verify_cli
from flywheel.transforms.expand import expand_task
from flywheel.transforms.verify import Verify
from flywheel.verifiers.bounded import Bounds

HANGS = "\\boxed{exp(exp(exp(exp(100))))}"
MATH = get_domain("math_linear").make_task("train", 0, 0)
RIGHT = f"\\boxed{{{MATH['answer']}}}"


def attempt(task, response, index):
    one, = expand_task(task, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                       temperature=0.0, mode="eval")
    return one.replace(response=response, sample_index=index)


def test_the_beam_verify_stage_bounds_every_verification():
    broken = {**MATH, "answer": "@@ not math"}  # the task's own defect
    attempts = [attempt(MATH, RIGHT, 0), attempt(MATH, HANGS, 1), attempt(broken, RIGHT, 2)]
    with TestPipeline() as p:
        out = p | beam.Create(attempts) | Verify(Bounds(deadline_s=3))
        scored = out["attempts"] | "Scored" >> beam.Map(
            lambda a: (a.sample_index, a.verdict, a.reward_raw, a.failure))
        errors = out["errors"] | "Errors" >> beam.Map(
            lambda e: (e["sample_index"], e["kind"], e["error_type"]))
        assert_that(scored, equal_to([(0, "pass", 1.0, None), (1, "fail", 0.0, None),
                                      (2, "error", 0.0, "verifier")]), label="verdicts")
        assert_that(errors, equal_to([(1, "model", "verifier_deadline"),
                                      (2, "environment", "ValueError")]), label="error_rows")


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_flywheel_verify_bounds_every_verification(tmp_path, capsys):
    invoice = get_domain("extract_invoice").make_task("train", 0, 0)
    tasks = write_jsonl(tmp_path / "t.jsonl", [MATH, invoice])
    responses = write_jsonl(tmp_path / "r.jsonl", [
        {"task_id": MATH["task_id"], "response": HANGS},
        {"task_id": MATH["task_id"], "response": RIGHT},
        {"task_id": invoice["task_id"], "response": json.dumps({**invoice["expected"], "total": 10**4000})},
        {"task_id": invoice["task_id"], "response": "[" * 900 + "]" * 900}])
    assert verify_cli.main(["verify", "--tasks", tasks, "--responses", responses,
                            "--verify-deadline", "3", "--verify-memory-mb", "512"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["verdict"], x["filtered"]) for x in lines] == [("fail", False), ("pass", False),
                                                              ("fail", False), ("fail", False)]
    assert lines[0]["reward"] == 0.0 and lines[0]["detail"].startswith("verifier_deadline")
    assert lines[2]["reward"] < 1.0 and lines[3]["reward"] == 0.0


def test_flywheel_verify_takes_sandbox_options(tmp_path, capsys):
    he = get_domain("py_functions").tasks("train")[0]
    tasks = write_jsonl(tmp_path / "t.jsonl", [he])
    responses = write_jsonl(tmp_path / "r.jsonl", [{"task_id": he["task_id"],
                                                    "response": he["canonical_solution"]}])
    args = ["verify", "--tasks", tasks, "--responses", responses, "--sandbox", "local"]
    assert verify_cli.main(args + ["--sandbox-options", "warm=false"]) == 0  # the cold path
    assert json.loads(capsys.readouterr().out)["verdict"] == "pass"
    assert verify_cli.main(args + ["--sandbox-options", "warm=true,pool_size=1"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "pass"
    assert verify_cli.main(args + ["--sandbox-options", "no_such_option=1"]) == 2
    assert "warm" in capsys.readouterr().err  # names what the backend takes
    assert verify_cli.main(args + ["--sandbox-options", "warm"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
