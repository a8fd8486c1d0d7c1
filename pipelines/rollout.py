"""The rollout pipeline of one iteration: the `Rollout` composite transform, a short chain of
named Beam steps.

    ReadTasks [-> SampleByBudget] -> Expand(n_samples) -> Generate -> Execute -> Verify
              -> NormalizeRewards -> FilterTrajectories [-> ScaleByDomain] -> WriteTables
    (multi-turn domains: Expand -> Episodes, which runs, ends and executes each episode -> Verify)

The bracketed steps run when the run asks for them: `[steering]` sampling, `[algorithm]
domain_scale`.

The held-out evaluation rides in the same pipeline (one greedy attempt per held-out task) and
shares its Generate/Execute/Verify steps, so each iteration starts Beam once.
"""

from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.config import RunConfig, parse_options
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.steering_plan import SamplingPlan
from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import ERRORS_TAG
from flywheel.sandbox.pool import CONCURRENCY
from flywheel.transforms.execute import Execute
from flywheel.domains.registry import generating_domains
from flywheel.transforms.episode_journal import journal_folder
from flywheel.transforms.episodes import Episodes, is_multi_turn, turn_stages
from flywheel.transforms.expand import Expand
from flywheel.transforms.filters import FilterTrajectories
from flywheel.transforms.generate import Generate
from flywheel.transforms.policy_model import PolicyModelHandler
from flywheel.transforms.metrics import ComputeMetrics, heldout_values, train_values
from flywheel.transforms.domain_scale import ScaleByDomain
from flywheel.transforms.rewards import NormalizeRewards
from flywheel.transforms.sample_by_budget import SampleByBudget
from flywheel.transforms.tasks import ReadTasks, TaskRange
from flywheel.transforms.verify import mark_for_review
from flywheel.transforms.verify import Verify
from flywheel.transforms.write_tables import WriteTable

MAX_PROMPT_BYTES = 1 << 20  # longer prompts are input errors; long ones are left-truncated to the context


@dataclass(frozen=True)
class IterationSpec:
    run_id: str
    iteration: int
    policy_version: int
    checkpoint_uri: str | None


def task_ranges(config: RunConfig, iteration: int) -> list[TaskRange]:
    """Iteration k trains on fresh task indices [k*T, (k+1)*T); held-out tasks are always 0..H-1.

    One range per domain and split, however many tasks: the workers expand the indices. A domain
    that only holds the user's task files (`python_tests`, `sql`, `shell`: no tasks of its own)
    gets none: its tasks come from --tasks."""
    r = config.rollout
    start = iteration * r.tasks_per_domain
    generating = generating_domains(r.domains)  # not files-only ones
    ranges = [TaskRange(d, "train", start, start + r.tasks_per_domain) for d in generating]
    ranges += [TaskRange(d, "heldout", 0, r.heldout_per_domain) for d in generating]
    return [t for t in ranges if t.stop > t.start]


class Rollout(beam.PTransform):
    """One iteration's rollout: tasks in (from the domains' generators and the task files), the
    run's tables out. Returns the paths written, per table."""

    def __init__(self, config: RunConfig, spec: IterationSpec, layout: RunLayout,
                 plan: SamplingPlan | None = None):
        super().__init__()
        self.config, self.spec, self.layout = config, spec, layout
        self.plan = plan or SamplingPlan(task_ranges(config, spec.iteration))

    def expand(self, pbegin):
        config, spec, r = self.config, self.spec, self.config.rollout
        ids = dict(run_id=spec.run_id, iteration=spec.iteration, policy_version=spec.policy_version)
        read = pbegin | "ReadTasks" >> ReadTasks(
            ranges=self.plan.ranges, patterns=r.task_files, seed=config.seed,
            max_prompt_bytes=MAX_PROMPT_BYTES, environment=r.task_environment)
        tasks = read["tasks"]
        if config.review.domains:  # people, not the verifier, judge these domains' attempts
            tasks = tasks | "MarkForReview" >> beam.Map(mark_for_review,
                                                        frozenset(config.review.domains))
        train_tasks, heldout_tasks = tasks | "BySplit" >> beam.Partition(
            lambda t, n: int(t.get("split") == "heldout"), 2)
        steer_metrics = ()
        if self.plan.top_up:  # a top-up adds training attempts; the held-out tasks were evaluated
            heldout_tasks = heldout_tasks | "NoHeldout" >> beam.Filter(lambda t: False)
        if self.plan.sample:  # steered: the budget's and the sampler's choice of the candidates
            sampled = train_tasks | "SampleByBudget" >> SampleByBudget(**self.plan.sample, **ids)
            train_tasks, steer_metrics = sampled["tasks"], (sampled["metrics"],)

        train = train_tasks | "ExpandTrain" >> Expand(
            **ids, seed=config.seed, n_samples=r.n_samples, temperature=r.temperature, mode="train")
        heldout = heldout_tasks | "ExpandHeldout" >> Expand(
            **ids, seed=config.seed, n_samples=1, temperature=0.0, mode="heldout")

        handler = PolicyModelHandler(**policy_args(config, spec.checkpoint_uri))
        attempts = (train, heldout) | "AllAttempts" >> beam.Flatten()
        verified, generate_errors = sample_and_score(
            attempts, config, handler, journal=journal_folder(self.layout.root, spec.iteration))
        train_scored, heldout_scored = verified.attempts | "ByMode" >> beam.Partition(
            lambda a, n: int(a.mode == "heldout"), 2)

        trajectories = (train_scored
                        | "NormalizeRewards" >> NormalizeRewards(config.algorithm)
                        | "FilterTrajectories" >> FilterTrajectories(r.filter_truncated))
        if config.algorithm.domain_scale != "none":  # each domain's weight in the update, chosen
            scaled = trajectories | "ScaleByDomain" >> ScaleByDomain(
                config.algorithm, **ids, prior=self.plan.prior, shares=self.plan.shares)
            trajectories, steer_metrics = scaled["attempts"], (*steer_metrics, scaled["metrics"])
        train_metrics = trajectories | "TrainMetrics" >> ComputeMetrics(train_values, **ids)
        heldout_metrics = heldout_scored | "HeldoutMetrics" >> ComputeMetrics(heldout_values, **ids)
        errors = ((read[ERRORS_TAG], *generate_errors)
                  | "AllErrors" >> beam.Flatten()
                  | "StampErrors" >> beam.Map(
                      lambda e: {**e, "run_id": spec.run_id, "iteration": spec.iteration}))

        root, shards, prefix = self.layout.root, r.shards, self.plan.prefix
        written = {
            "trajectories": (trajectories | "TrajectoryRows" >> beam.Map(Attempt.row)
                             | "WriteTrajectories" >> WriteTable(root, "trajectories", shards, prefix)),
            "errors": errors | "WriteErrors" >> WriteTable(root, "errors", shards, prefix),
        }
        if not self.plan.top_up:  # a top-up's attempts are counted by the driver, once, in its rows
            written["metrics"] = ((train_metrics, heldout_metrics, *steer_metrics)
                                  | "AllMetrics" >> beam.Flatten()
                                  | "WriteMetrics" >> WriteTable(root, "metrics", shards))
        return written


