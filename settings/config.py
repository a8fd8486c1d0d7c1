"""The run configuration: one frozen dataclass per concern, with defaults that work offline.

Keys that moved are refused where they were, naming their new home (`RENAMED_KEYS`): `[algorithm]`
(trainer/algorithm.py) holds what `[rollout]` and `[train]` once held, `[episode]`
(domains/episode_settings.py) what `[rollout]` held of episodes. A config file or a run.json
written before a move says which key to rename; nothing is read silently from its old place.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.registry import DEFAULT_DOMAINS
from flywheel.settings.option_items import parse_options  # noqa: F401 (its home for callers)
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.train_step import TrainConfig

RENAMED_KEYS = {"rollout.advantage": "algorithm.advantage", "rollout.turn_discount": "algorithm.discount",
                "train.loss": "algorithm.loss", "train.credit": "algorithm.credit",
                **{f"rollout.{old}": f"episode.{new}" for old, new in (
                    ("max_turns", "max_turns"), ("domain_max_turns", "domain_max_turns"),
                    ("episode_tokens", "tokens"), ("observation_chars", "observation_chars"),
                    ("context", "context"), ("keep_turns", "keep_turns"),
                    ("max_tool_calls", "max_tool_calls"))}}


def renamed(dotted: str) -> str | None:
    """The message refusing `dotted` when it is a key that moved (RENAMED_KEYS), else None."""
    new = RENAMED_KEYS.get(dotted)
    if new is None:
        return None
    table, key = new.split(".")
    return f"`{dotted}` is now `{new}`: set it as `{key}` under [{table}] (or --set {new}=...)"


@dataclass(frozen=True)
class RolloutSettings:
    domains: tuple[str, ...] = DEFAULT_DOMAINS
    task_files: tuple[str, ...] = ()      # JSONL task file patterns (any Beam filesystem)
    task_environment: str = ""            # environment (flywheel env build) of task-file rows naming none
    tasks_per_domain: int = 128           # training tasks per domain per iteration
    heldout_per_domain: int = 300         # held-out tasks per domain, evaluated greedily
    n_samples: int = 8                    # attempts per training task (the GRPO group size)
    temperature: float = 1.0
    filter_truncated: bool = False        # DAPO-style: keep truncated attempts out of the loss
    sandbox: str = "local"
    sandbox_options: tuple[str, ...] = ()  # KEY=VALUE options of the backend, e.g. runtime=runsc
    max_batch_size: int = 256
    shards: int = 1                       # Parquet files per table partition, written in parallel


@dataclass(frozen=True)
class WarmStartSettings:
    max_steps: int = 3000
    batch_size: int = 128                 # demonstrations per warm-start step
    lr: float = 3e-3                      # the warm start's learning rate
    eval_every: int = 100                 # steps between validations
    eval_tasks: int = 100                 # per domain, from a validation range of the train split
    target_mean_pass: float = 0.3         # domain_target 0: stop once the mean over domains reaches this
    carry_optimizer: bool = True          # the first RL update continues the warm start's Adam moments
    domain_target: float = 0.25           # > 0: each domain warms until its pass@1 reaches this; 0: the mean rule


@dataclass(frozen=True)
class PolicySpec:
    """Which policy backend the run trains, and its options (the backend's own KEY=VALUE settings,
    e.g. d_model=128 for `tiny`; each backend keeps its defaults, unset options take them).
    `model` is the backend's `model` option given on its own (`--model`)."""
    backend: str = "tiny"
    model: str = ""
    options: tuple[str, ...] = ()
    init_checkpoint: str = ""             # start from this checkpoint (e.g. `flywheel sft --out`)

    def parsed_options(self) -> dict[str, object]:
        options = parse_options(self.options, "--policy-options")
        if self.model:
            if options.get("model", self.model) != self.model:
                raise ValueError(f"--model {self.model} and --policy-options "
                                 f"model={options['model']} disagree; give one")
            options["model"] = self.model
        return options


@dataclass(frozen=True)
class EvalSettings:
    """`flywheel eval` inside a run (--eval-every): every `every` iterations (0: never) and after
    the last, the policy of that iteration is evaluated on the held-out tasks (at most `tasks`
    per domain): `n` samples at the run's temperature plus one greedy, pass@k for each of `ks`."""
    every: int = 0
    n: int = 8
    ks: str = "1,4,8"                     # comma-separated
    tasks: int = 50                       # held-out tasks per domain evaluated (<= heldout_per_domain)
    self_verify: bool = True              # ask the policy to judge its answers (best-of-N by self-verification)

    def k_values(self) -> list[int]:
        """The k of `ks` (ValueError naming it when malformed), those above n left out."""
        try:
            ks = sorted({int(k) for k in str(self.ks).split(",") if k.strip()})
        except ValueError:
            raise ValueError(f"evaluation.ks {self.ks!r}: expected comma-separated integers") from None
        if not ks or ks[0] < 1:
            raise ValueError(f"evaluation.ks {self.ks!r}: each k must be >= 1")
        return [k for k in ks if k <= self.n]


