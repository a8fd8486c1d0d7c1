"""`flywheel import`: logged LLM interactions in, SFT examples, preference pairs and RL tasks out.

    import_interactions(["logs/*.jsonl.gz", "recorder/"], "gs://b/imported",
                        ImportOptions(outputs={"sft", "pairs", "tasks"}, domain="chat_arith",
                                      fields=(("answer", "metadata.expected"),)))

Each input line is read in its shape (interaction_formats.py) and classified by its outcome: a
good one (thumbs up, rating >= `good_rating`, CI pass, fine-tuning data with no bad signal) is
an SFT example; a correction is an SFT example of the corrected response and a (correction,
response) pair; DPO rows and plain chosen/rejected are pairs; two responses to one conversation
rated apart are a pair. With a domain, each line is also a task of that domain, its fields taken
from the line (`fields`), checked with `prepare_task` as the pipeline reads tasks. Every bad line
is an `errors` row naming file:line; nothing stops at the first. Files are streamed line by line
(a line over `max_line_bytes` is an error, never held); tables are written in chunks.
Personal data goes before anything is stored: `drop_fields` paths are removed (from every
message too), `redact` replaces e-mail addresses and phone numbers, and token ids of a text
that changed are dropped, since they no longer spell it. Recorded ids are kept as evidence,
never trusted here: `flywheel sft`/`dpo` use them only where they spell the row's text under
the starting policy (feedback/recorded_ids.py). Beam-free but for FileSystems (reading).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from flywheel.domains.registry import prepare_task
from flywheel.feedback.interaction_formats import (PAYLOAD_CHARS, FormatProblem, Record,
                                                    interaction_record, parse_record,
                                                    read_lines, recorder_rows)
from flywheel.feedback.interaction_privacy import dotted, drop_fields, redact
from flywheel.schemas.storage import resolve_uri
from flywheel.schemas.write import table_file, write_rows

OUTPUTS = ("tasks", "sft", "pairs")
RATING_PAIRS_PER_CONVERSATION = 8
RATED_HELD = 200_000  # rated responses held for rating pairs; later ones are counted, not paired


class InputError(ValueError):
    """An input that names nothing: no file matches, or a folder that is no recorder."""


@dataclass(frozen=True)
class ImportOptions:
    outputs: frozenset[str] = frozenset({"sft", "pairs"})
    domain: str | None = None
    fields: tuple[tuple[str, str], ...] = ()      # (task field, dotted path | correction | response)
    drop_fields: tuple[str, ...] = ()
    redact: frozenset[str] = frozenset()
    good_rating: float = 0.7                      # a score at or above it is a good outcome
    max_line_bytes: int = 1 << 20
    chunk_rows: int = 10_000                      # rows per Parquet file


@dataclass
class ImportSummary:
    lines: int = 0
    counts: Counter = field(default_factory=Counter)     # output or outcome -> rows
    errors: Counter = field(default_factory=Counter)     # error type -> rows
    first_errors: list[str] = field(default_factory=list)


def resolve_inputs(patterns: list[str]) -> list[tuple[str, str]]:
    """("recorder", folder) or ("file", path) for each input; InputError for one that names
    nothing. A folder holding tables/interactions is a recorder; anything else is a pattern."""
    from apache_beam.io.filesystems import FileSystems
    found = []
    for pattern in patterns:
        fs, path = resolve_uri(pattern)
        if fs.get_file_info(path).type == pafs.FileType.Directory:
            if fs.get_file_info(f"{path}/tables/interactions").type != pafs.FileType.Directory:
                raise InputError(f"{pattern} is a folder without tables/interactions: expected "
                                 "JSONL files or a `flywheel serve` recorder folder")
            found.append(("recorder", pattern.rstrip("/")))
            continue
        matched = FileSystems.match([pattern])[0].metadata_list
        if not matched:
            raise InputError(f"{pattern}: no file matches")
        # local paths made absolute: a line's task id hashes its path, whatever the cwd
        found += [("file", m.path if "://" in m.path else os.path.abspath(m.path))
                  for m in sorted(matched, key=lambda m: m.path)]
    return found


def _token_ids(ids: Any) -> bool:
    """Whether `ids` could be a tokenizer's: a non-empty list of non-negative ints. Whether they
    spell the row's text is checked where they re-enter training, under the tokenizer the row
    names (feedback/recorded_ids.py): the importer holds no tokenizer."""
    return isinstance(ids, list) and bool(ids) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)


def _stable_id(*parts: Any) -> str:
    return "imp-" + hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:20]


class _Sink:
    """Rows of one table, written as a new Parquet file every `chunk` rows."""

    def __init__(self, out: str, table: str, chunk: int):
        self.out, self.table, self.chunk, self.rows, self.files = out, table, chunk, [], []

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            uri = table_file(self.out, self.table, self.rows[0], prefix="import")
            self.files.append(write_rows(uri, self.table, self.rows))
            self.rows = []


class Importer:
    """Turns records into rows, keeping counts; `close()` writes what is left (rating pairs)."""

    def __init__(self, out: str, options: ImportOptions):
        self.out, self.options, self.summary = out.rstrip("/"), options, ImportSummary()
        self.now = dt.datetime.now(dt.timezone.utc)
        self.sinks = {t: _Sink(self.out, t, options.chunk_rows)
                      for t in ("sft_examples", "preference_pairs", "errors")}
        self.rated: dict[str, list[dict]] = {}       # conversation -> its rated responses
        self.held = 0
        self.task_ids: dict[str, str] = {}
        self.tasks = None
        if "tasks" in options.outputs:
            fs, path = resolve_uri(f"{self.out}/tasks.jsonl")
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            self.tasks = fs.open_output_stream(path)

    def line(self, path: str, number: int, text: str) -> None:
        """One JSON line of `path`, cleaned of personal data, then read and classified."""
        self.guarded(f"{path}:{number}", None, self._line, path, number, text)

    def _line(self, path: str, number: int, text: str) -> None:
        at = f"{path}:{number}"
        try:
            obj = json.loads(text)
            if isinstance(obj, dict):
                obj, _ = redact(drop_fields(obj, self.options.drop_fields), self.options.redact)
        except (ValueError, RecursionError) as e:  # RecursionError: nested past Python's stack
            return self.error(at, "invalid_json", f"invalid JSON ({e or 'nested too deep'}); "
                              "expected one JSON object per line", self._raw_payload(text))
        if not isinstance(obj, dict):
            return self.error(at, "not_an_object", f"expected a JSON object, got "
                              f"{type(obj).__name__}", self._raw_payload(text))
        try:
            record = parse_record(obj)
        except FormatProblem as p:
            return self.error(at, p.kind, str(p), json.dumps(obj, ensure_ascii=False))
        except RecursionError:
            return self.error(at, "unknown_shape", "nested too deep to read; expected one of the "
                              "shapes in docs/IMPORT.md", self._raw_payload(text))
        self.add(record, at, path, number, _stable_id(path, number))

    def guarded(self, at: str, payload: str | None, step, *args) -> None:
        """`step(*args)`, a line's failure of a kind no reader foresaw kept as its error row
        (`unreadable_record`, naming the exception), so the lines after it are still read."""
        try:
            step(*args)
        except Exception as e:  # noqa: BLE001 - failures are data: one row, never a stop
            self.error(at, "unreadable_record", f"could not be read ({type(e).__name__}: "
                       f"{str(e)[:200]}); expected one of the shapes in docs/IMPORT.md", payload)

    def interaction(self, root: str, row: dict, feedback: list[dict]) -> None:
        """One recorder interaction with its feedback rows; token ids of redacted text dropped."""
        at = f"{root}: interaction {row.get('interaction_id')}"
        try:
            row = {**row, "messages": json.loads(row["messages"] or "null")}
        except ValueError as e:
            return self.error(at, "invalid_json", f"`messages` is not JSON ({e})", None)
        spelled = json.dumps(row["messages"])
        row = drop_fields(row, self.options.drop_fields)
        if json.dumps(row["messages"]) != spelled:  # a message field dropped: the ids spell it
            row["prompt_token_ids"] = None
        feedback = [drop_fields(f, self.options.drop_fields) for f in feedback]
        if self.options.redact:
            row["messages"], changed = redact(row["messages"], self.options.redact)
            row["prompt"], prompt_changed = redact(row.get("prompt"), self.options.redact)
            if changed or prompt_changed:
                row["prompt_token_ids"] = None
            row["response"], changed = redact(row.get("response"), self.options.redact)
            if changed:
                row["response_token_ids"] = None
            feedback, _ = redact(feedback, self.options.redact)
        for column in ("prompt_token_ids", "response_token_ids"):
            if row.get(column) is not None and not _token_ids(row[column]):
                row[column] = None  # no ids at all rather than ids no tokenizer makes
                self.summary.counts["token ids dropped (not token ids)"] += 1
        try:
            record = interaction_record(row, feedback)
        except FormatProblem as p:
            return self.error(at, p.kind, str(p), None)
        record.raw = {**row, "feedback": feedback[-1] if feedback else {}}
        self.guarded(at, None, self.add, record, at, root, None,
                     _stable_id("interaction", row.get("interaction_id")))

    def add(self, record: Record, at: str, uri: str, line: int | None, rid: str) -> None:
        options, counts = self.options, self.summary.counts
        good = record.score >= options.good_rating if record.score is not None else record.curated
        common = {"source": record.source, "source_uri": uri, "source_line": line,
                  "domain": record.domain or options.domain, "messages": json.dumps(
                      record.messages, ensure_ascii=False), "prompt": record.prompt,
                  "prompt_token_ids": record.prompt_token_ids, "token_source": record.token_source,
                  "created_at": record.created_at or self.now,
                  "task_id": rid if self.tasks is not None else None}
        counts["good" if record.response and good else "bad" if record.score is not None
               else "no outcome"] += 1
        if "sft" in options.outputs:
            if record.response and good:
                self._sft(common, rid, "response", record.response, record.response_token_ids,
                          record.score)
            if record.correction and not (good and record.correction == record.response):
                self._sft(common, rid, "correction", record.correction, None, None)
        if "pairs" in options.outputs:
            if record.correction and record.response and record.correction != record.response:
                self._pair(common, rid, "correction", (record.correction, None),
                           (record.response, record.response_token_ids), None)
            if record.chosen is not None:
                self._pair(common, rid, "choice", (record.chosen, None), (record.rejected, None),
                           None)
            if record.response and record.score is not None and self.held >= RATED_HELD:
                counts["rated, not paired (over the bound)"] += 1
            elif record.response and record.score is not None:
                self.held += 1
                self.rated.setdefault(_stable_id(common["messages"]), []).append(
                    {**common, "response": record.response, "score": record.score, "rid": rid,
                     "response_token_ids": record.response_token_ids})
        if self.tasks is not None:
            self._task(record, at, rid, good)

    def _sft(self, common: dict, rid: str, what: str, text: str, ids, reward) -> None:
        self.sinks["sft_examples"].add({**common, "example_id": _stable_id(rid, what),
                                        "response": text, "response_token_ids": ids,
                                        "reward": reward})
        self.summary.counts["sft_examples"] += 1

    def _pair(self, common: dict, rid: str, reason: str, chosen, rejected, margin) -> None:
        self.sinks["preference_pairs"].add({
            **common, "pair_id": _stable_id(rid, reason, chosen[0], rejected[0]),
            "chosen": chosen[0], "chosen_token_ids": chosen[1], "rejected": rejected[0],
            "rejected_token_ids": rejected[1], "reason": reason, "margin": margin})
        self.summary.counts[f"preference_pairs ({reason})"] += 1

    def _task(self, record: Record, at: str, rid: str, good: bool) -> None:
        row = {"domain": self.options.domain, "task_id": rid, "prompt": record.prompt}
        for name, sources in self.options.fields:
            value, missing = None, []
            for source in sources.split("|"):  # alternatives, the first one present wins
                if source == "correction":
                    value = record.correction
                    missing.append("no correction")
                elif source == "response":
                    value = record.response if good else None
                    missing.append("no logged response with a good outcome")
                else:
                    value = dotted(record.raw, source)
                    missing.append(f"no `{source}`")
                if value is not None:
                    break
            missing = "the line has " + " and ".join(missing)
            if value is None:
                return self.error(at, "bad_task", f"task field `{name}`: {missing}",
                                  json.dumps(record.raw, ensure_ascii=False, default=str))
            row[name] = str(value) if name == "answer" and isinstance(value, (int, float)) else value
        task, problems = prepare_task(row)
        if problems:
            return self.error(at, "bad_task", f"not a {self.options.domain} task: "
                              + "; ".join(problems), json.dumps(row, ensure_ascii=False))
        if rid in self.task_ids:
            return self.error(at, "duplicate_task", f"task {rid} repeats {self.task_ids[rid]} "
                              "(the same input read twice?)", None)
        self.task_ids[rid] = at
        self.tasks.write((json.dumps(task, ensure_ascii=False, default=str) + "\n").encode())
        self.summary.counts["tasks"] += 1

    def error(self, at: str, kind: str, message: str, payload: str | None) -> None:
        self.sinks["errors"].add({
            "run_id": "import", "iteration": 0, "domain": self.options.domain, "stage": "import",
            "kind": "input", "error_type": kind, "message": f"{at}: {message}",
            "payload": payload[:PAYLOAD_CHARS] if payload is not None else None,
            "retry_count": 0, "created_at": self.now})
        self.summary.errors[kind] += 1
        if len(self.summary.first_errors) < 20:
            self.summary.first_errors.append(f"{at}: {message}")

    def _raw_payload(self, text: str) -> str | None:
        """A line that is no JSON object, as stored: redacted; withheld when fields are to be
        dropped, since they cannot be found in it."""
        if self.options.drop_fields:
            return None
        return redact(text, self.options.redact)[0] if self.options.redact else text

    def close(self) -> ImportSummary:
        for responses in self.rated.values():
            self._rating_pairs(responses)
        for sink in self.sinks.values():
            sink.flush()
        if self.tasks is not None:
            self.tasks.close()
        return self.summary

    def _rating_pairs(self, responses: list[dict]) -> None:
        """Pairs of responses to one conversation whose scores differ: the better one chosen,
        at most RATING_PAIRS_PER_CONVERSATION; ids kept only where both share a tokenizer."""
        ranked = sorted(responses, key=lambda r: -r["score"])
        made: set[tuple[str, str]] = set()       # one pair per two texts, however often logged
        for i, best in enumerate(ranked):
            for worse in ranked[i + 1:]:
                if len(made) >= RATING_PAIRS_PER_CONVERSATION:
                    return
                texts = (best["response"], worse["response"])
                if best["score"] <= worse["score"] or texts[0] == texts[1] or texts in made:
                    continue
                same = best["token_source"] is not None and best["token_source"] == worse["token_source"]
                common = {k: best[k] for k in ("source", "source_uri", "source_line", "domain",
                                               "messages", "prompt", "created_at", "task_id")}
                common.update(prompt_token_ids=best["prompt_token_ids"] if same else None,
                              token_source=best["token_source"] if same else None)
                self._pair(common, best["rid"] + worse["rid"], "rating",
                           (best["response"], best["response_token_ids"] if same else None),
                           (worse["response"], worse["response_token_ids"] if same else None),
                           best["score"] - worse["score"])
                made.add(texts)


def import_interactions(patterns: list[str], out: str, options: ImportOptions,
                        progress=None) -> ImportSummary:
    """Read every input (resolve_inputs) into `out`'s tables (and tasks.jsonl); the summary of
    what was written and what was wrong. `progress(path)` hears of each input first."""
    inputs = resolve_inputs(patterns)
    importer = Importer(out, options)
    try:
        for kind, path in inputs:
            if progress:
                progress(path)
            if kind == "recorder":
                for row, feedback in recorder_rows(path):
                    importer.summary.lines += 1
                    importer.interaction(path, row, feedback)
                continue
            for number, text, problem, error_type in read_lines(path, options.max_line_bytes):
                importer.summary.lines += 1
                if problem:
                    payload = importer._raw_payload(text) if text is not None else None
                    importer.error(f"{path}:{number}", error_type, problem, payload)
                else:
                    importer.line(path, number, text)
    finally:
        summary = importer.close()
    return summary
