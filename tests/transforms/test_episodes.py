"""Multi-turn episodes for real: the rollout's episode stage on the DirectRunner with the
tiny policy and the local sandbox, exact token accounting read back from Parquet, the loss mask,
a malformed tool call, and the same rows from the in-memory and the multi-process runner."""


import pytest
import torch
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.registry import get_domain
from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout
from flywheel.sandbox import shared_pool, usage
from flywheel.sandbox.pool import CONCURRENCY
from flywheel.schemas import validate_table
from flywheel.policy.backends.tiny import tokens
from flywheel.trainer.trajectory_batches import make_batch
from flywheel.transforms import execute
from flywheel.transforms.episodes import turn_stages
from flywheel.transforms.expand import expand_task
from flywheel.transforms.turn import act, end_episode, start_episode

# One pytest worker runs the module: its rollouts (module fixtures) are made once.
pytestmark = pytest.mark.xdist_group("episodes")

ENDS = {"solved", "submitted", "max_turns", "budget"}
CONTEXT = 48  # the tiny policy's


def config(**rollout) -> RunConfig:
    settings = {"domains": ("fix_function", "add"), "tasks_per_domain": 4, "heldout_per_domain": 2,
                "n_samples": 4, **rollout}
    return RunConfig(seed=5, iterations=1, rollout=RolloutSettings(**settings),
                     episode=EpisodeSettings(max_turns=3), policy=PolicySpec())


def rows_of(run_dir, cfg, beam_args=(), counters=None):
    spec = IterationSpec("episodes", 0, policy_version=0, checkpoint_uri=None)
    result = run_rollout(cfg, spec, RunLayout(str(run_dir)), PipelineOptions(list(beam_args)))
    if counters is not None:
        counters.update({c.key.metric.name: c.committed for c in result.metrics().query()["counters"]})
    table = RunLayout(str(run_dir)).read_table("trajectories")
    validate_table("trajectories", table)
    return sorted(table.to_pylist(), key=lambda r: (r["task_id"], r["sample_index"]))


IN_MEMORY_COUNTERS: dict = {}


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory):
    # The sandbox tallies are process-wide and reported by their growth: what earlier tests of
    # this pytest worker started (their own pools) is counted as reported, so the run's counters
    # hold only its own servers (in a Beam worker only the pipeline starts any).
    with execute._REPORTED_LOCK:
        execute._REPORTED.update(usage.snapshot())
    return rows_of(tmp_path_factory.mktemp("mem"), config(), counters=IN_MEMORY_COUNTERS)


def test_one_sandbox_pool_serves_every_stage_of_the_process(in_memory):
    """Execute and RunEpisodes share this process's one warm pool: one opened, no more servers
    than its size (a server per episode loop, at least the sandbox concurrency), and it is closed
    when the last stage lets it go."""
    assert turn_stages(config().rollout.domains, 3) == 3  # multi-turn: RunEpisodes and Execute
    size = max(CONCURRENCY, config().episode.concurrency)
    assert IN_MEMORY_COUNTERS["sandbox_pools_opened"] == 1
    started = IN_MEMORY_COUNTERS["sandbox_servers_started"]  # a server that died is replaced:
    assert 1 <= started - IN_MEMORY_COUNTERS.get("sandbox_servers_replaced", 0) <= size  # never grown per stage
    assert IN_MEMORY_COUNTERS.get("sandbox_uids_held_peak", 0) <= 2 * size  # servers + cold runs (a peak: reported when it grows)
    assert IN_MEMORY_COUNTERS["episodes_run"] == 16 + 2 and IN_MEMORY_COUNTERS["engine_batches"] >= 1  # held-out too
    assert IN_MEMORY_COUNTERS["tool_calls"] >= 16  # counted on the loop threads too
    assert shared_pool.open_backends() == {}


def test_episodes_keep_exact_token_accounting(in_memory):
    episodes = [r for r in in_memory if r["domain"] == "fix_function"]
    assert len(episodes) == 16 and {r["episode_end"] for r in episodes} <= ENDS
    assert any(len(r["turns"]) > 1 for r in episodes)
    for r in episodes:
        ids, mask, logprobs = r["response_token_ids"], r["response_mask"], r["response_logprobs"]
        assert len(ids) == len(mask) == len(logprobs)
        assert len(r["prompt_token_ids"]) + len(ids) <= CONTEXT
        assert 1 <= len(r["turns"]) <= 3
        covered = 0
        for k, turn in enumerate(r["turns"]):
            a, b = turn["action_start"], turn["action_end"]
            assert a == covered and mask[a:b] == [1] * (b - a)
            assert tokens.decode(ids[a:b]) == turn["action"] and turn["tool"] == "run_tests"
            covered = b
            if turn["observation_start"] is not None:  # it was shown: the next turn read it
                o, e = turn["observation_start"], turn["observation_end"]
                assert o == b and mask[o:e] == [0] * (e - o) and logprobs[o:e] == [0.0] * (e - o)
                assert ids[o:e] == tokens.encode_observation(turn["observation"])
                covered = e
            else:
                assert k == len(r["turns"]) - 1  # only the last observation goes unread
        assert covered == len(ids)
        # the episode's answer is its last action, scored for real by the final Execute/Verify
        assert r["response"] == r["turns"][-1]["action"] and r["sandbox_backend"] == "local"
        solved = r["episode_end"] == "solved"
        assert solved == (r["turns"][-1]["observation"] == "ok")
    singles = [r for r in in_memory if r["domain"] == "add"]
    assert singles and all(r["episode_end"] is None and r["response_mask"] is None for r in singles)


