"""The review statistics on hand-counted rows: latest labels, agreement, audit disagreement."""

from datetime import datetime, timedelta, timezone

import pytest

from flywheel.feedback.review_stats import (agreement, audit_disagreement, latest_labels, read_rows,
                                             review_counts, summary)
from flywheel.schemas.write import write_partitioned

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def queued(attempt, iteration=0, domain="add", reason="unverified", reward=None, verdict=None):
    return {"run_id": "r", "iteration": iteration, "attempt_id": attempt, "domain": domain,
            "task_id": f"t-{attempt}", "group_id": attempt.split("/")[0], "sample_index": 0,
            "reason": reason, "prompt": "p", "response": "x", "response_digest": f"d-{attempt}",
            "observation": "", "verifier_reward": reward, "verdict": verdict, "created_at": T0}


def label(attempt, reviewer, score, minutes=0, digest=None, iteration=0):
    return {"run_id": "r", "iteration": iteration, "review_id": f"{attempt}-{reviewer}-{minutes}",
            "attempt_id": attempt, "domain": "add", "task_id": f"t-{attempt}", "group_id": attempt,
            "sample_index": 0, "response_digest": digest or f"d-{attempt}", "reviewer": reviewer,
            "score": score, "label": "", "comment": "", "created_at": T0 + timedelta(minutes=minutes)}


def test_the_newest_label_per_attempt_and_reviewer_counts():
    rows = [label("a/0", "ann", 0.0, minutes=5), label("a/0", "ann", 1.0, minutes=1),
            label("a/0", "bob", 0.2), label("b/0", "ann", 0.9)]
    latest = {(r["attempt_id"], r["reviewer"]): r["score"] for r in latest_labels(rows)}
    assert latest == {("a/0", "ann"): 0.0, ("a/0", "bob"): 0.2, ("b/0", "ann"): 0.9}


def test_agreement_counts_pairs_and_cohens_kappa():
    # ann and bob on four attempts: pass/fail (P,P) (F,F) (P,F) (F,F) -> 3 of 4 agree.
    # ann passes 2/4, bob 1/4: chance = .5*.25 + .5*.75 = .5; kappa = (.75 - .5) / .5 = .5
    rows = [label("a/0", "ann", 1.0), label("a/0", "bob", 0.8),
            label("b/0", "ann", 0.0), label("b/0", "bob", 0.0),
            label("c/0", "ann", 0.6), label("c/0", "bob", 0.1),
            label("d/0", "ann", 0.2), label("d/0", "bob", 0.4),
            label("e/0", "ann", 1.0)]  # one reviewer only: not compared
    result = agreement(rows)
    assert result["attempts"] == 4 and result["pairs"] == 4
    assert result["agree"] == pytest.approx(0.75)
    assert result["mean_abs_diff"] == pytest.approx((0.2 + 0 + 0.5 + 0.2) / 4)
    assert result["kappa"] == pytest.approx(0.5)
    assert result["by_pair"] == [{"reviewers": ["ann", "bob"], "attempts": 4,
                                  "agree": pytest.approx(0.75), "kappa": pytest.approx(0.5)}]


def test_kappa_is_undefined_when_both_reviewers_never_vary():
    rows = [label("a/0", "ann", 1.0), label("a/0", "bob", 1.0),
            label("b/0", "ann", 0.9), label("b/0", "bob", 0.7)]
    result = agreement(rows)
    assert result["agree"] == 1.0 and result["kappa"] is None
    assert agreement([])["pairs"] == 0 and agreement([])["agree"] is None


def test_three_reviewers_give_three_pairs_and_a_relabel_replaces_the_old_label():
    rows = [label("a/0", "ann", 1.0), label("a/0", "bob", 1.0), label("a/0", "cy", 0.0),
            label("a/0", "cy", 1.0, minutes=3)]  # cy changed their mind
    result = agreement(rows)
    assert result["pairs"] == 3 and result["agree"] == 1.0


def test_audit_disagreement_compares_people_with_the_verifier_per_domain():
    queue = [queued("a/0", reason="audit", reward=1.0, domain="add"),        # fooled verifier
             queued("b/0", reason="audit", reward=0.0, domain="add"),        # agrees
             queued("c/0", reason="audit", verdict="fail", domain="sql"),    # no reward: verdict
             queued("d/0", reason="audit", reward=1.0, domain="sql"),        # not labeled
             queued("e/0", reason="unverified")]                             # not an audit
    reviews = [label("a/0", "ann", 0.0), label("a/0", "bob", 1.0), label("b/0", "ann", 0.0),
               label("c/0", "ann", 0.9), label("e/0", "ann", 1.0),
               label("d/0", "ann", 0.0, digest="another response")]         # judged other text
    result = audit_disagreement(queue, reviews)
    assert (result["queued"], result["labeled"], result["labels"]) == (4, 3, 4)
    assert result["human_fail_verifier_pass"] == 1 and result["human_pass_verifier_fail"] == 1
    assert result["disagree"] == pytest.approx(2 / 4)
    add, sql = result["by_domain"]["add"], result["by_domain"]["sql"]
    assert (add["labels"], add["disagree"]) == (3, pytest.approx(1 / 3))
    assert (sql["queued"], sql["labeled"], sql["disagree"]) == (2, 1, 1.0)


def test_review_counts_per_iteration():
    queue = [queued("a/0", 0), queued("b/0", 0, reason="audit", reward=1.0), queued("c/0", 1)]
    reviews = [label("a/0", "ann", 1.0), label("a/0", "bob", 0.0), label("c/0", "ann", 1.0, digest="old")]
    assert review_counts(queue, reviews) == [
        {"iteration": 0, "queued": 2, "audit": 1, "labeled": 1, "pending": 1},
        {"iteration": 1, "queued": 1, "audit": 0, "labeled": 0, "pending": 1}]


def test_the_tables_read_back_into_the_summary(tmp_path):
    run = str(tmp_path / "run")
    assert summary(*read_rows(run))["counts"] == []  # no tables yet: empty, not an error
    write_partitioned(run, "review_queue", [queued("a/0", 2, reason="audit", reward=1.0)], prefix="queue")
    write_partitioned(run, "reviews", [label("a/0", "ann", 0.0, iteration=2)], prefix="review")
    stats = summary(*read_rows(run))
    assert stats["counts"] == [{"iteration": 2, "queued": 1, "audit": 1, "labeled": 1, "pending": 0}]
    assert stats["audit"]["human_fail_verifier_pass"] == 1 and stats["labels"] == 1
