"""`flywheel eval` end to end on the real Beam pipeline, sandbox and tables: a model as it is (the
`standin` policy: numbers from its seed) and a run's checkpoint are evaluated the same way, into `evaluations` rows of one schema, with N sampled
and one greedy attempt per task, answer keys where answers compare, visible scores where tasks
show tests, the policy's judgment of each answer, and the summary in `metrics`."""

import json

import pytest

from flywheel.cli import main as cli_main
from flywheel.settings.layout import RunLayout
from flywheel.reports.sql import query
from flywheel.transforms.policy_model import close_worker_model

pytestmark = pytest.mark.slow  # three Beam pipelines: an eval, a one-iteration run, an eval of it

TASKS = ["--domains", "add,chat_code", "--heldout-per-domain", "3", "--sandbox", "local"]


def flywheel(*argv):
    close_worker_model()
    try:
        return cli_main.main(list(argv))
    finally:
        close_worker_model()


def test_a_model_and_a_runs_checkpoint_evaluate_into_one_schema(tmp_path, capsys):
    out = tmp_path / "base"
    assert flywheel("eval", "--policy", "standin", *TASKS, "--n", "4", "--k", "1,2,4",
                    "--out", str(out), "--format", "json") == 0
    printed = json.loads(capsys.readouterr().out)
    by_domain = {s["domain"]: s for s in printed["evaluations"][0]["summaries"]}
    assert set(by_domain) == {"add", "chat_code", "all"}
    assert {"pass@1", "pass@2", "pass@4", "greedy_pass@1", "oracle_best_of_4"} <= set(by_domain["add"])
    assert by_domain["add"]["maj@4"] is not None and by_domain["chat_code"]["maj@4"] is None
    assert by_domain["chat_code"]["best_of_4_visible"] is not None

    base = RunLayout(str(out)).read_table("evaluations")
    rows = base.to_pylist()
    assert len(rows) == 2 * 3 * (4 + 1)  # domains x tasks x (N sampled + 1 greedy)
    assert sum(r["greedy"] for r in rows) == 6 and {r["sampling_temperature"] for r in rows if r["greedy"]} == {0.0}
    assert all(r["self_judgment"] in ("yes", "no", "unreadable") and 0 <= r["self_score"] <= 1 for r in rows)
    assert all(r["visible_score"] is not None for r in rows  # scored code shows its visible tests
               if r["domain"] == "chat_code" and r["verdict"] != "error")
    assert any(r["answer_key"] for r in rows if r["domain"] == "add")
    assert all(r["answer_key"] is None for r in rows if r["domain"] == "chat_code")
    names = {r["name"] for r in RunLayout(str(out)).read_table("metrics").to_pylist()}
    assert any(n.startswith("eval/pass@4[") for n in names)

    run = tmp_path / "run"
    assert flywheel("run", "--run-dir", str(run), "--iterations", "1", "--domains", "add",
                    "--policy", "standin", "--tasks-per-domain", "4", "--heldout-per-domain", "2",
                    "--n-samples", "2", "--seed", "0") == 0
    assert flywheel("eval", "--run-dir", str(run), "--n", "2", "--k", "1,2", *TASKS) == 0
    trained = RunLayout(str(run)).read_table("evaluations")
    assert trained.schema == base.schema and trained.num_rows == 2 * 3 * 3
    assert {r["iteration"] for r in trained.to_pylist()} == {1}  # the policy version checkpoint 0 is
    _, compared = query(str(run), "SELECT domain, avg((verdict = 'pass')::INT) FROM evaluations "
                                  "WHERE greedy GROUP BY 1 ORDER BY 1")
    assert [d for d, _ in compared] == ["add", "chat_code"]


def test_a_run_evaluates_its_policy_every_iteration_when_asked(tmp_path):
    run = tmp_path / "run"
    assert flywheel("run", "--run-dir", str(run), "--iterations", "1", "--domains", "add",
                    "--policy", "standin", "--tasks-per-domain", "4", "--heldout-per-domain", "5",
                    "--n-samples", "2", "--seed", "0", "--eval-every", "1", "--eval-n", "3",
                    "--eval-k", "1,2,3,8", "--eval-tasks", "2") == 0
    rows = RunLayout(str(run)).read_table("evaluations").to_pylist()
    assert sorted({r["iteration"] for r in rows}) == [0, 1]  # each policy version, the last too
    assert len(rows) == 2 * 2 * (3 + 1) and {r["evaluation"] for r in rows} == {"n=3,t=1"}
    _, named = query(str(run), "SELECT DISTINCT iteration, name FROM metrics WHERE name LIKE 'eval/pass@%' "
                               "AND domain = 'add' ORDER BY 1, 2")
    assert named == [(k, f"eval/pass@{n}[n=3,t=1]") for k in range(2) for n in (1, 2, 3)]  # 8 > n: left out


def test_an_ablation_grid_on_a_multi_turn_domain(tmp_path, capsys):
    """turns x tool-call limit x N with the tiny policy: one evaluation per cell, side by side."""
    out = tmp_path / "grid"
    assert flywheel("eval", "--policy", "tiny", "--domains", "fix_function", "--heldout-per-domain", "2",
                    "--grid", "max_turns=1,2", "--grid", "max_tool_calls=0,1", "--grid", "n=2",
                    "--k", "1,2", "--no-self-verify", "--out", str(out)) == 0
    shown = capsys.readouterr().out
    rows = RunLayout(str(out)).read_table("evaluations").to_pylist()
    names = sorted({r["evaluation"] for r in rows})
    assert len(names) == 4 and "max_turns=2,max_tool_calls=1,n=2" in names
    for name in names:
        n = int(name.rsplit("n=", 1)[1])
        cell = [r for r in rows if r["evaluation"] == name]
        assert len(cell) == 2 * (n + 1) and all(r["self_score"] is None for r in cell)
        assert max(len(r["turns"]) for r in cell) <= int(name.split("max_turns=")[1].split(",")[0])
    assert "ablation grid" in shown