def test_the_loss_mask_excludes_observation_tokens(in_memory):
    rows = [r for r in in_memory if r["domain"] == "fix_function" and len(r["turns"]) > 1]
    batch = make_batch(rows, tokens.PAD)
    for i, r in enumerate(rows):
        p = len(r["prompt_token_ids"])
        expected = torch.zeros(batch["response_mask"].shape[1])
        expected[p - 1: p - 1 + len(r["response_mask"])] = torch.tensor(r["response_mask"], dtype=torch.float)
        assert torch.equal(batch["response_mask"][i], expected)
        assert batch["response_mask"][i].sum() < len(r["response_token_ids"])


def test_turn_credit_gives_each_action_its_turn_advantage(in_memory):
    rows = [r for r in in_memory if r["domain"] == "fix_function" and len(r["turns"]) > 1
            and r["turns"][0]["advantage"] is not None]
    assert rows
    batch = make_batch(rows, tokens.PAD, credit="turn")
    assert batch["advantages"].shape == batch["response_mask"].shape
    for i, r in enumerate(rows):
        p = len(r["prompt_token_ids"])
        for turn in r["turns"]:
            span = batch["advantages"][i, p - 1 + turn["action_start"]: p - 1 + turn["action_end"]]
            assert torch.allclose(span, torch.tensor(turn["advantage"], dtype=span.dtype))


@pytest.mark.slow  # a multi_processing run; the quick tier has one in test_rollout.py
def test_multi_process_runner_gives_the_same_rows(in_memory, tmp_path):
    other = rows_of(tmp_path, config(), ["--direct_running_mode=multi_processing",
                                         "--direct_num_workers=2"])
    timing = ("started_at", "finished_at", "sandbox_wall_ms", "sandbox_cpu_ms")

    def comparable(r):
        turns = [{k: v for k, v in t.items() if k != "duration_ms"} for t in r["turns"]]
        return {**{k: v for k, v in r.items() if k not in timing}, "turns": turns}
    assert [comparable(r) for r in other] == [comparable(r) for r in in_memory]


@pytest.fixture(scope="module")
def runner():
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.sandbox import get_backend
    b = get_backend("local")
    yield ToolRunner(b)
    b.close()


def live_episode(action: str):
    task = get_domain("fix_function").make_task("train", 0, seed=0)
    attempt, = expand_task(task, run_id="r", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=1.0, mode="train")
    attempt = start_episode(attempt, EpisodeSettings(max_turns=3))
    return attempt.replace(turns=[{"action": action, "action_start": 0, "action_end": 1}])


def test_a_malformed_tool_call_is_an_observation(runner):
    attempt, error = act(live_episode('<tool_call>{"name": "run_tests", "arguments": {"cod'), runner, EpisodeSettings())
    turn = attempt.turns[-1]
    assert error is None and attempt.failure is None
    assert turn["tool"] is None and "not JSON" in turn["tool_error"]
    assert turn["observation"].startswith("error: the tool call is not JSON")
    assert attempt.episode.end is None and attempt.episode.turn == 1  # the episode goes on


def test_an_episode_ends_with_its_answer(runner):
    attempt = live_episode(get_domain("fix_function").make_task("train", 0, seed=0)["answer"])
    attempt, _ = act(attempt, runner, EpisodeSettings())
    assert attempt.episode.end == "solved" and attempt.turns[-1]["reward"] == 1.0
    ended = end_episode(attempt)
    assert ended.episode is None and ended.episode_end == "solved" and ended.response == attempt.turns[-1]["action"]
    long = live_episode("x+1")
    assert len(act(long, runner, EpisodeSettings(observation_chars=40))[0].turns[-1]["observation"]) <= 40


def test_turn_returns_are_discounted_and_capped_by_the_outcome():
    from flywheel.trainer.credit import turn_returns
    # The discounted outcome less the score before each turn (0, 0, 0.5): trainer/credit.py.
    assert turn_returns(1.0, [0.0, 0.5, 1.0], 0.5).tolist() == [0.25, 0.5, 1.0 - 0.5]
    # Visible tests passed, hidden ones failed: the outcome caps every turn's score.
    assert turn_returns(0.0, [0.0, 0.5, 1.0], 1.0).tolist() == [0.0, 0.0, 0.0]
