"""Repository episodes through the real Beam rollout: a scripted policy replaying each task's
golden trajectory solves every one, padded to 12 turns; a do-nothing policy solves none; the rows
read back from Parquet carry each turn's action and the final diff as the response."""

import json

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.registry import get_domain
from flywheel.domains.tools import ToolCall, render_call
from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout
from flywheel.transforms.policy_model import close_worker_model

pytestmark = pytest.mark.slow  # two full Beam rollouts

DOMAIN = get_domain("repo_bugs")
TURNS = 12


def padded(task):
    explore = [{"name": "list_files", "arguments": {}}, {"name": "run_visible_tests", "arguments": {}}]
    calls = [explore[i % 2] for i in range(TURNS - len(task["golden"]))] + task["golden"]
    return [render_call(ToolCall(c["name"], c["arguments"])) for c in calls]


def rollout(tmp_path, name, actions, **settings):
    tasks = [DOMAIN.make_task("train", i, 0) for i in range(3)]
    script = tmp_path / f"{name}.jsonl"
    script.write_text("".join(json.dumps({"prompt": t["prompt"], "actions": actions(t)}) + "\n"
                              for t in tasks))
    config = RunConfig(seed=0, policy=PolicySpec("scripted", options=(f"script={script}",)),
                       rollout=RolloutSettings(domains=("repo_bugs",), tasks_per_domain=3,
                                               heldout_per_domain=0, n_samples=1),
                       episode=EpisodeSettings(max_turns=TURNS, **settings))
    layout = RunLayout(str(tmp_path / name))
    close_worker_model()
    try:
        run_rollout(config, IterationSpec(name, 0, 0, None), layout, PipelineOptions([]))
    finally:
        close_worker_model()
    rows = sorted(layout.read_table("trajectories").to_pylist(), key=lambda r: r["task_id"])
    return tasks, rows


def test_golden_trajectories_solve_through_the_turn_stages(tmp_path):
    tasks, rows = rollout(tmp_path, "golden", padded)
    assert [r["task_id"] for r in rows] == [t["task_id"] for t in tasks]
    for task, row in zip(tasks, rows):
        assert (row["reward_raw"], row["verdict"], row["episode_end"]) == (1.0, "pass", "submitted"), row
        assert len(row["turns"]) == TURNS and row["response"] == task["answer"]
        assert row["turns"][0]["action"].startswith('<tool_call>{"name": "list_files"')
        tests = [t for t in row["turns"] if '"run_visible_tests"' in t["action"]]
        assert tests[-1]["reward"] == 1.0 and tests[0]["reward"] < 1.0  # fixed by the edits


def test_summarized_episodes_solve_and_land_in_the_tables(tmp_path):
    """A budget the episodes outgrow, `--context summarize`: the scripted policy's summaries end
    segments read back from Parquet, every context within the budget, and each task solved."""
    budget = 5000
    tasks, rows = rollout(tmp_path, "summarize", padded, tokens=budget, context="summarize",
                          keep_turns=2)
    for task, row in zip(tasks, rows):
        assert (row["reward_raw"], row["episode_end"]) == (1.0, "submitted"), row["verdict"]
        summaries = [s["summary"] for s in row["segments"] if s["summary"] is not None]
        assert summaries and all(s.startswith("Summary: ") for s in summaries)
        assert {s["context"] for s in row["segments"]} == {"summarize"}
        for segment in [*row["segments"], row]:
            assert len(segment["prompt_token_ids"]) + len(segment["response_token_ids"]) <= budget


def test_doing_nothing_solves_nothing(tmp_path):
    _, rows = rollout(tmp_path, "idle", lambda task: [])  # every turn: an empty patch
    for row in rows:
        assert (row["reward_raw"], row["episode_end"]) == (0.0, "max_turns"), row
        assert row["response"] == "" and len(row["turns"]) == TURNS
