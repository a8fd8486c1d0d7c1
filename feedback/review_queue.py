"""The review queue: after an iteration's rollout, the attempts people are to label.

Two reasons put a training attempt in `review_queue/iteration=K`:
- `unverified`: its task is judged by people (the open_ended domain, a row's `"review": true`,
  the run's `[review] domains`); it was written `pending`, filtered `awaiting_review`, and its
  label becomes its reward in a later update (review_rewards.py);
- `audit`: a verified attempt drawn with probability `[review] audit_share` (a hash of its id
  and the run's seed, so a rerun draws the same ones); its reward stays the verifier's, and the
  label measures how often people and the verifier disagree.

Each row carries what a reviewer reads (prompt, response, the execution's output cut to a bound)
and the response's sha256: a label names it, so a label can never be applied to another text
(a rerun of an interrupted iteration samples anew).
"""

from __future__ import annotations

import datetime as dt
import hashlib

import pyarrow.dataset as ds

from flywheel.settings.config import ReviewSettings
from flywheel.settings.layout import RunLayout
from flywheel.schemas import storage
from flywheel.schemas.write import write_rows

QUEUE_COLUMNS = ["iteration", "domain", "task_id", "group_id", "sample_index", "prompt",
                 "response", "turns", "reward_raw", "verdict", "reward_source", "filtered",
                 "filter_reason"]


def attempt_id(group_id: str, sample_index: int) -> str:
    """An attempt's name across tables: its group (iteration/mode/task) and its index in it."""
    return f"{group_id}/{sample_index}"


def response_digest(text: str | None) -> str:
    return hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).hexdigest()


def audited(attempt: str, seed: int, share: float) -> bool:
    """Whether a verified attempt is drawn for audit: a uniform hash of (seed, id) below share."""
    if share <= 0:
        return False
    h = hashlib.sha256(f"audit:{seed}:{attempt}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64 < share


def observation_text(turns: list[dict] | None, limit: int) -> str:
    """What executing the attempt printed, every turn's observation in order, cut in the middle
    to `limit` characters (the head and tail are what a reader looks at)."""
    parts = [t.get("observation") or "" for t in turns or []]
    text = "\n".join(p for p in parts if p)
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def queue_rows(rows: list[dict], run_id: str, review: ReviewSettings, seed: int) -> list[dict]:
    """The review_queue rows of one iteration's trajectories rows."""
    now = dt.datetime.now(dt.timezone.utc)
    out = []
    for r in rows:
        aid = attempt_id(r["group_id"], r["sample_index"])
        if r.get("reward_source") == "review_pending":
            reason = "unverified"
        elif r.get("verdict") in ("pass", "fail") and audited(aid, seed, review.audit_share):
            reason = "audit"
        else:
            continue
        out.append({
            "run_id": run_id, "iteration": r["iteration"], "attempt_id": aid,
            "domain": r["domain"], "task_id": r["task_id"], "group_id": r["group_id"],
            "sample_index": r["sample_index"], "reason": reason, "prompt": r["prompt"],
            "response": r["response"], "response_digest": response_digest(r["response"]),
            "observation": observation_text(r.get("turns"), review.observation_chars),
            "verifier_reward": r["reward_raw"] if reason == "audit" else None,
            "verdict": r["verdict"] if reason == "audit" else None, "created_at": now})
    return out


def write_queue(layout: RunLayout, run_id: str, iteration: int, review: ReviewSettings,
                seed: int) -> dict:
    """Queue iteration `iteration`'s attempts for review (one file, written whole); counts."""
    wanted = ds.field("reward_source") == "review_pending"
    if review.audit_share > 0:
        wanted = wanted | ds.field("verdict").isin(["pass", "fail"])
    table = layout.read_table("trajectories", columns=QUEUE_COLUMNS,
                              filter=(ds.field("iteration") == iteration) & wanted)
    rows = queue_rows(table.to_pylist(), run_id, review, seed)
    if rows:
        write_rows(storage.join(layout.table_dir("review_queue", iteration), "queue.parquet"),
                   "review_queue", rows)
    return {"unverified": sum(r["reason"] == "unverified" for r in rows),
            "audit": sum(r["reason"] == "audit" for r in rows)}