def policy_args(config: RunConfig, checkpoint_uri: str | None) -> dict:
    """The PolicyModelHandler's arguments: the checkpoint's weights, or a fresh policy of the
    run's backend and options (an iteration before any checkpoint, an untrained model)."""
    return dict(checkpoint_uri=checkpoint_uri, backend=config.policy.backend,
                options=config.policy.parsed_options(), init_seed=config.seed,
                max_batch_size=config.rollout.max_batch_size)


def sample_and_score(attempts, config: RunConfig, handler: PolicyModelHandler,
                     journal: str | None = None):
    """Generate (or run the episodes of) `attempts`, execute and verify them: (the Verify
    output, whose `attempts` are scored, and the errors of every stage). `journal`: the folder
    ended episodes are written to as they end (transforms/episode_journal.py)."""
    r = config.rollout
    limits = config.episode.limits()
    multi_turn = turn_stages(r.domains, limits) > 1
    sandbox = dict(backend=r.sandbox, options=sandbox_options(config, multi_turn))
    if multi_turn:  # multi-turn domains run their episodes (each scored as it ends); the others
        single, multi = attempts | "ByTurns" >> beam.Partition(  # sample once, then Execute
            lambda a, n, m=limits: int(is_multi_turn(a, m)), 2)
        episodes = multi | "Episodes" >> Episodes(handler, None, config.episode, **sandbox,
                                              journal=journal)
        executed = single | "Generate" >> Generate(handler) | "Execute" >> Execute(**sandbox)
        scored = ((executed["attempts"], episodes["attempts"]) | "AllExecuted" >> beam.Flatten())
        stage_errors = (episodes[ERRORS_TAG], executed[ERRORS_TAG])
    else:
        executed = attempts | "Generate" >> Generate(handler) | "Execute" >> Execute(**sandbox)
        scored, stage_errors = executed["attempts"], (executed[ERRORS_TAG],)
    verified = scored | "Verify" >> Verify()
    return verified, (*stage_errors, verified[ERRORS_TAG])


def sandbox_options(config: RunConfig, multi_turn: bool) -> dict:
    """The run's sandbox options, for every sandboxed stage alike (they share one pool per worker
    process, keyed by them). With episodes on the `local` backend and no `pool_size` given, the
    pool holds a warm server for each episode loop a worker runs at once (episode.concurrency),
    and at least the sandbox concurrency Execute uses."""
    options = parse_options(config.rollout.sandbox_options)
    if multi_turn and config.rollout.sandbox == "local" and "pool_size" not in options:
        options["pool_size"] = max(CONCURRENCY, config.episode.concurrency)
    return options


def run_rollout(config: RunConfig, spec: IterationSpec, layout: RunLayout,
                options: PipelineOptions | None = None, plan: SamplingPlan | None = None):
    """Run one iteration's rollout pipeline to completion; returns the PipelineResult."""
    pipeline = beam.Pipeline(options=options or PipelineOptions([]))
    _ = pipeline | "Rollout" >> Rollout(config, spec, layout, plan)
    result = pipeline.run()
    result.wait_until_finish()
    return result