@dataclass(frozen=True)
class SteeringSettings:
    """How an iteration's training attempts are spread over domains and tasks (pipelines/steering/).

    The defaults reproduce the unsteered run: every domain gets `tasks_per_domain` fresh tasks (a
    task file's every task), nothing is revisited, no batch is topped up."""
    sampler: str = "uniform"              # SAMPLERS: uniform | curriculum
    weights: tuple[str, ...] = ()         # DOMAIN=W: relative share of the attempts (unnamed: 1)
    tiers: tuple[str, ...] = ()           # DOMAIN=TIER: a domain's tier (unnamed: tier "default")
    tier_shares: tuple[str, ...] = ()     # TIER=S: a tier's share, split over its domains by weight
    floor: float = 0.0                    # the least share of the attempts any domain gets
    attempts: int = 0                     # training attempts per iteration (0: tasks_per_domain x n x domains)
    band: str = "0.2,0.8"                 # curriculum: the pass rates it prefers (low,high)
    explore: float = 0.25                 # curriculum: share for tasks outside the band or unseen
    solved_decay: float = 0.25            # curriculum: weight factor per visit a task was solved by all
    error_share: float = 0.0              # share of a domain's tasks drawn from the error set
    env_retries: int = 2                  # times a task whose attempts failed on the environment is retried
    top_up: float = 0.0                   # dynamic sampling: least share of groups with signal (0: off)
    top_up_rounds: int = 2                # at most this many top-up rollouts per iteration
    top_up_attempts: float = 1.0          # and at most this multiple of the batch's attempts in all
    fill_repeats: int = 1                 # a domain whose share is more than its tasks hold samples
                                          # them in groups up to this many times n_samples (1: never)


@dataclass(frozen=True)
class OverlapSettings:
    """Rollout and training overlapped (loop/overlap.py): iteration k samples from the
    checkpoint max_staleness versions older than the synchronous loop's (k-1-s), so its rollout
    runs while iteration k-1 trains in a process of its own; the trainer corrects for the gap
    ([train] off_policy). 0: the synchronous loop, training in the driver's process."""
    max_staleness: int = 0                # versions the sampler may lag the trainer by
    trainer_processes: int = 1            # > 1: data-parallel ranks (torch.distributed) per update
    trainer_sharding: str = "ddp"         # ddp: every rank holds the weights; fsdp: sharded (FSDP2)

    def __post_init__(self):
        if self.trainer_sharding not in ("ddp", "fsdp"):
            raise ValueError(f"overlap.trainer_sharding must be ddp or fsdp, got "
                             f"{self.trainer_sharding!r}")
        if self.max_staleness < 0:
            raise ValueError(f"overlap.max_staleness must be >= 0, got {self.max_staleness}")
        if self.trainer_processes < 1:
            raise ValueError(f"overlap.trainer_processes must be >= 1, got {self.trainer_processes}")


@dataclass(frozen=True)
class ReviewSettings:
    """People as the verifier (feedback/review_queue.py, review_rewards.py): attempts of tasks
    marked for review, and an audit share of verified ones, go to the run's `review_queue`;
    labels given on `flywheel review serve` become rewards in a later update."""
    domains: tuple[str, ...] = ()         # every task of these is judged by people, not its verifier
    audit_share: float = 0.0              # share of verified training attempts queued for audit too
    max_wait: int = 2                     # updates a labelled-late group may still join; then it expires
    wait_seconds: float = 0.0             # before each update, wait up to this for its queue's labels
    observation_chars: int = 4000         # execution output shown to reviewers, cut in the middle

    def __post_init__(self):
        if not 0.0 <= self.audit_share <= 1.0:
            raise ValueError(f"review.audit_share must be in [0, 1], got {self.audit_share}")
        if self.max_wait < 0 or self.wait_seconds < 0:
            raise ValueError("review.max_wait and review.wait_seconds must be >= 0")

    @property
    def active(self) -> bool:
        return bool(self.domains) or self.audit_share > 0


@dataclass(frozen=True)
class RunConfig:
    seed: int = 0
    iterations: int = 8
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    episode: EpisodeSettings = field(default_factory=EpisodeSettings)
    algorithm: Algorithm = field(default_factory=Algorithm)
    warm_start: WarmStartSettings = field(default_factory=WarmStartSettings)
    train: TrainConfig = field(default_factory=TrainConfig)
    policy: PolicySpec = field(default_factory=PolicySpec)
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    steering: SteeringSettings = field(default_factory=SteeringSettings)
    overlap: OverlapSettings = field(default_factory=OverlapSettings)
    review: ReviewSettings = field(default_factory=ReviewSettings)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """The config of `d` (RunConfig.to_dict()'s shape); ValueError naming a key that moved
        (RENAMED_KEYS), e.g. in a run.json written before the move."""
        for table, values in d.items():
            for key in values if isinstance(values, dict) else ():
                if message := renamed(f"{table}.{key}"):
                    raise ValueError(message)

        def build(klass, values):
            kwargs = {}
            for f in dataclasses.fields(klass):
                if f.name in values:
                    v = values[f.name]
                    nested = f.default_factory
                    if isinstance(nested, type) and dataclasses.is_dataclass(nested):
                        v = build(nested, v)
                    elif isinstance(v, list):
                        v = tuple(v)
                    kwargs[f.name] = v
            return klass(**kwargs)
        return build(cls, d)
