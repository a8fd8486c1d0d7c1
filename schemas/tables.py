"""Pyarrow schemas of Flywheel's tables: the contract between pipelines, trainer and SQL users.

Each table has a logical schema (what a reader sees) and a file schema (what a Parquet file holds):
the Hive partition columns (`iteration`, and `domain` for trajectories) live only in the path, so
engines that read Hive partitions (DuckDB, Spark, BigQuery) do not see them twice.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = "1.7"
"""Major.minor. Readers reject an unknown major; a minor bump only adds nullable columns or
struct fields (1.1: trajectories.checkpoint_digest; 1.2: multi-turn episodes, i.e. response_mask,
episode_end and the turn fields after duration_ms; 1.3: context segments, i.e. `segments` and
turns' `segment`; 1.4: segments' `summary`; 1.5: the `evaluations` table; 1.6: trajectories.reward_source and the
data-flywheel tables: interactions, feedback, sft_examples, preference_pairs, review_queue,
reviews); 1.7: turns' `checkpoint_digest`, the weights that sampled each action). Older tables
read the added ones as null."""

TURN = pa.struct([
    ("action", pa.string()),
    ("observation", pa.string()),
    ("exit_code", pa.int32()),
    ("duration_ms", pa.float64()),
    ("tool", pa.string()),                  # the tool called, or null (single-turn / malformed)
    ("tool_error", pa.string()),            # why the call was refused (model-side), else null
    ("action_start", pa.int32()),           # [start, end) of the action in response_token_ids
    ("action_end", pa.int32()),
    ("observation_start", pa.int32()),      # ... and of the observation that followed it
    ("observation_end", pa.int32()),
    ("observation_cut", pa.int32()),        # characters cut from the middle of the observation
    ("reward", pa.float64()),               # the domain's score of the state after this turn
    ("advantage", pa.float64()),            # this turn's normalized discounted return (per-turn credit)
    ("segment", pa.int32()),                # the context segment holding the action (0: the first)
    ("checkpoint_digest", pa.string()),     # the weights that sampled the action (1.7; null before)
])

SEGMENT = pa.struct([                       # an episode's earlier context (context_strategies.py)
    ("prompt_token_ids", pa.list_(pa.int32())),
    ("response_token_ids", pa.list_(pa.int32())),
    ("response_logprobs", pa.list_(pa.float32())),
    ("response_mask", pa.list_(pa.int8())),
    ("first_turn", pa.int32()),             # its first turn's index in `turns`
    ("context", pa.string()),               # the strategy that closed it
    ("summary", pa.string()),               # the summary the policy wrote at its end (summarize)
])

TRAJECTORIES = pa.schema([
    ("schema_version", pa.string()),
    ("run_id", pa.string()),
    ("iteration", pa.int32()),
    ("domain", pa.string()),
    ("task_id", pa.string()),
    ("group_id", pa.string()),
    ("sample_index", pa.int32()),
    ("policy_version", pa.int32()),
    ("checkpoint_digest", pa.string()),     # the weights that sampled the row (policy_digest)
    ("prompt", pa.string()),
    ("prompt_token_ids", pa.list_(pa.int32())),
    ("response", pa.string()),
    ("response_token_ids", pa.list_(pa.int32())),
    ("response_logprobs", pa.list_(pa.float32())),
    ("response_mask", pa.list_(pa.int8())),  # 1: the policy's own token (trained on); null: all are
    ("sampling_temperature", pa.float32()),
    ("finish_reason", pa.string()),
    ("turns", pa.list_(TURN)),
    ("segments", pa.list_(SEGMENT)),         # earlier segments; the token columns hold the last
    ("episode_end", pa.string()),            # submitted | solved | max_turns | budget; null: one turn
    ("reward_raw", pa.float64()),
    ("reward_components", pa.map_(pa.string(), pa.float64())),
    ("advantage", pa.float64()),
    ("verifier", pa.string()),
    ("verifier_version", pa.string()),
    ("verdict", pa.string()),
    ("filtered", pa.bool_()),
    ("filter_reason", pa.string()),
    ("sandbox_backend", pa.string()),
    ("sandbox_wall_ms", pa.float64()),
    ("sandbox_cpu_ms", pa.float64()),
    ("started_at", pa.timestamp("us", tz="UTC")),
    ("finished_at", pa.timestamp("us", tz="UTC")),
    ("reward_source", pa.string()),          # verifier (null reads as it) | review | review_pending
])

EVALUATIONS = pa.schema([                    # `flywheel eval`: a trajectories row and how it was judged
    *TRAJECTORIES,
    ("evaluation", pa.string()),             # the evaluation's name (an ablation cell's settings)
    ("greedy", pa.bool_()),                  # the task's one greedy attempt; else one of its N samples
    ("answer_key", pa.string()),             # the final answer, canonical (maj@N); null: not comparable
    ("visible_score", pa.float64()),         # the verifier's visible part alone (visible tests)
    ("self_score", pa.float64()),            # the policy's own judgment: P(it says correct)
    ("self_judgment", pa.string()),          # ... and what it said
])

ERRORS = pa.schema([
    ("schema_version", pa.string()),
    ("run_id", pa.string()),
    ("iteration", pa.int32()),
    ("domain", pa.string()),
    ("task_id", pa.string()),
    ("sample_index", pa.int32()),
    ("stage", pa.string()),
    ("kind", pa.string()),
    ("error_type", pa.string()),
    ("message", pa.string()),
    ("payload", pa.string()),
    ("retry_count", pa.int32()),
    ("created_at", pa.timestamp("us", tz="UTC")),
])

METRICS = pa.schema([
    ("schema_version", pa.string()),
    ("run_id", pa.string()),
    ("iteration", pa.int32()),
    ("domain", pa.string()),
    ("name", pa.string()),
    ("value", pa.float64()),
    ("policy_version", pa.int32()),
    ("created_at", pa.timestamp("us", tz="UTC")),
])

# --- the data flywheel (1.6): traffic in, human review, supervised data -----------------------

INTERACTIONS = pa.schema([                   # `flywheel serve`: one row per chat completion
    ("schema_version", pa.string()),
    ("recorder_id", pa.string()),            # the recorder (its folder's name)
    ("interaction_id", pa.string()),         # the completion's id, as the client got it
    ("choice_index", pa.int32()),            # which of its n choices (seed + choice_index sampled it)
    ("day", pa.string()),                    # YYYY-MM-DD (UTC) of created_at: the partition
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("model", pa.string()),                  # the name served
    ("checkpoint_digest", pa.string()),      # the weights that sampled it (policy_digest)
    ("client", pa.string()),                 # the token's name that called
    ("messages", pa.string()),               # JSON: the request's messages
    ("tools", pa.string()),                  # JSON: the request's tools, or null
    ("prompt", pa.string()),                 # the last user message's text
    ("prompt_token_ids", pa.list_(pa.int32())),
    ("response", pa.string()),
    ("response_token_ids", pa.list_(pa.int32())),
    ("response_logprobs", pa.list_(pa.float32())),
    ("finish_reason", pa.string()),
    ("sampling_temperature", pa.float32()),
    ("max_tokens", pa.int32()),
    ("seed", pa.int64()),
    ("latency_ms", pa.float64()),
])

FEEDBACK = pa.schema([                       # `flywheel serve`'s feedback endpoint: one row per signal
    ("schema_version", pa.string()),
    ("recorder_id", pa.string()),
    ("feedback_id", pa.string()),
    ("interaction_id", pa.string()),
    ("choice_index", pa.int32()),            # the choice it judges (null: choice 0)
    ("day", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("client", pa.string()),
    ("rating", pa.float64()),                # +1 thumbs up, -1 down, or a score in [0, 1]
    ("label", pa.string()),                  # e.g. up | down | ci_pass | ci_fail
    ("correction", pa.string()),             # the response the user wanted instead
    ("comment", pa.string()),
])

SFT_EXAMPLES = pa.schema([                   # demonstrations for `flywheel sft`
    ("schema_version", pa.string()),
    ("example_id", pa.string()),
    ("source", pa.string()),                 # openai | plain | interactions | run | tasks | review
    ("source_uri", pa.string()),             # the file or run it came from
    ("source_line", pa.int64()),             # 1-based line in that file, or null
    ("domain", pa.string()),
    ("task_id", pa.string()),
    ("messages", pa.string()),               # JSON: the conversation before the response
    ("prompt", pa.string()),                 # the last user message's text
    ("response", pa.string()),
    ("prompt_token_ids", pa.list_(pa.int32())),   # exact ids where recorded (token_source's)
    ("response_token_ids", pa.list_(pa.int32())),
    ("token_source", pa.string()),           # checkpoint digest or model whose tokenizer made the ids
    ("reward", pa.float64()),
    ("created_at", pa.timestamp("us", tz="UTC")),
])

PREFERENCE_PAIRS = pa.schema([               # (chosen, rejected) responses to one context, for DPO
    ("schema_version", pa.string()),
    ("pair_id", pa.string()),
    ("source", pa.string()),
    ("source_uri", pa.string()),
    ("source_line", pa.int64()),
    ("domain", pa.string()),
    ("task_id", pa.string()),
    ("messages", pa.string()),
    ("prompt", pa.string()),
    ("chosen", pa.string()),
    ("rejected", pa.string()),
    ("prompt_token_ids", pa.list_(pa.int32())),
    ("chosen_token_ids", pa.list_(pa.int32())),
    ("rejected_token_ids", pa.list_(pa.int32())),
    ("token_source", pa.string()),
    ("reason", pa.string()),                 # correction | choice | rating | review
    ("margin", pa.float64()),                # chosen's score minus rejected's, where known
    ("created_at", pa.timestamp("us", tz="UTC")),
])

REVIEW_QUEUE = pa.schema([                   # attempts waiting for a person's label
    ("schema_version", pa.string()),
    ("run_id", pa.string()),
    ("iteration", pa.int32()),
    ("attempt_id", pa.string()),             # group_id/sample_index
    ("domain", pa.string()),
    ("task_id", pa.string()),
    ("group_id", pa.string()),
    ("sample_index", pa.int32()),
    ("reason", pa.string()),                 # unverified (no verifier) | audit (a verified sample)
    ("prompt", pa.string()),
    ("response", pa.string()),
    ("response_digest", pa.string()),        # sha256 of the response's text: a label names it
    ("observation", pa.string()),            # what executing it printed (cut to a bound)
    ("verifier_reward", pa.float64()),       # audit: the verifier's reward; else null
    ("verdict", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
])

REVIEWS = pa.schema([                        # `flywheel review serve`: one row per label given
    ("schema_version", pa.string()),
    ("run_id", pa.string()),
    ("iteration", pa.int32()),               # the attempt's iteration
    ("review_id", pa.string()),
    ("attempt_id", pa.string()),
    ("domain", pa.string()),
    ("task_id", pa.string()),
    ("group_id", pa.string()),
    ("sample_index", pa.int32()),
    ("response_digest", pa.string()),        # the queue row's: a label applies to that text only
    ("reviewer", pa.string()),
    ("score", pa.float64()),                 # in [0, 1]: the reward it becomes
    ("label", pa.string()),
    ("comment", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
])

TABLES = {"trajectories": TRAJECTORIES, "errors": ERRORS, "metrics": METRICS,
          "evaluations": EVALUATIONS, "interactions": INTERACTIONS, "feedback": FEEDBACK,
          "sft_examples": SFT_EXAMPLES, "preference_pairs": PREFERENCE_PAIRS,
          "review_queue": REVIEW_QUEUE, "reviews": REVIEWS}

PARTITION_COLUMNS = {
    "trajectories": ("iteration", "domain"),
    "evaluations": ("iteration", "domain"),
    "errors": ("iteration",),
    "metrics": ("iteration",),
    "interactions": ("day",),
    "feedback": ("day",),
    "sft_examples": (),
    "preference_pairs": (),
    "review_queue": ("iteration",),
    "reviews": ("iteration",),
}

KEPT_TABLES = ("interactions", "feedback", "sft_examples", "preference_pairs", "reviews")
"""Tables a rewritten iteration never deletes: people's labels and recorded traffic are not
the run's to regenerate."""

ERROR_KINDS = ("environment", "model", "input")
VERDICTS = ("pass", "fail", "error")


def file_schema(table: str) -> pa.Schema:
    """The schema of one Parquet file of `table`: the logical schema minus its partition columns."""
    schema = TABLES[table]
    for name in PARTITION_COLUMNS[table]:
        schema = schema.remove(schema.get_field_index(name))
    return schema.with_metadata({b"flywheel.table": table.encode(),
                                 b"flywheel.schema_version": SCHEMA_VERSION.encode()})
