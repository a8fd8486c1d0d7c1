"""Where supervised examples and preference pairs come from, as the user chooses.

    task_file_examples(policy, ["tasks.jsonl"], seed)     # a row's reference, or its domain's demonstration
    domain_examples(policy, ["chat_arith"], 256, seed)    # built-in train tasks, demonstrated
    table_examples(policy, "imports/", digest)            # `flywheel import`'s sft_examples table
    table_pairs(policy, "imports/", digest)               # ... and its preference_pairs table
    run_examples("runs/r", policy, best_per_task=True)    # a run's verified successes (RFT)
    review_pairs("runs/r", policy)                        # reviewed attempts of one group, ranked

Each returns a `Collected`: the examples (trainer/supervised.py rows) or pairs
(trainer/preference.py) and every row it could not use, counted by reason with the first few
places named. A bad row is a count, never an exception. Recorded ids (a run's rows; an
imported row whose `token_source` is the starting checkpoint's digest) are used only where
they spell the row's text under the starting policy (feedback/recorded_ids.py): otherwise the
text goes through the policy's own encoding and the item is flagged (`ids_reencoded`, counted
in `Collected.reencoded`); an episode whose action ids do not spell its actions is left out.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.dataset as ds
from apache_beam.io.filesystems import FileSystems

from flywheel.domains.episodes import turns_for
from flywheel.domains.registry import get_domain, prepare_task
from flywheel.domains.task_files import rows_of_file, where
from flywheel.feedback.interaction_formats import message_problem
from flywheel.settings.layout import RunLayout
from flywheel.feedback.recorded_ids import SpellCheck
from flywheel.pipelines.demonstrations import demonstrated
from flywheel.schemas import read_table
from flywheel.trainer.preference import pair
from flywheel.trainer.segments import segment_rows
from flywheel.trainer.supervised import example

NOTES = 5  # places named per source; the rest are counted
DEMO_ERRORS = (NotImplementedError, RuntimeError, KeyError, ValueError, TypeError)


@dataclass
class Collected:
    """Examples or pairs from one or more sources, and the rows left out (reason -> count)."""
    items: list[dict] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)   # "where: why", the first few
    sources: Counter = field(default_factory=Counter)  # source -> items
    reencoded: Counter = field(default_factory=Counter)  # why recorded ids were not trusted -> items

    def add(self, item: dict, source: str) -> None:
        self.items.append({**item, "source": source})
        self.sources[source] += 1

    def skip(self, place: str, reason: str) -> None:
        self.skipped[reason] += 1
        if self.skipped[reason] <= NOTES:
            self.notes.append(f"{place}: {reason}")

    def flag(self, place: str, reason: str) -> None:
        """An item kept on ids re-encoded from its text, since its recorded ids did not spell it."""
        self.reencoded[reason] += 1
        if self.reencoded[reason] <= NOTES:
            self.notes.append(f"{place}: ids re-encoded from the text ({reason})")

    def extend(self, other: Collected) -> Collected:
        self.items += other.items
        self.skipped.update(other.skipped)
        self.reencoded.update(other.reencoded)
        self.sources.update(other.sources)
        self.notes += other.notes
        return self


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


# -- demonstrations of tasks ------------------------------------------------------------------
def demonstrate(policy, task: dict, rng: random.Random, response: str | None = None
                ) -> tuple[dict | None, str | None]:
    """(example, None) for `task` with `response` (else its domain's demonstration), prompted as
    the rollout prompts it; (None, why) when there is no response."""
    domain = get_domain(task["domain"])
    episode = turns_for(domain, 0) > 1
    prompt = (policy.encode_tool_prompt(task["prompt"], [t.to_dict() for t in domain.tools])
              if episode else policy.encode_prompt(task["prompt"]))
    try:
        if response is not None:
            ids, mask = policy.encode_response(response), None
        else:
            ids, mask = demonstrated(policy, domain, task, rng, 0)
            mask = mask if episode else None
    except DEMO_ERRORS as e:
        return None, f"domain {domain.name} cannot demonstrate it ({_why(e)})"
    return example(prompt, ids, mask, task_id=task.get("task_id"), domain=domain.name), None


def task_file_examples(policy, patterns: list[str], seed: int,
                       default_domain: str | None = None) -> Collected:
    """Examples of the rows of task files (JSONL/JSON/Parquet, as the pipeline reads them): a
    row's own `reference` or `response` text, else its domain's demonstration."""
    out, rng = Collected(), random.Random(f"{seed}:sft_tasks")
    for pattern in patterns:
        matched = FileSystems.match([pattern])[0].metadata_list
        if not matched:
            raise FileNotFoundError(f"--tasks {pattern}: no file matches")
        for meta in sorted(matched, key=lambda m: m.path):
            with FileSystems.open(meta.path) as f:
                data = f.read()
            for number, row, problem in rows_of_file(meta.path, data, default_domain):
                place = where(meta.path, number)
                task, problems = (None, [problem]) if row is None else prepare_task(row, default_domain)
                if task is None:
                    out.skip(place, "; ".join(problems))
                    continue
                if task["split"] == "heldout":  # evaluation stays clean of what was trained on
                    out.skip(place, "a held-out task (split `heldout`): never trained on")
                    continue
                given = next((row[k] for k in ("reference", "response")
                              if isinstance(row.get(k), str) and row[k].strip()), None)
                ex, why = demonstrate(policy, task, rng, given)
                if ex:
                    out.add(ex, "tasks")
                else:
                    out.skip(place, why)
    return out


def domain_examples(policy, domains: list[str], n: int, seed: int) -> Collected:
    """Demonstrations of train tasks 0..n-1 of each built-in domain."""
    out, rng = Collected(), random.Random(f"{seed}:sft_domains")
    for name in domains:
        domain = get_domain(name)  # an unknown name: KeyError listing the known
        for i in range(n):
            try:
                task = domain.make_task("train", i, seed)
            except (*DEMO_ERRORS, IndexError) as e:
                out.skip(f"{name} task {i}", f"domain {name} makes no train task ({_why(e)})")
                continue
            ex, why = demonstrate(policy, task, rng)
            if ex:
                out.add(ex, name)
            else:
                out.skip(f"{name} task {i}", why)
    return out


# -- imported tables (`flywheel import`) ---------------------------------------------------------
def _imported(folder: str, table: str) -> list[dict]:
    uri = folder.rstrip("/") + f"/tables/{table}"
    try:
        return read_table(uri, table, missing_ok=False).to_pylist()
    except FileNotFoundError:
        raise FileNotFoundError(f"{folder}: no {table} table at {uri} (write one with "
                                "`flywheel import`)") from None
    except (pa.ArrowException, OSError) as e:  # a file of another shape: name it, not a traceback
        raise ValueError(f"{uri}: not a readable {table} table ({type(e).__name__}: {e})") from None


def _prompt_ids(policy, row: dict) -> list[int]:
    """The row's context: its `messages` JSON (a list of {role, content}) through the chat
    template, else its `prompt` text; ValueError saying what is wrong."""
    if row.get("messages"):
        try:
            messages = json.loads(row["messages"])
        except (ValueError, RecursionError) as e:  # "[[[[..." nested past Python's stack
            raise ValueError(f"`messages` is not JSON ({type(e).__name__})") from None
        problem = message_problem(messages, "messages")
        if problem:
            raise ValueError(problem)
        return policy.encode_messages(messages)
    if isinstance(row.get("prompt"), str) and row["prompt"]:
        return policy.encode_prompt(row["prompt"])
    raise ValueError("neither `messages` nor `prompt` given")


def _place(folder: str, table: str, row: dict, number: int) -> str:
    if row.get("source_uri"):
        return f"{row['source_uri']}" + (f": line {row['source_line']}" if row.get("source_line") else "")
    return f"{folder}/tables/{table}: row {number}"


def _recorded(check: SpellCheck, out: Collected, place: str, row: dict, texts: dict[str, str],
              prompt: list[int]) -> tuple[list[int], dict[str, list[int]], bool]:
    """(prompt ids, {side: response ids}, exact) of an imported row whose ids name the starting
    weights: each recorded side kept where it spells its text, else the text's own ids and the
    row flagged; `texts` maps a side (response, chosen, rejected) to its text."""
    ids = {side: check.policy.encode_response(text) for side, text in texts.items()}
    whys = [check.prompt(row.get("prompt_token_ids"), prompt)]
    for side, text in texts.items():
        why = check.response(row.get(f"{side}_token_ids"), text)
        if why is None:
            ids[side] = list(row[f"{side}_token_ids"])
        whys.append(f"`{side}_token_ids`: {why}" if why else None)
    whys = [w for w in whys if w]
    for why in whys[:1]:
        out.flag(place, why)
    return prompt, ids, not whys


def table_examples(policy, folder: str, digest: str) -> Collected:
    """Examples of `folder`'s sft_examples table: `messages`/`prompt` and `response` encoded by
    the policy, or the recorded ids where `token_source` is `digest` (the starting weights') and
    they spell that text (recorded_ids.py); ids that do not are re-encoded and flagged."""
    out, check = Collected(), SpellCheck(policy)
    for number, row in enumerate(_imported(folder, "sft_examples"), start=1):
        place = _place(folder, "sft_examples", row, number)
        if not isinstance(row.get("response"), str) or not row["response"]:
            out.skip(place, "no `response` text (recorded ids are only used where they spell it)")
            continue
        try:
            prompt = _prompt_ids(policy, row)
        except ValueError as e:
            out.skip(place, str(e))
            continue
        if row.get("token_source") == digest and (row.get("prompt_token_ids")
                                                   or row.get("response_token_ids")):
            prompt, ids, exact = _recorded(check, out, place, row, {"response": row["response"]},
                                           prompt)
            out.add(example(prompt, ids["response"], task_id=row.get("task_id"),
                            ids_reencoded=not exact),
                    "examples (exact ids)" if exact else "examples (ids re-encoded)")
            continue
        out.add(example(prompt, policy.encode_response(row["response"]), task_id=row.get("task_id")),
                "examples")
    return out


def table_pairs(policy, folder: str, digest: str) -> Collected:
    """Pairs of `folder`'s preference_pairs table, on the recorded ids where `token_source` is
    `digest` and they spell the texts, else on the texts encoded by the policy (flagged where
    recorded ids were refused)."""
    out, check = Collected(), SpellCheck(policy)
    for number, row in enumerate(_imported(folder, "preference_pairs"), start=1):
        place = _place(folder, "preference_pairs", row, number)
        if not all(isinstance(row.get(k), str) and row[k] for k in ("chosen", "rejected")):
            out.skip(place, "`chosen` or `rejected` text missing (recorded ids are only used "
                     "where they spell it)")
            continue
        if row["chosen"] == row["rejected"]:
            out.skip(place, "`chosen` and `rejected` are the same text")
            continue
        margin = row.get("margin")
        margin = margin if isinstance(margin, (int, float)) and math.isfinite(margin) else None
        try:
            prompt = _prompt_ids(policy, row)
        except ValueError as e:
            out.skip(place, str(e))
            continue
        texts = {"chosen": row["chosen"], "rejected": row["rejected"]}
        if row.get("token_source") == digest and any(
                row.get(f"{k}_token_ids") for k in ("prompt", "chosen", "rejected")):
            prompt, ids, exact = _recorded(check, out, place, row, texts, prompt)
            out.add(pair(prompt, ids["chosen"], ids["rejected"], margin=margin,
                         ids_reencoded=not exact),
                    "pairs (exact ids)" if exact else "pairs (ids re-encoded)")
            continue
        out.add(pair(prompt, policy.encode_response(row["chosen"]),
                     policy.encode_response(row["rejected"]), margin=margin), "pairs")
    return out


# -- a run's own attempts ------------------------------------------------------------------------
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


def response_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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
        elif digest != response_digest(attempt.get("response") or ""):
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


def within_context(collected: Collected, context: int) -> Collected:
    """`collected` less the items longer than the policy's `context` (each counted)."""
    kept = []
    for item in collected.items:
        responses = [item[k] for k in ("response_token_ids", "chosen_token_ids",
                                       "rejected_token_ids") if k in item]
        if len(item["prompt_token_ids"]) + max(map(len, responses)) > context:
            collected.skip(item.get("task_id") or item["source"], "longer than the policy's "
                           f"context ({context} tokens)")
            collected.sources[item["source"]] -= 1
        else:
            kept.append(item)
    collected.items = kept
    return collected
