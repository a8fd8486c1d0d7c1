"""Episodes that run free (transforms/episode_loop.py), for real: the rollout pipeline on the
DirectRunner with the tiny policy and the local sandbox gives the same rows whatever the number of
loops per worker (and under multi_processing); the graph does not grow with turns; a scripted
episode that ends is emitted before a sibling still sleeping in a shell call; a table written
before turns recorded their digest still reads."""

import json

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.tools import ToolCall, render_call
from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, Rollout, run_rollout
from flywheel.schemas import read_table, rows_to_file_table
from flywheel.schemas.compare import without_volatile
from flywheel.schemas.tables import TURN
from flywheel.transforms.episode_loop import _RunEpisodes
from flywheel.transforms.expand import expand_task
from flywheel.transforms.policy_model import PolicyModelHandler
from flywheel.transforms.turn import start_episode

pytestmark = pytest.mark.xdist_group("episodes")
SPEC = IterationSpec("loop", 0, policy_version=0, checkpoint_uri=None)


def config(concurrency=16, max_turns=3, **rollout) -> RunConfig:
    settings = {"domains": ("fix_function",), "tasks_per_domain": 3, "heldout_per_domain": 0,
                "n_samples": 4, **rollout}
    return RunConfig(seed=7, iterations=1, rollout=RolloutSettings(**settings), policy=PolicySpec(),
                     episode=EpisodeSettings(max_turns=max_turns, concurrency=concurrency))


def rows_of(run_dir, cfg, beam_args=()):
    run_rollout(cfg, SPEC, RunLayout(str(run_dir)), PipelineOptions(list(beam_args)))
    rows = RunLayout(str(run_dir)).read_table("trajectories").to_pylist()
    return sorted((without_volatile(r) for r in rows), key=lambda r: (r["task_id"], r["sample_index"]))


@pytest.fixture(scope="module")
def sixteen_loops(tmp_path_factory):
    return rows_of(tmp_path_factory.mktemp("c16"), config(concurrency=16))


def test_rows_are_the_same_with_one_loop_or_sixteen(sixteen_loops, tmp_path):
    one = rows_of(tmp_path, config(concurrency=1))
    assert len(one) == 12 and any(len(r["turns"]) > 1 for r in one)
    assert one == sixteen_loops
    digests = {t["checkpoint_digest"] for r in one for t in r["turns"]}
    assert digests == {r["checkpoint_digest"] for r in one} and None not in digests


@pytest.mark.slow  # two worker processes start
def test_rows_are_the_same_under_multi_processing(sixteen_loops, tmp_path):
    other = rows_of(tmp_path, config(concurrency=16), ["--direct_running_mode=multi_processing",
                                                       "--direct_num_workers=2"])
    assert other == sixteen_loops


def transform_count(max_turns: int, tmp_path) -> int:
    pipeline = beam.Pipeline(options=PipelineOptions([]))
    _ = pipeline | "Rollout" >> Rollout(config(max_turns=max_turns), SPEC, RunLayout(str(tmp_path)))

    class Count(beam.pipeline.PipelineVisitor):
        n = 0

        def visit_transform(self, node):  # leaf transforms
            Count.n += 1

        def enter_composite_transform(self, node):
            Count.n += 1
    pipeline.visit(Count())
    return Count.n


def test_the_graph_does_not_grow_with_turns(tmp_path):
    counts = {turns: transform_count(turns, tmp_path) for turns in (2, 32, 200)}
    print("pipeline transforms by max_turns:", counts)
    assert len(set(counts.values())) == 1


def shell_task(name: str) -> dict:
    return {"task_id": f"shell-{name}", "domain": "shell", "split": "train", "prompt": f"task {name}: make y.txt hold 1 (the scripted policy keys on 64 chars)",
            "files": {"x.txt": "1\n"}, "expect": {"y.txt": "1"}, "max_new_tokens": 200}


