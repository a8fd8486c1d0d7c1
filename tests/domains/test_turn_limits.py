"""Turns per episode: --max-turns for every domain with tools, --domain-max-turns DOMAIN=N over it
for one domain; checked before a run starts, and obeyed by a real rollout."""
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.episodes import TurnLimits, turns_for
from flywheel.domains.registry import get_domain
from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.loop.options import FlywheelOptions
from flywheel.pipelines.rollout import IterationSpec, run_rollout
from flywheel.transforms.episodes import turn_stages

FIX, PICK, ADD = (get_domain(d) for d in ("fix_function", "shell_pick", "add"))


def test_an_override_wins_over_the_run_and_the_domain_default():
    limits = TurnLimits.from_settings(0, ["shell_pick=5"])
    assert [limits.for_domain(d) for d in (FIX, PICK, ADD)] == [FIX.max_turns, 5, 1]
    limits = TurnLimits.from_settings(2, ["shell_pick=5", "fix_function=1"])
    assert [limits.for_domain(d) for d in (FIX, PICK, ADD)] == [1, 5, 1]
    assert turn_stages(["fix_function", "add"], limits) == 5  # an override counts (task files)
    assert turn_stages(["add"], TurnLimits()) == 1
    assert turns_for(PICK, 4) == 4 and turns_for(PICK, TurnLimits(4, (("shell_pick", 2),))) == 2


@pytest.mark.parametrize("items, message", [
    (["shell_pick"], "expected DOMAIN=N with N >= 1, got 'shell_pick'"),
    (["shell_pick=0"], "expected DOMAIN=N with N >= 1, got 'shell_pick=0'"),
    (["shell_pick=two"], "expected DOMAIN=N with N >= 1, got 'shell_pick=two'"),
    (["=3"], "expected DOMAIN=N with N >= 1, got '=3'"),
    (["shell_pik=3"], "unknown domain 'shell_pik'"),
    (["add=3"], "domain add has no tools, so its attempts are single-turn"),
])
def test_a_bad_override_is_refused_before_the_run(items, message):
    with pytest.raises(ValueError, match=message):
        TurnLimits.from_settings(0, items)
    flags = ["--domain-max-turns", ",".join(items)]
    with pytest.raises(ValueError, match=message):
        PipelineOptions(flags).view_as(FlywheelOptions).run_config()


def test_a_rollout_gives_each_domain_its_own_turns(tmp_path):
    """shell_pick held to 1 turn is single-turn (no episode); fix_function keeps up to 2."""
    cfg = RunConfig(seed=3, iterations=1, policy=PolicySpec(), rollout=RolloutSettings(
        domains=("fix_function", "shell_pick"), tasks_per_domain=2, heldout_per_domain=1,
        n_samples=2), episode=EpisodeSettings(max_turns=2, domain_max_turns=("shell_pick=1",)))
    layout = RunLayout(str(tmp_path))
    run_rollout(cfg, IterationSpec("limits", 0, policy_version=0, checkpoint_uri=None), layout,
                PipelineOptions([]))
    rows = layout.read_table("trajectories").to_pylist()
    assert {r["domain"] for r in rows} == {"fix_function", "shell_pick"}
    for r in rows:
        turns = r["turns"] or []
        if r["domain"] == "shell_pick":
            assert r["episode_end"] is None  # one response, not an episode's token spans
            assert all(t["action_start"] is None for t in turns)
        else:
            assert r["episode_end"] is not None and 1 <= len(turns) <= 2
    assert any(len(r["turns"] or []) == 2 for r in rows if r["domain"] == "fix_function")
