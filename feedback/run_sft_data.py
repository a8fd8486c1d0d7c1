"""Supervised examples and preference pairs from a run's own attempts (feedback/sft_data.py has
the user's sources: task files, built-in domains, imported tables).

    run_examples("runs/r", policy, best_per_task=True)    # a run's verified successes (RFT)
    review_pairs("runs/r", policy)                        # reviewed attempts of one group, ranked

A trajectories row read from a folder keeps its recorded ids only where they spell its texts
under the starting policy (`trusted_row`, feedback/recorded_ids.py); otherwise a one-turn row is
re-encoded from its texts and flagged, and an episode is left out. Every row not used is counted
by reason in the returned `Collected`.
"""
from __future__ import annotations

import math
from collections import defaultdict

import pyarrow.dataset as ds

from flywheel.feedback.recorded_ids import SpellCheck
from flywheel.feedback.review_queue import response_digest
from flywheel.feedback.sft_data import Collected
from flywheel.settings.layout import RunLayout
from flywheel.trainer.preference import pair
from flywheel.trainer.segments import segment_rows
from flywheel.trainer.supervised import example

RUN_COLUMNS = ["iteration", "domain", "task_id", "group_id", "sample_index", "verdict", "filtered",
               "filter_reason", "reward_raw", "prompt_token_ids", "response_token_ids",
               "response_mask", "segments", "response", "prompt", "turns"]


def trusted_row(check: SpellCheck, row: dict) -> tuple[dict | None, str | None, str | None]:
    """(row, why it was re-encoded, None) of a trajectories row read from a folder: a one-turn
    row keeps its ids where they spell its `prompt` and `response` (a rollout's own cut of the
    prompt included), else it is re-encoded from those texts; an episode (a response mask or
    segments) keeps its ids where each action's and summary's ids spell its text, else
    (None, None, why): an episode's observations cannot be re-encoded from a text."""
    policy = check.policy
    if row.get("response_mask") is not None or row.get("segments"):
        own = {"response_token_ids": row.get("response_token_ids"),
               "response_mask": row.get("response_mask")}
        why = check.episode([*(row.get("segments") or []), own], row.get("turns") or [])
        return (row, None, None) if why is None else (None, None, f"an episode: {why}")
    prompt, response = row.get("prompt"), row.get("response")
    if not isinstance(prompt, str) or not isinstance(response, str):
        return None, None, "no recorded `prompt` or `response` text to check the ids against"
    own_prompt = policy.encode_prompt(prompt)
    why = (check.prompt(row.get("prompt_token_ids"), own_prompt)
           or check.response(row.get("response_token_ids"), response))
    if why is None:
        return row, None, None
    return ({**row, "prompt_token_ids": own_prompt,
             "response_token_ids": policy.encode_response(response), "response_mask": None},
            why, None)


def run_examples(run_dir: str, policy, best_per_task: bool = False) -> Collected:
    """Rejection-sampling fine-tuning data: the run's trajectories with verdict 'pass' that no
    filter dropped, on their ids where they spell the rows' texts under `policy` (see
    `success_examples`)."""
    rows = RunLayout(run_dir).read_table("trajectories", columns=RUN_COLUMNS,
                                         filter=ds.field("verdict") == "pass").to_pylist()
    if not rows:
        raise ValueError(f"--from-run {run_dir}: no trajectory with verdict 'pass' (is it a run "
                         "folder with tables/trajectories?)")
    return success_examples(rows, best_per_task, f"{run_dir}/tables/trajectories", policy)


def success_examples(rows: list[dict], best_per_task: bool = False, place: str = "rows",
                     policy=None) -> Collected:
    """Examples of trajectory rows that passed and were not filtered, on the ids the policy
    sampled (an episode's observations masked out, each context segment its own example);
    identical responses to one task kept once; with `best_per_task`, one per task: the highest
    reward, then the shortest response. Rows read from a folder are checked under `policy`
    (`trusted_row`); only rows a rollout of this process just returned may go unchecked."""
    out, seen = Collected(), set()
    check = SpellCheck(policy) if policy is not None else None
    kept: dict[str, list[dict]] = defaultdict(list)
    for i, r in enumerate(rows):
        at = f"{place}: {r.get('group_id') or r.get('task_id')}#{r.get('sample_index', i)}"
        if r.get("verdict") != "pass":
            out.skip(at, f"verdict {r.get('verdict')!r}, not a verified success")
            continue
        if r.get("filtered"):
            out.skip(at, f"filtered ({r.get('filter_reason') or 'no reason given'})")
            continue
        if not r.get("prompt_token_ids") or not r.get("response_token_ids"):
            out.skip(at, "no prompt or response token ids")
            continue
        if check is not None:
            r, reencoded, refused = trusted_row(check, r)
            if r is None:
                out.skip(at, refused)
                continue
            if reencoded:
                r = {**r, "ids_reencoded": True}
        if (r["task_id"], tuple(r["response_token_ids"])) in seen:
            out.skip(at, "the same response to the same task again")
            continue
        if r.get("ids_reencoded"):
            out.flag(at, reencoded)
        seen.add((r["task_id"], tuple(r["response_token_ids"])))
        kept[r["task_id"]].append(r)
    for task_id, group in kept.items():
        if best_per_task:
            best = min(group, key=lambda r: (-(r.get("reward_raw") or 0.0), len(r["response_token_ids"])))
            out.skipped["not the best of its task (--best-per-task)"] += len(group) - 1
            group = [best]
        for r in group:
            for s in segment_rows(r):
                out.add(example(s["prompt_token_ids"], s["response_token_ids"], s.get("response_mask"),
                                task_id=task_id, domain=r.get("domain"),
                                ids_reencoded=bool(r.get("ids_reencoded"))),
                        "run successes (ids re-encoded)" if r.get("ids_reencoded") else "run successes")
    return out


