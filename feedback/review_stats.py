"""What people's labels say: agreement between reviewers, and how often they overrule the verifier.

    flywheel review stats --run-dir runs/r [--format table|json]

Pure functions over rows (dicts of the `review_queue` and `reviews` tables), and `read_rows` to
get those rows from a run. A reviewer may relabel an attempt: only the newest label per
(attempt, reviewer) counts (`latest_labels`). A label names the text it judged
(`response_digest`): one whose digest is not the queue row's (the iteration was rewritten since)
judges another response and is left out of the counts against the queue. Pass/fail is
score >= 0.5, the same line for a reviewer's score and for the verifier's reward. A label
file is the user's: a row that names no attempt, reviewer or text, or whose score is no number
in [0, 1], and a queue row that names no attempt, iteration or reason, counts for nothing
(`usable_label`, `usable_queue_row`), so no shape of a row stops a statistic or an update.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from itertools import combinations

from flywheel.schemas import read_table

PASS_AT = 0.5
EPOCH = datetime.min.replace(tzinfo=timezone.utc)


def passed(score: float) -> bool:
    return score >= PASS_AT


def usable_label(row: Mapping) -> bool:
    """Whether a reviews row can count: an attempt, a reviewer and a text named (strings) and a
    score that is a number in [0, 1]."""
    score = row.get("score")
    return (_named(row, ("attempt_id", "reviewer", "response_digest"))
            and isinstance(score, (int, float)) and not isinstance(score, bool)
            and math.isfinite(score) and 0 <= score <= 1
            and isinstance(row.get("created_at"), (datetime, type(None))))


def usable_queue_row(row: Mapping) -> bool:
    """Whether a review_queue row can count: an attempt, its group and text named, an iteration."""
    return (_named(row, ("attempt_id", "group_id", "response_digest", "reason"))
            and isinstance(row.get("iteration"), int) and not isinstance(row["iteration"], bool))


def _named(row: Mapping, keys: tuple[str, ...]) -> bool:
    return all(isinstance(row.get(k), str) and row[k] for k in keys)


def latest_labels(reviews: Iterable[Mapping]) -> list[Mapping]:
    """The newest usable review per (attempt_id, reviewer), by created_at; of equal times, the
    later row."""
    newest: dict[tuple, Mapping] = {}
    for row in filter(usable_label, reviews):
        key = (row["attempt_id"], row["reviewer"])
        if key not in newest or (row["created_at"] or EPOCH) >= (newest[key]["created_at"] or EPOCH):
            newest[key] = row
    return list(newest.values())


def _kappa(pairs: list[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of two raters' pass/fail; None when chance agreement is 1 (both constant)."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    return None if chance >= 1 else (observed - chance) / (1 - chance)


def agreement(reviews: Iterable[Mapping]) -> dict:
    """How reviewers agree on the attempts two or more of them labeled (latest labels only).

    Every pair of reviewers of an attempt is one comparison: `agree` is the share of pairs with
    the same pass/fail, `mean_abs_diff` their mean |score difference|. `kappa` is Cohen's kappa on
    pass/fail for each pair of reviewers over the attempts both labeled, averaged over the pairs
    where it is defined (Light's kappa; with two reviewers, exactly Cohen's); None if nowhere.
    """
    by_attempt: dict[tuple, dict[str, float]] = defaultdict(dict)
    for row in latest_labels(reviews):  # reviewers compared on the same text only
        by_attempt[(row["attempt_id"], row["response_digest"])][row["reviewer"]] = row["score"]
    shared = {a: scores for a, scores in by_attempt.items() if len(scores) >= 2}
    by_pair: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for scores in shared.values():
        for r1, r2 in combinations(sorted(scores), 2):
            by_pair[(r1, r2)].append((scores[r1], scores[r2]))
    compared = [p for pairs in by_pair.values() for p in pairs]
    per_pair = []
    for (r1, r2), pairs in sorted(by_pair.items()):
        verdicts = [(passed(a), passed(b)) for a, b in pairs]
        per_pair.append({"reviewers": [r1, r2], "attempts": len(pairs),
                         "agree": sum(a == b for a, b in verdicts) / len(pairs),
                         "kappa": _kappa(verdicts)})
    kappas = [p["kappa"] for p in per_pair if p["kappa"] is not None]
    return {"attempts": len(shared), "pairs": len(compared),
            "agree": sum(passed(a) == passed(b) for a, b in compared) / len(compared) if compared else None,
            "mean_abs_diff": sum(abs(a - b) for a, b in compared) / len(compared) if compared else None,
            "kappa": sum(kappas) / len(kappas) if kappas else None,
            "by_pair": per_pair}


def verifier_passed(row: Mapping) -> bool | None:
    """The verifier's pass/fail of a queue row: its reward if any, else its verdict; None if neither."""
    if row.get("verifier_reward") is not None:
        return passed(row["verifier_reward"])
    if row.get("verdict"):
        return row["verdict"] == "pass"
    return None


