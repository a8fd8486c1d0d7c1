"""Where supervised examples and preference pairs come from, as the user chooses.

    task_file_examples(policy, ["tasks.jsonl"], seed)     # a row's reference, or its domain's demonstration
    domain_examples(policy, ["chat_arith"], 256, seed)    # built-in train tasks, demonstrated
    table_examples(policy, "imports/", digest)            # `flywheel import`'s sft_examples table
    table_pairs(policy, "imports/", digest)               # ... and its preference_pairs table

A run's own attempts (its verified successes for RFT, its reviewed attempts as pairs) are
feedback/run_sft_data.py's.

Each returns a `Collected`: the examples (trainer/supervised.py rows) or pairs
(trainer/preference.py) and every row it could not use, counted by reason with the first few
places named. A bad row is a count, never an exception. Recorded ids (a run's rows; an
imported row whose `token_source` is the starting checkpoint's digest) are used only where
they spell the row's text under the starting policy (feedback/recorded_ids.py): otherwise the
text goes through the policy's own encoding and the item is flagged (`ids_reencoded`, counted
in `Collected.reencoded`); an episode whose action ids do not spell its actions is left out.
"""
from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from flywheel.domains.episodes import turns_for
from flywheel.domains.registry import get_domain, prepare_task
from flywheel.domains.task_files import rows_of_file, where
from flywheel.feedback.interaction_formats import message_problem
from flywheel.feedback.recorded_ids import SpellCheck
from flywheel.pipelines.demonstrations import demonstrated
from flywheel.schemas import read_table
from flywheel.trainer.preference import pair
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