def review_pairs(run_dir: str, policy) -> Collected:
    """Pairs of reviewed attempts: two attempts of one group (same prompt) whose reviews scored
    them differently, the higher chosen (`margin`: the score difference); every such pair of a
    group. An attempt's latest review counts; one that names no text, or another text than the
    attempt's response (`response_digest`), or whose score is no number in [0, 1], is left out;
    an attempt's ids are used where they spell its texts under `policy` (`trusted_row`)."""
    layout, out, check = RunLayout(run_dir), Collected(), SpellCheck(policy)
    reviews = layout.read_table("reviews").to_pylist()
    if not reviews:
        raise ValueError(f"--reviews-run {run_dir}: no reviews table rows (label attempts with "
                         "`flywheel review serve`)")
    latest: dict[tuple, dict] = {}
    for r in sorted(reviews, key=lambda r: (r.get("created_at") is not None, r.get("created_at") or 0)):
        if r.get("group_id") is None or r.get("sample_index") is None or r.get("score") is None:
            out.skip(f"review {r.get('review_id')}", "no group_id, sample_index or score")
            continue
        if not (math.isfinite(r["score"]) and 0 <= r["score"] <= 1):
            out.skip(f"review {r.get('review_id')}", "`score` is not a number in [0, 1]")
            continue
        latest[(r["group_id"], r["sample_index"])] = r
    groups = sorted({g for g, _ in latest})
    attempts = {(r["group_id"], r["sample_index"]): r for r in layout.read_table(
        "trajectories", columns=RUN_COLUMNS, filter=ds.field("group_id").isin(groups)).to_pylist()}
    scored: dict[str, list[tuple[float, dict]]] = defaultdict(list)
    for key, review in latest.items():
        at, attempt = f"review {review.get('review_id')} ({key[0]}#{key[1]})", attempts.get(key)
        digest = (review.get("response_digest") or "").removeprefix("sha256:")
        if attempt is None:
            out.skip(at, "no trajectory row for the reviewed attempt")
        elif not attempt.get("prompt_token_ids") or not attempt.get("response_token_ids"):
            out.skip(at, "the attempt has no token ids")
        elif attempt.get("segments"):
            out.skip(at, "a multi-segment episode (no one sequence to score)")
        elif not digest:
            out.skip(at, "the review names no response text (`response_digest`)")
        elif digest != response_digest(attempt.get("response")):
            out.skip(at, "the review labels another text than the attempt's response")
        elif (checked := trusted_row(check, attempt))[0] is None:
            out.skip(at, checked[2])
        else:
            if checked[1]:
                out.flag(at, checked[1])
            scored[key[0]].append((float(review["score"]), {**checked[0],
                                                            "ids_reencoded": bool(checked[1])}))
    for group_id, items in scored.items():
        if len(items) < 2:
            out.skipped["the only reviewed attempt of its group"] += 1
            continue
        for score_a, a in items:
            for score_b, b in items:
                if score_a <= score_b:
                    continue
                if a["prompt_token_ids"] != b["prompt_token_ids"]:
                    out.skip(group_id, "two attempts of the group saw different prompts")
                    continue
                out.add(pair(a["prompt_token_ids"], a["response_token_ids"], b["response_token_ids"],
                             chosen_mask=a.get("response_mask"), rejected_mask=b.get("response_mask"),
                             margin=score_a - score_b, task_id=a.get("task_id"),
                             ids_reencoded=a["ids_reencoded"] or b["ids_reencoded"]),
                        "reviews (ids re-encoded)" if a["ids_reencoded"] or b["ids_reencoded"]
                        else "reviews")
    return out
