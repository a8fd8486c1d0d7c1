"""FlywheelOptions: the run's flags as Beam pipeline options, so one command line runs anywhere.

    flywheel run --iterations 3 --n-samples 8 --runner DirectRunner
    flywheel run --iterations 3 --runner DataflowRunner --project P --region R --temp_location gs://...

The config file (--config) is the main interface. The settings people change from run to run
are flags, one entry of `RUN_FLAGS` each (flag -> dotted key of `RunConfig`, type, help); every
key of the config, these included, is `--set SECTION.KEY=VALUE` (loop/config_keys.py, derived
from the config's dataclasses: a new setting needs no flag here). `OLD_FLAGS` are the flags of
earlier versions, hidden from --help and kept for one release, each warning with its --set form.
`FlywheelOptions` declares them on Beam's parser, and `run_config()` turns the parsed values into
the frozen `RunConfig` plus the keys given explicitly (a resumed run compares those with its
run.json).
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.config import RunConfig, parse_options
from flywheel.loop.config_keys import parse_set
from flywheel.settings.option_items import split_items
from flywheel.pipelines.steering_plan import check_steering
from flywheel.sandbox import available_backends, check_options
from flywheel.transforms.context_strategies import CONTEXTS
from flywheel.trainer.aggregation import AGGREGATIONS
from flywheel.trainer.credit import ADVANTAGES, CREDITS
from flywheel.trainer.losses import LOSSES
from flywheel.policy.backends import POLICIES
from flywheel.policy.backends.hf.named_models import NAMED_MODELS

LIST = None  # type of a flag whose value is a comma-separated list of strings


def boolean(text: str) -> bool:
    """A flag's true/false (also yes/no, on/off, 1/0); argparse names the flag when it is neither."""
    value = {"true": True, "yes": True, "on": True, "1": True,
             "false": False, "no": False, "off": False, "0": False}.get(str(text).strip().lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def policy_help() -> str:
    """The policy backends that learn, listed apart from the model-free ones that drive golden
    trajectories and outside checks (scripted, standin)."""
    from flywheel.policy.backends.standin import ModelFree
    names = POLICIES.names()
    fixed = [n for n in names if issubclass(POLICIES.get(n), ModelFree)]
    learns = [n for n in names if n not in fixed]
    return f"policy backend that learns ({', '.join(learns)}); model-free, for scripted checks: {', '.join(fixed)}"


RUN_FLAGS = {  # the settings people change from run to run; every other key: --set
    "--iterations": ("iterations", int, "iterations to complete (a resumed run continues to this many)"),
    "--seed": ("seed", int, "seed of every random choice in the run"),
    "--domains": ("rollout.domains", LIST, "comma-separated built-in domains"),
    "--tasks": ("rollout.task_files", LIST, "comma-separated JSONL task file patterns"),
    "--environment": ("rollout.task_environment", str, "the environment (`flywheel env build NAME`) "
                      "of every --tasks row that names none"),
    "--tasks-per-domain": ("rollout.tasks_per_domain", int, "training tasks per domain per iteration"),
    "--heldout-per-domain": ("rollout.heldout_per_domain", int, "held-out tasks per domain"),
    "--n-samples": ("rollout.n_samples", int, "attempts per training task (group size)"),
    "--sandbox": ("rollout.sandbox", str, f"sandbox backend ({', '.join(available_backends())})"),
    "--max-turns": ("episode.max_turns", int, "turns per episode for domains with tools (0: each "
                    "domain's default; python_tests tasks become multi-turn with test feedback)"),
    "--policy": ("policy.backend", str, policy_help()),
    "--model": ("policy.model", str, "the policy's model (hf: a local directory, a .gguf file, a "
                "gs:// URI, or a named model: " + NAMED_MODELS.help() + ")"),
    "--init-checkpoint": ("policy.init_checkpoint", str, "start from this checkpoint (a "
                          "`flywheel sft`/`dpo` output or another run's checkpoints/iteration=K) "
                          "instead of a fresh policy; no warm start"),
    "--warm-start-max-steps": ("warm_start.max_steps", int, "upper bound on warm-start steps"),
    "--eval-every": ("evaluation.every", int, "evaluate the policy every N iterations and after the "
                     "last (flywheel eval: pass@k, maj@N, best-of-N into the evaluations table; 0: never)"),
    "--lr": ("train.lr", float, "RL learning rate"),
}

# Flags of earlier versions, kept for one release: each warns, naming its --set form.
OLD_FLAGS = {
    "--temperature": ("rollout.temperature", float, "sampling temperature"),
    "--advantage": ("algorithm.advantage", str, ADVANTAGES.help("advantage estimator")),
    "--sandbox-options": ("rollout.sandbox_options", LIST,
                          "comma-separated KEY=VALUE backend options, e.g. runtime=runsc; quote a "
                          "value that holds commas: KEY=\"a, b\""),
    "--domain-max-turns": ("episode.domain_max_turns", LIST,
                           "comma-separated DOMAIN=N: turns per episode of one domain with tools, "
                           "over --max-turns, e.g. fix_function=5,shell_pick=2"),
    "--episode-tokens": ("episode.tokens", int,
                         "token budget of one episode (0: the policy's context)"),
    "--observation-chars": ("episode.observation_chars", int,
                            "longest tool observation shown to the policy; the middle is cut"),
    "--context": ("episode.context", str, "what a long episode sees once its context is full: "
                  "full (it ends, on budget), cut (older observations become a marker) or "
                  "anchored (the prompt, the domain's anchor such as a repository's diff, and the "
                  "last --keep-turns turns); each rebuild starts a new segment, trained as sampled"),
    "--max-tool-calls": ("episode.max_tool_calls", int, "tool calls an episode may make besides "
                         "submit; past them a call is refused and the policy must answer (0: no limit)"),
    "--keep-turns": ("episode.keep_turns", int, "turns a cut, anchored or summarize context keeps whole"),
    "--turn-discount": ("algorithm.discount", float,
                        "per-turn returns (--credit turn) discount the episode's outcome by this "
                        "for each turn still to come"),
    "--credit": ("algorithm.credit", str, CREDITS.help("per-turn credit") + ". outcome: every token "
                 "of an attempt shares its advantage; turn: each episode turn's tokens get that "
                 "turn's (its return, normalized over the group's turns)"),
    "--shards": ("rollout.shards", int, "Parquet files per table partition, written in parallel"),
    "--max-batch-size": ("rollout.max_batch_size", int, "most rows one generation batch samples "
                         "(RunInference's batch; a real model's KV cache grows with it)"),
    "--policy-options": ("policy.options", LIST,
                         "comma-separated KEY=VALUE options of the policy backend, e.g. d_model=128; "
                         "quote a value that holds commas: system_prompt=\"Be brief, exact.\""),
    "--review-domains": ("review.domains", LIST, "comma-separated domains whose attempts people "
                         "label (flywheel review serve) instead of their verifier"),
    "--audit-share": ("review.audit_share", float, "share of verified training attempts also "
                      "queued for people to audit (the report says how often they disagree)"),
    "--review-max-wait": ("review.max_wait", int, "updates a group awaiting labels may still "
                          "join; later labels are counted as expired"),
    "--review-wait-seconds": ("review.wait_seconds", float, "before each update, wait up to this "
                              "long for labels of the iteration's queue"),
    "--warm-start-domain-target": ("warm_start.domain_target", float, "> 0: each domain is "
                                   "warm-started until its validation pass@1 reaches this (then it "
                                   "keeps a tenth of the demonstrations) instead of stopping at "
                                   "a mean over domains"),
    "--carry-optimizer": ("warm_start.carry_optimizer", boolean, "true (default): the first RL "
                          "update continues the warm start's Adam moments; false: a fresh Adam, "
                          "whose first step moves every weight by about the learning rate"),
    "--eval-n": ("evaluation.n", int, "samples per held-out task in those evaluations"),
    "--eval-k": ("evaluation.ks", str, "the k of their pass@k, comma-separated, e.g. 1,4,8"),
    "--eval-tasks": ("evaluation.tasks", int, "held-out tasks per domain they evaluate"),
    "--max-staleness": ("overlap.max_staleness", int, "overlap rollout and training: iteration k "
                        "samples from the checkpoint this many versions older than k-1 while k-1 "
                        "trains in a process of its own (0: synchronous)"),
    "--trainer-processes": ("overlap.trainer_processes", int, "data-parallel trainer processes "
                            "(torch.distributed: gloo on CPU, nccl on GPUs) per update"),
    "--trainer-sharding": ("overlap.trainer_sharding", str, "with --trainer-processes > 1: ddp "
                           "(every rank holds the weights) or fsdp (FSDP2 shards them)"),
    "--off-policy": ("train.off_policy", str, "rows sampled by older weights: decoupled (ratio to "
                     "the update's starting weights, capped importance weights) or behaviour "
                     "(ratio to the sampler's, no correction)"),
    "--is-cap": ("train.is_cap", float, "decoupled: the cap of the importance weights"),
    "--sampler": ("steering.sampler", str, "how an iteration chooses its training tasks (uniform, "
                  "curriculum: prefers tasks whose pass rate lies in --band, keeps --explore for "
                  "unseen and outside ones, fades tasks solved by every attempt)"),
    "--domain-weights": ("steering.weights", LIST, "comma-separated DOMAIN=W: relative shares of "
                         "the attempts (unnamed domains: 1)"),
    "--tiers": ("steering.tiers", LIST, "comma-separated DOMAIN=TIER (unnamed: tier default)"),
    "--tier-shares": ("steering.tier_shares", LIST, "comma-separated TIER=SHARE of the attempts; "
                      "tiers not named share the rest by their domains' weights"),
    "--domain-floor": ("steering.floor", float, "the least share of the attempts any domain gets"),
    "--attempts": ("steering.attempts", int, "training attempts per iteration, split by the "
                   "budget (0: --tasks-per-domain x --n-samples per domain)"),
    "--band": ("steering.band", str, "curriculum: LOW,HIGH pass rates of the tasks it prefers"),
    "--explore": ("steering.explore", float, "curriculum: share of a domain's tasks kept for "
                  "unseen tasks and tasks outside the band"),
    "--error-share": ("steering.error_share", float, "share of a domain's tasks drawn from the "
                      "error set (tasks failed in a recurring pattern), spread over the patterns"),
    "--env-retries": ("steering.env_retries", int, "times a steered run retries a task whose "
                      "attempts all failed on the environment"),
    "--fill-repeats": ("steering.fill_repeats", int, "a steered domain whose budget share is more "
                       "than its tasks hold samples each of them in groups up to this many times "
                       "--n-samples (1: never; the share goes to the other domains)"),
    "--top-up": ("steering.top_up", float, "dynamic sampling: when fewer than this share of the "
                 "groups carry signal, roll out further tasks (0: off)"),
    "--top-up-rounds": ("steering.top_up_rounds", int, "at most this many top-up rollouts per iteration"),
    "--top-up-attempts": ("steering.top_up_attempts", float, "top-ups roll out at most this "
                          "multiple of the batch's attempts in all"),
    "--domain-scale": ("algorithm.domain_scale", str, "per-domain advantage scaling: none, or "
                       "running (each domain's share of the update is its budget share, by "
                       "running statistics of its advantages; not its size or reward scale)"),
    "--loss": ("algorithm.loss", str, LOSSES.help("policy loss")),
    "--aggregation": ("algorithm.aggregation", str, AGGREGATIONS.help(
        "how the loss averages its token terms") + "; default: the loss's own"),
    "--micro-tokens": ("train.micro_tokens", int, "most padded tokens per forward/backward of "
                       "the update (gradient accumulation; 0: a whole minibatch at once, which for "
                       "a real model's vocabulary can take many GB)"),
    "--kl-coef": ("train.kl_coef", float, "weight of KL(policy || initial policy) in the loss (0: none)"),
}


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


class FlywheelOptions(PipelineOptions):
    """The run's settings beside Beam's own options (--runner, --project, ...)."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        add_run_flags(parser)

    def deprecated(self) -> list[str]:
        """A warning per old flag given (OLD_FLAGS), naming its --set form."""
        given = self.get_all_options()
        return [f"{flag} is deprecated and goes in the next release: use --set {key}=VALUE"
                for flag, (key, _, _) in OLD_FLAGS.items() if given.get(_dest(flag)) is not None]

    def run_config(self, base: dict | None = None, base_keys: set[str] = frozenset()
                   ) -> tuple[RunConfig, set[str]]:
        """(RunConfig with the given flags over `base` (a config file's values; default: the
        defaults), the dotted keys that were given: `base_keys` and the flags'). Old flags
        first, then the flags, then each --set in order: a later one wins.

        Raises ValueError or KeyError, naming the flag's value, when a registry name or a
        KEY=VALUE option is malformed, so a bad run stops before anything starts.
        """
        values, explicit = base or RunConfig().to_dict(), set(base_keys)
        given = self.get_all_options()
        for flag, (key, kind, _) in {**OLD_FLAGS, **RUN_FLAGS}.items():
            value = given.get(_dest(flag))
            if value is None:
                continue
            if kind is LIST:  # KEY=VALUE options may quote a value holding commas
                value = split_items(value, flag) if key.endswith("options") else \
                    tuple(x for x in value.split(",") if x)
            _set(values, key, value)
            explicit.add(key)
        for item in given.get("set") or ():
            key, value = parse_set(item)
            _set(values, key, value)
            explicit.add(key)
        if values["rollout"].get("task_files") and "rollout.domains" not in explicit:
            values["rollout"]["domains"] = []  # --tasks alone: only those tasks, no built-in domains
        config = RunConfig.from_dict(values)
        check_options(config.rollout.sandbox,
                      parse_options(config.rollout.sandbox_options, "--sandbox-options"))
        config.policy.parsed_options()
        config.episode.limits()
        CONTEXTS.get(config.episode.context)
        POLICIES.get(config.policy.backend)
        config.algorithm.check()
        config.evaluation.k_values()
        check_steering(config.steering)
        return config, explicit


def add_run_flags(parser, skip: tuple[str, ...] = ()) -> None:
    """The run's flags on `parser` (`flywheel run`, and `flywheel eval`'s help): --run-dir,
    --config, --print-config, --set, RUN_FLAGS, and OLD_FLAGS hidden from --help."""
    meta = {"--run-dir": dict(dest="run_dir", default=None,
                              help="local path or gs:// URI (default runs/<timestamp>)"),
            "--config": dict(dest="config", default=None, help="TOML (or .yaml) file of run "
                             "settings, the main interface; flags beside it override it"),
            "--print-config": dict(dest="print_config", action="store_true", default=False,
                                   help="print the effective run config (TOML) and exit"),
            "--set": dict(dest="set", action="append", default=None, metavar="SECTION.KEY=VALUE",
                          help="set any key of the config (repeatable; every key, its default and "
                          "meaning: docs/CONFIG.md), e.g. --set train.epochs=4 --set "
                          "episode.context=cut")}
    for flag, kwargs in meta.items():
        if flag not in skip:
            parser.add_argument(flag, **kwargs)
    for flag, (_, kind, text) in RUN_FLAGS.items():
        parser.add_argument(flag, dest=_dest(flag), type=kind or str, default=None, help=text)
    for flag, (_, kind, _) in OLD_FLAGS.items():
        parser.add_argument(flag, dest=_dest(flag), type=kind or str, default=None,
                            help=argparse.SUPPRESS)


def _set(d: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        d = d.setdefault(p, {})
    d[last] = value
