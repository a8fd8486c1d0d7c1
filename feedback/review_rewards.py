"""People's labels as rewards: the reviewed attempts an update trains on.

Before update K, the groups of unverified attempts queued in iterations K - max_wait .. K are
looked at. A group joins update K once every queued attempt of it has a label (the mean of its
reviewers' newest scores, each for the very response text queued: `response_digest`), or, at its
last chance (queued in K - max_wait), with the labels it has. Its attempts are written again as
trajectories rows of iteration K (`reward_source = 'review'`, the original sampling ids,
log-probabilities, policy version and checkpoint digest kept), with group-relative advantages
over their scores; the trainer takes rows sampled up to max_wait versions back and corrects for
the lag (trainer/off_policy.py). A group joins one update only: a later label of it is not
trained on. Groups still short of labels are `pending`; those whose last chance passed are
`expired`: counted, never silently dropped.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pyarrow.dataset as ds

from flywheel.settings.config import ReviewSettings
from flywheel.settings.layout import RunLayout
from flywheel.feedback.review_queue import attempt_id, response_digest
from flywheel.feedback.review_stats import (PASS_AT, agreement, audit_disagreement,
                                             matching_labels, usable_queue_row)
from flywheel.schemas import storage
from flywheel.schemas.write import write_partitioned, write_rows
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.credit import assign_credit

def scores_by_attempt(queue: list[dict], reviews: list[dict]) -> dict[str, tuple[float, int]]:
    """attempt_id -> (mean of its reviewers' newest scores, reviewers), counting only labels
    given for the queued response text (review_stats.matching_labels)."""
    return {aid: (sum(float(r["score"]) for r in labels) / len(labels), len(labels))
            for aid, labels in matching_labels(queue, reviews).items() if labels}


def reviewed_groups(queue: list[dict], scores: dict, used: set[str], iteration: int,
                    max_wait: int) -> tuple[dict[str, list[dict]], dict]:
    """(group_id -> its queue rows, for the groups that join update `iteration`; counts)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for q in filter(usable_queue_row, queue):
        if q["reason"] == "unverified":
            groups[q["group_id"]].append(q)
    ready, counts = {}, {"pending_groups": 0, "expired_groups": 0, "ready_groups": 0}
    for gid, rows in groups.items():
        if gid in used:
            continue
        labelled = [q for q in rows if q["attempt_id"] in scores]
        first = rows[0]["iteration"]
        if first < iteration - max_wait:
            counts["expired_groups"] += first == iteration - max_wait - 1
        elif len(labelled) == len(rows) or (first == iteration - max_wait and labelled):
            ready[gid] = labelled
            counts["ready_groups"] += 1
        else:
            counts["pending_groups"] += 1
    return ready, counts


def review_rows(layout: RunLayout, iteration: int, ready: dict[str, list[dict]], scores: dict,
                algorithm: Algorithm) -> list[dict]:
    """The trajectories rows of iteration `iteration` for the ready groups: each attempt's
    original row with the label's reward and a group-relative advantage."""
    wanted = {q["attempt_id"]: q for rows in ready.values() for q in rows}
    if not wanted:
        return []
    first = min(q["iteration"] for q in wanted.values())
    table = layout.read_table("trajectories", filter=(ds.field("iteration") >= first)
                              & (ds.field("reward_source") == "review_pending"))
    originals = {attempt_id(r["group_id"], r["sample_index"]): r for r in table.to_pylist()}
    out = []
    for gid, rows in ready.items():  # only the text labelled: a rewritten row is another attempt
        found = [originals[q["attempt_id"]] for q in rows if q["attempt_id"] in originals
                 and response_digest(originals[q["attempt_id"]].get("response")) == q["response_digest"]]
        if not found:
            continue
        rewards = [scores[attempt_id(r["group_id"], r["sample_index"])][0] for r in found]
        advantages, _ = assign_credit(rewards, [None] * len(found), algorithm.advantage,
                                      "outcome", algorithm.discount)
        signal = len(set(rewards)) > 1
        for r, reward, adv in zip(found, rewards, advantages):
            reviewers = scores[attempt_id(r["group_id"], r["sample_index"])][1]
            out.append({**r, "iteration": iteration, "reward_raw": reward,
                        "verdict": "pass" if reward >= PASS_AT else "fail",
                        "reward_source": "review", "advantage": float(adv) if signal else 0.0,
                        "reward_components": {"review": reward, "reviewers": float(reviewers)},
                        "filtered": not signal,
                        "filter_reason": None if signal else "zero_variance"})
    return out


def add_reviewed_rows(layout: RunLayout, run_id: str, iteration: int, review: ReviewSettings,
                      algorithm: Algorithm) -> dict:
    """Write the reviewed rows that join update `iteration` into its trajectories; counts and
    metric values (`review/...`) for the iteration's metrics rows."""
    window = ds.field("iteration") >= iteration - review.max_wait - 1
    queue = layout.read_table("review_queue", filter=window).to_pylist()
    reviews = layout.read_table("reviews", filter=window).to_pylist()
    earlier = layout.read_table("trajectories", columns=["group_id"],
                                filter=(ds.field("iteration") < iteration)
                                & (ds.field("reward_source") == "review"))
    used = set(earlier.column("group_id").to_pylist())
    scores = scores_by_attempt(queue, reviews)
    ready, counts = reviewed_groups(queue, scores, used, iteration, review.max_wait)
    rows = review_rows(layout, iteration, ready, scores, algorithm)
    if rows:
        write_partitioned(layout.root, "trajectories", rows, prefix="reviewed")
    people = agreement(reviews)
    audits = audit_disagreement([q for q in queue if q["reason"] == "audit"], reviews)
    return {**counts, "rows": len(rows), "rows_with_signal": sum(not r["filtered"] for r in rows),
            "labels": len(reviews), **_figures(people, "agreement"),
            **_figures(audits, "audit")}


def _figures(stats: dict, prefix: str) -> dict:
    """The numeric top-level figures of a review_stats result, named prefix_key."""
    return {f"{prefix}_{k}": v for k, v in stats.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def review_metric_rows(run_id: str, iteration: int, counts: dict) -> list[dict]:
    now = dt.datetime.now(dt.timezone.utc)
    return [{"run_id": run_id, "iteration": iteration, "domain": "*", "name": f"review/{k}",
             "value": float(v), "policy_version": iteration, "created_at": now}
            for k, v in sorted(counts.items())]


def labels_missing(layout: RunLayout, iteration: int) -> int:
    """Unverified attempts queued in `iteration` that no label names yet (the wait's count)."""
    at = ds.field("iteration") == iteration
    queue = [q for q in layout.read_table("review_queue", filter=at).to_pylist()
             if usable_queue_row(q) and q["reason"] == "unverified"]
    scores = scores_by_attempt(queue, layout.read_table("reviews", filter=at).to_pylist())
    return sum(q["attempt_id"] not in scores for q in queue)


def review_before_update(layout: RunLayout, run_id: str, iteration: int, review: ReviewSettings,
                         algorithm: Algorithm, seed: int, event) -> dict:
    """Iteration `iteration`'s review stage, between its rollout and its update: queue its
    attempts, wait (up to wait_seconds) for their labels, add the reviewed rows that join the
    update, and record the counts as `review/*` metrics. Returns the counts."""
    import time
    from flywheel.feedback.review_queue import write_queue
    queued = write_queue(layout, run_id, iteration, review, seed)
    event("review_queued", {"iteration": iteration, **queued})
    deadline = time.monotonic() + review.wait_seconds
    missing = labels_missing(layout, iteration) if queued["unverified"] else 0
    while missing and time.monotonic() < deadline:
        event("review_wait", {"iteration": iteration, "missing": missing,
                              "seconds_left": round(deadline - time.monotonic())})
        time.sleep(min(2.0, max(deadline - time.monotonic(), 0)))
        missing = labels_missing(layout, iteration)
    counts = {**add_reviewed_rows(layout, run_id, iteration, review, algorithm),
              "queued_unverified": queued["unverified"], "queued_audit": queued["audit"],
              "unlabelled_at_update": missing}
    if any(counts.values()):  # a run without review gets no review/* rows
        write_rows(storage.join(layout.table_dir("metrics", iteration), "review.parquet"),
                   "metrics", review_metric_rows(run_id, iteration, counts))
    event("review_end", {"iteration": iteration, **counts})
    return counts