def matching_labels(queue: Iterable[Mapping], reviews: Iterable[Mapping]) -> dict[str, list[Mapping]]:
    """attempt_id -> the latest labels of the queue row's own response (its digest)."""
    digests = {row["attempt_id"]: row["response_digest"] for row in queue
               if _named(row, ("attempt_id", "response_digest"))}
    found: dict[str, list[Mapping]] = defaultdict(list)
    for row in latest_labels(reviews):
        if row["attempt_id"] in digests and row["response_digest"] == digests[row["attempt_id"]]:
            found[row["attempt_id"]].append(row)
    return found


def _disagreement(counts: dict) -> dict:
    labels = counts["labels"]
    return {**counts, "disagree": (counts["human_fail_verifier_pass"]
                                   + counts["human_pass_verifier_fail"]) / labels if labels else None}


def audit_disagreement(queue: Iterable[Mapping], reviews: Iterable[Mapping]) -> dict:
    """How often people overrule the verifier on audited (verified) attempts.

    Each reviewer's latest label of an audit row is one comparison (`labels`); `labeled` counts
    the audit attempts with any label; `disagree` is the share of comparisons where the reviewer's
    pass/fail differs from the verifier's, split into `human_fail_verifier_pass` (the verifier
    was fooled: what a reward hack looks like) and `human_pass_verifier_fail`. Also per domain.
    """
    audits = [row for row in queue if usable_queue_row(row) and row["reason"] == "audit"]
    labels = matching_labels(audits, reviews)
    empty = {"queued": 0, "labeled": 0, "labels": 0, "human_fail_verifier_pass": 0,
             "human_pass_verifier_fail": 0}
    total, domains = dict(empty), defaultdict(lambda: dict(empty))
    for row in audits:
        verifier = verifier_passed(row)
        for counts in (total, domains[row["domain"]]):
            counts["queued"] += 1
            counts["labeled"] += bool(labels.get(row["attempt_id"]))
            for label in labels.get(row["attempt_id"], []) if verifier is not None else []:
                counts["labels"] += 1
                human = passed(label["score"])
                counts["human_fail_verifier_pass"] += verifier and not human
                counts["human_pass_verifier_fail"] += human and not verifier
    return {**_disagreement(total),
            "by_domain": {d: _disagreement(c) for d, c in sorted(domains.items())}}


def review_counts(queue: Iterable[Mapping], reviews: Iterable[Mapping]) -> list[dict]:
    """Per iteration, newest last: attempts queued (and of them, `audit`), labeled by anyone
    (a label of the queued response), and pending (labeled by nobody)."""
    queue = [row for row in queue if usable_queue_row(row)]
    labels = matching_labels(queue, reviews)
    rows: dict[int, dict] = {}
    for row in queue:
        counts = rows.setdefault(row["iteration"], {"iteration": row["iteration"], "queued": 0,
                                                    "audit": 0, "labeled": 0, "pending": 0})
        counts["queued"] += 1
        counts["audit"] += row["reason"] == "audit"
        counts["labeled" if labels.get(row["attempt_id"]) else "pending"] += 1
    return [rows[k] for k in sorted(rows)]


def summary(queue: Iterable[Mapping], reviews: Iterable[Mapping]) -> dict:
    """Every statistic of this module, as one JSON-ready dict."""
    queue, reviews = list(queue), list(reviews)
    latest = latest_labels(reviews)
    return {"counts": review_counts(queue, reviews), "reviewers": len({r["reviewer"] for r in latest}),
            "labels": len(latest), "agreement": agreement(reviews),
            "audit": audit_disagreement(queue, reviews)}


def read_rows(run_dir: str) -> tuple[list[dict], list[dict]]:
    """(review_queue rows, reviews rows) of the run at `run_dir`, local or gs://; empty if none."""
    root = run_dir.rstrip("/") + "/tables"
    return (read_table(f"{root}/review_queue", "review_queue").to_pylist(),
            read_table(f"{root}/reviews", "reviews").to_pylist())