def script(path, actions: dict[str, list[dict]]) -> str:
    with open(path, "w") as f:
        for name, calls in actions.items():
            f.write(json.dumps({"prompt": shell_task(name)["prompt"],
                                "actions": [render_call(ToolCall(c["name"], c["arguments"])) for c in calls]}) + "\n")
    return str(path)


def started(names, settings):
    out = []
    for name in names:
        attempt, = expand_task(shell_task(name), run_id="r", iteration=0, policy_version=0, seed=0,
                               n_samples=1, temperature=1.0, mode="train")
        out.append(start_episode(attempt, settings))
    return out


def shell(command):
    return {"name": "run_shell", "arguments": {"command": command}}


SUBMIT = {"name": "submit", "arguments": {"answer": "done"}}


def test_an_ended_episode_leaves_before_a_slow_sibling(tmp_path):
    """Five scripted shell episodes in one batch: `slow` sleeps in its first two calls; the four
    others take three quick turns each and are emitted, in the order they end, before it."""
    fast = [f"fast{i}" for i in range(4)]
    path = script(tmp_path / "s.jsonl", {"slow": [shell("sleep 1"), shell("sleep 1; echo slept"), SUBMIT],
                                         **{n: [shell("echo a"), shell("cat x.txt"), SUBMIT] for n in fast}})
    settings = EpisodeSettings(max_turns=5, concurrency=8)
    handler = PolicyModelHandler(None, backend="scripted", options={"script": path})
    dofn = _RunEpisodes(handler, settings, "local")
    dofn.setup()
    try:
        emitted = [a for a in dofn.process(started(["slow", *fast], settings)) if not hasattr(a, "tag")]
    finally:
        dofn.teardown()
    assert [a.task_id for a in emitted][-1] == "shell-slow"
    assert sorted(a.task_id for a in emitted[:-1]) == [f"shell-{n}" for n in fast]
    assert all(a.episode_end == "submitted" and a.execution is not None for a in emitted)
    assert [len(a.turns) for a in emitted] == [3, 3, 3, 3, 3]
    assert "slept" in emitted[-1].turns[1]["observation"]


@pytest.mark.slow  # 2 x 200 sandbox calls
def test_two_hundred_turn_episodes_run_through_the_pipeline(tmp_path):
    names = ["long0", "long1"]
    path = script(tmp_path / "s.jsonl", {n: [shell(f"echo {i}") for i in range(199)] + [SUBMIT]
                                         for n in names})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({k: v for k, v in shell_task(n).items()
                                         if k != "split"}) + "\n"
                             for n in names))
    cfg = RunConfig(seed=1, iterations=1, policy=PolicySpec(backend="scripted", options=(f"script={path}",)),
                    rollout=RolloutSettings(domains=("shell",), task_files=(str(tasks),),
                                            tasks_per_domain=0, heldout_per_domain=0, n_samples=1),
                    episode=EpisodeSettings(max_turns=200))
    rows = rows_of(tmp_path / "run", cfg)
    assert len(rows) == 2 and all(len(r["turns"]) == 200 and r["episode_end"] == "submitted" for r in rows)
    assert transform_count(2, tmp_path) == transform_count(200, tmp_path)


def test_a_table_written_before_turn_digests_reads_them_as_null(tmp_path):
    table = rows_to_file_table("trajectories", [{"task_id": "t", "turns": [{"action": "a", "segment": 0}]}])
    old_turn = pa.struct([f for f in TURN if f.name != "checkpoint_digest"])  # schema 1.6
    i = table.schema.get_field_index("turns")
    table = table.set_column(i, pa.field("turns", pa.list_(old_turn)), table.column("turns").cast(pa.list_(old_turn)))
    path = tmp_path / "tables/trajectories/iteration=0/domain=x/part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table, path)
    turn, = read_table(str(tmp_path / "tables/trajectories"), "trajectories").column("turns").to_pylist()[0]
    assert turn["action"] == "a" and turn["checkpoint_digest"] is None
