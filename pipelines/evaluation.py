"""The evaluation pipeline (`flywheel eval`): N sampled answers and one greedy answer per task,
scored by the run's own stages, then judged for best-of-N and majority voting.

    ReadTasks -> Expand(N at T) + Expand(1, greedy) -> Generate | Episodes -> Execute -> Verify
              -> AnswerKeys (maj@N) + SelfVerify (the policy judges its candidates)
              -> EvaluationRows -> WriteTable(evaluations), WriteTable(errors)

The tasks are each generating domain's held-out split (0..--heldout-per-domain) and every task
of --tasks files. Each attempt becomes a row of the `evaluations` table: the trajectories schema
plus the evaluation's name, whether it is the greedy attempt, its answer key, its visible score
(the verifier's visible part alone: `visible_pass_rate`) and its self-verification score, under
the output's tables/evaluations/iteration=K/domain=D, so SQL reads evaluations as it reads
training. `evaluate` then reads them back and writes the summary (pipelines/eval_stats.py: pass@k,
greedy pass@1, maj@N, best-of-N by visible tests and by self-verification, the oracle) as
`metrics` rows named `eval/...` under the evaluation's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.domains.domain import Domain
from flywheel.domains.registry import generating_domains, get_domain
from flywheel.settings.config import RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import MAX_PROMPT_BYTES, policy_args, sample_and_score
from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import ERRORS_TAG, count
from flywheel.transforms.expand import Expand
from flywheel.transforms.policy_model import PolicyModelHandler
from flywheel.transforms.self_verify import SelfVerify, key
from flywheel.transforms.tasks import ReadTasks, TaskRange
from flywheel.schemas.write import write_rows
from flywheel.transforms.write_tables import WriteTable
from flywheel.verifiers import get_verifier
from flywheel.verifiers.answer_key import key_of
from flywheel.verifiers.bounded import BoundedVerifier, Bounds

SAMPLED, GREEDY = "eval", "eval_greedy"  # the attempts' modes


@dataclass(frozen=True)
class EvalSpec:
    """One evaluation: its name (an ablation cell's settings), whose weights (a checkpoint, or
    the run config's policy as it is), how many samples at which temperature, and whether the
    policy judges its candidates."""
    name: str
    run_id: str
    iteration: int
    checkpoint_uri: str | None
    n: int = 16
    temperature: float = 1.0
    self_verify: bool = True

    @property
    def prefix(self) -> str:
        """The evaluation's file name prefix: its name, made a file name."""
        return "eval-" + re.sub(r"[^A-Za-z0-9._=-]+", "_", self.name)[:100]


def eval_ranges(config: RunConfig) -> list[TaskRange]:
    """Each generating domain's held-out tasks 0..heldout_per_domain-1 (files-only domains get
    theirs from --tasks)."""
    r = config.rollout
    return [TaskRange(d, "heldout", 0, r.heldout_per_domain)
            for d in generating_domains(r.domains) if r.heldout_per_domain > 0]


class _AnswerKeys(beam.DoFn):
    """(key, the answer's canonical key or None) per scored attempt, read in a bounded worker."""

    def setup(self):
        self.bounded = BoundedVerifier(Bounds(deadline_s=5.0))
        self.verifier = get_verifier("answer_key")

    def process(self, attempt: Attempt):
        domain = get_domain(attempt.domain)
        value = None
        if type(domain).answer_key is not Domain.answer_key and attempt.response:
            outcome = self.bounded.run(self.verifier, attempt.task, attempt.response)
            value = key_of(outcome.verdict)
            if outcome.verdict is None:
                count("answer_keys_unreadable")
        yield key(attempt), value

    def teardown(self):
        self.bounded.close()


def evaluation_row(name: str, joined) -> dict:
    """The `evaluations` row of one attempt, from its (key, {attempt, answer key, judgment})."""
    _, parts = joined
    attempt: Attempt = parts["attempt"][0]
    score, said = (parts.get("judgment") or [(None, None)])[0]
    visible = attempt.reward_components.get("visible_pass_rate")
    return {**attempt.row(), "evaluation": name, "greedy": attempt.mode == GREEDY,
            "answer_key": (parts.get("answer_key") or [None])[0], "visible_score": visible,
            "self_score": score, "self_judgment": said}


class Evaluate(beam.PTransform):
    """One evaluation's tables: {"evaluations", "errors"} (the paths written)."""

    def __init__(self, config: RunConfig, spec: EvalSpec, layout: RunLayout):
        super().__init__()
        self.config, self.spec, self.layout = config, spec, layout

    def expand(self, pbegin):
        config, spec = self.config, self.spec
        ids = dict(run_id=spec.run_id, iteration=spec.iteration, policy_version=spec.iteration)
        read = pbegin | "ReadTasks" >> ReadTasks(
            ranges=eval_ranges(config), patterns=config.rollout.task_files, seed=config.seed,
            max_prompt_bytes=MAX_PROMPT_BYTES, environment=config.rollout.task_environment)
        sampled = read["tasks"] | "ExpandSampled" >> Expand(
            **ids, seed=config.seed, n_samples=spec.n, temperature=spec.temperature, mode=SAMPLED)
        greedy = read["tasks"] | "ExpandGreedy" >> Expand(
            **ids, seed=config.seed, n_samples=1, temperature=0.0, mode=GREEDY)
        handler = PolicyModelHandler(**policy_args(config, spec.checkpoint_uri))
        attempts = (sampled, greedy) | "AllAttempts" >> beam.Flatten()
        verified, errors = sample_and_score(attempts, config, handler)
        scored = verified.attempts
        parts = {"attempt": scored | "ByKey" >> beam.Map(lambda a: (key(a), a)),
                 "answer_key": scored | "AnswerKeys" >> beam.ParDo(_AnswerKeys())}
        if spec.self_verify:
            parts["judgment"] = scored | "SelfVerify" >> SelfVerify(handler)
        rows = (parts | "Join" >> beam.CoGroupByKey()
                | "EvaluationRows" >> beam.Map(lambda joined, name=spec.name: evaluation_row(name, joined)))
        root, shards = self.layout.root, config.rollout.shards
        errors = ((read[ERRORS_TAG], *errors) | "AllErrors" >> beam.Flatten()
                  | "StampErrors" >> beam.Map(
                      lambda e: {**e, "run_id": spec.run_id, "iteration": spec.iteration}))
        return {"evaluations": rows | "WriteEvaluations" >> WriteTable(root, "evaluations", shards, spec.prefix),
                "errors": errors | "WriteErrors" >> WriteTable(root, "errors", shards, spec.prefix)}


def read_evaluation(layout: RunLayout, spec: EvalSpec) -> list[dict]:
    """The rows one evaluation wrote (its name, its iteration)."""
    import pyarrow.dataset as ds
    table = layout.read_table("evaluations", filter=(ds.field("iteration") == spec.iteration)
                              & (ds.field("evaluation") == spec.name))
    return table.to_pylist()


def evaluate(config: RunConfig, spec: EvalSpec, layout: RunLayout, ks=(1, 4, 16),
             options: PipelineOptions | None = None) -> list[dict]:
    """Run one evaluation to completion, write its summary as `metrics` rows; the summaries
    (pipelines/eval_stats.py's, one per domain and one for all)."""
    from flywheel.pipelines.eval_stats import summarize, to_metrics_rows
    pipeline = beam.Pipeline(options=options or PipelineOptions([]))
    _ = pipeline | "Evaluate" >> Evaluate(config, spec, layout)
    pipeline.run().wait_until_finish()
    summaries = summarize(read_evaluation(layout, spec), ks=[k for k in ks if k <= spec.n])
    rows = [{**row, "name": f"{row['name']}[{spec.name}]"}
            for row in to_metrics_rows(summaries, spec.run_id, spec.iteration)]
    write_rows(layout.join("tables", "metrics", f"iteration={spec.iteration}", f"{spec.prefix}.parquet"),
                  "metrics", rows)
    return summaries
