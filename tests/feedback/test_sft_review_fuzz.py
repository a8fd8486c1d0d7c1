"""The readers of SFT/DPO tables and of review labels are total: rows of any shape the tables
can hold (a `messages` JSON of the wrong shape at any field, ids of any ints, scores that are
no numbers in [0, 1], names missing) never raise. Every row is used or counted as left out with
its reason; recorded ids are used only where they spell the row's text. Real Parquet written
and read back; hypothesis draws the rows (a modest budget)."""
import datetime as dt
import json
import math

from hypothesis import HealthCheck, given, settings, strategies as st

from flywheel.feedback.recorded_ids import SpellCheck
from flywheel.feedback.review_rewards import reviewed_groups, scores_by_attempt
from flywheel.feedback.review_stats import summary, usable_label
from flywheel.feedback.sft_data import table_examples, table_pairs
from flywheel.schemas.write import write_partitioned
from flywheel.policy.backends import create_policy

POLICY = create_policy("tiny", {}, seed=0)
DIGEST = "sha256:start"
ODD = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(), st.text(max_size=8),
                st.lists(st.integers(0, 300), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                             st.integers(), max_size=2))
MESSAGE = st.fixed_dictionaries({"role": st.one_of(st.just("user"), ODD),
                                 "content": st.one_of(st.text(max_size=8), ODD, st.lists(
                                     st.fixed_dictionaries({"type": st.just("text"),
                                                            "text": st.one_of(st.text(max_size=5), ODD)}),
                                     max_size=2))})
MESSAGES = st.one_of(st.none(), st.just("[{not json"), st.builds(
    json.dumps, st.one_of(st.lists(st.one_of(MESSAGE, ODD), max_size=3), ODD)))
IDS = st.one_of(st.none(), st.lists(st.integers(-2**31, 2**31 - 1), max_size=6),
                st.lists(st.integers(0, 259), max_size=6))
TEXT = st.one_of(st.none(), st.just(""), st.text(max_size=6))
ROW = st.fixed_dictionaries({
    "messages": MESSAGES, "prompt": TEXT, "response": TEXT, "chosen": TEXT, "rejected": TEXT,
    "prompt_token_ids": IDS, "response_token_ids": IDS, "chosen_token_ids": IDS,
    "rejected_token_ids": IDS, "token_source": st.sampled_from([None, DIGEST, "sha256:other"]),
    "margin": st.one_of(st.none(), st.floats())})
FAST = settings(max_examples=15, deadline=5000,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FAST
@given(rows=st.lists(ROW, min_size=1, max_size=8))
def test_any_table_row_is_used_or_counted_and_ids_spell_their_text(tmp_path_factory, rows):
    folder = str(tmp_path_factory.mktemp("tables"))
    keys = {"sft_examples": ("messages", "prompt", "response", "prompt_token_ids",
                             "response_token_ids", "token_source"),
            "preference_pairs": ("messages", "prompt", "chosen", "rejected", "prompt_token_ids",
                                 "chosen_token_ids", "rejected_token_ids", "token_source", "margin")}
    for table, names in keys.items():
        write_partitioned(folder, table, [{k: r[k] for k in names} for r in rows])
    check = SpellCheck(POLICY)
    examples = table_examples(POLICY, folder, DIGEST)
    assert len(examples.items) + sum(examples.skipped.values()) == len(rows)
    for item in examples.items:  # what is trained spells a text a reader saw
        assert any(check.response(item["response_token_ids"], r["response"]) is None for r in rows)
    pairs = table_pairs(POLICY, folder, DIGEST)
    assert len(pairs.items) + sum(pairs.skipped.values()) == len(rows)
    for item in pairs.items:
        assert any(check.response(item["chosen_token_ids"], r["chosen"]) is None for r in rows)
        assert item["margin"] is None or math.isfinite(item["margin"])


NAME = st.one_of(st.none(), st.just(""), st.sampled_from(["a/0", "a/1", "b/0"]))
LABEL = st.fixed_dictionaries({
    "attempt_id": NAME, "reviewer": st.one_of(st.none(), st.sampled_from(["ann", "bo"])),
    "response_digest": st.one_of(st.none(), st.sampled_from(["d0", "d1"])),
    "score": st.one_of(st.none(), st.floats(), st.sampled_from([0.0, 0.5, 1.0])),
    "created_at": st.one_of(st.none(), st.just(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))),
    "domain": st.none()})
QUEUED = st.fixed_dictionaries({
    "attempt_id": NAME, "group_id": st.one_of(st.none(), st.sampled_from(["a", "b"])),
    "iteration": st.one_of(st.none(), st.integers(0, 3)),
    "reason": st.one_of(st.none(), st.sampled_from(["unverified", "audit"])),
    "response_digest": st.one_of(st.none(), st.sampled_from(["d0", "d1"])),
    "domain": st.sampled_from(["open_ended"]), "verifier_reward": st.one_of(st.none(), st.floats()),
    "verdict": st.one_of(st.none(), st.sampled_from(["pass", "fail"]))})


@settings(max_examples=60, deadline=2000)
@given(queue=st.lists(QUEUED, max_size=6), reviews=st.lists(LABEL, max_size=8))
def test_review_labels_of_any_shape_never_stop_a_statistic_or_an_update(queue, reviews):
    stats = summary(queue, reviews)  # never raises
    assert stats["labels"] <= sum(map(usable_label, reviews))
    scores = scores_by_attempt(queue, reviews)
    assert all(0 <= s <= 1 and n >= 1 for s, n in scores.values())
    ready, counts = reviewed_groups(queue, scores, set(), 3, 2)
    assert set(counts) == {"pending_groups", "expired_groups", "ready_groups"}
