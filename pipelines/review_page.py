"""The human review page: people label the attempts a run queued for them (`review_queue`).

    flywheel review serve --run-dir runs/r [--host 127.0.0.1 --port 8810 --token-file T]

GET / is the page (pipelines/review_page_html.py); its token comes once as `?token=`. The API
takes the token as a bearer header:

    GET  /api/queue?reviewer=NAME  {"run_id", "rows": [...], "counts": {pending, labeled, total}}
    POST /api/review               {attempt_id, reviewer, score, label, comment} -> the stored label
    GET  /api/stats                pipelines/review_stats.py's summary

Rows come pending first (not labeled by NAME), newest iteration first. The audit is blind: a
row's verifier_reward and verdict are sent only once NAME has labeled it. A label is one new
`reviews` row (`<run>/tables/reviews/iteration=K/review-*.parquet`); a relabel is another row,
and the newest per (attempt, reviewer) counts. Every request passes the sandbox service's gate
from its headers alone: the token (401 on every path, known or not), then its framing and size
(sandbox/service_limits.py), then its endpoint (404, 405). Without --token-file a random token is
made, and only a loopback address is allowed (sandbox/service_token.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import math
import secrets
import threading
import uuid
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit

import pyarrow.fs as pafs

from flywheel.pipelines import review_page_html, review_stats
from flywheel.sandbox.gated_http import CappedServer, GatedHandler
from flywheel.sandbox.service_limits import Refused, ServiceLimits
from flywheel.sandbox.service_token import bearer_matches, check_exposure, check_token, is_loopback
from flywheel.schemas import read_table, resolve_uri
from flywheel.schemas.write import write_partitioned

ENDPOINTS = {"/": "GET", "/api/queue": "GET", "/api/review": "POST", "/api/stats": "GET"}
LIMITS = ServiceLimits(max_body=256 << 10, max_connections=32)  # a label is a few KiB
MAX_REVIEWER, MAX_LABEL, MAX_COMMENT = 100, 200, 10_000
COPIED = ("run_id", "iteration", "attempt_id", "domain", "task_id", "group_id", "sample_index",
          "response_digest")  # from the queue row onto its label
BLIND = ("verifier_reward", "verdict")  # shown only after the reviewer's own label
log = logging.getLogger(__name__)


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


PAGE = review_page_html.page().encode()
# Only the page's own script and style run; a response's markup could do nothing even if it got in.
CSP = (f"default-src 'none'; script-src {_digest(review_page_html.SCRIPT)}; "
       f"style-src {_digest(review_page_html.STYLE)}; connect-src 'self'; img-src data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class ReviewStore:
    """The run's queue and labels, re-read when their files change; labels written here are
    added without re-reading (a table of thousands of one-row files stays cheap)."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir.rstrip("/")
        self.lock = threading.Lock()
        self._queue_files: frozenset | None = None
        self._queue: dict[str, dict] = {}
        self._review_files: set | None = None
        self._reviews: list[dict] = []

    def _files(self, table: str) -> dict[str, int]:
        fs, path = resolve_uri(f"{self.run_dir}/tables/{table}")
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        return {i.path: i.size for i in infos if i.type == pafs.FileType.File and i.path.endswith(".parquet")}

    def queue(self) -> dict[str, dict]:
        """attempt_id -> queue row (of an attempt queued twice, its newest iteration's)."""
        with self.lock:
            files = frozenset(self._files("review_queue").items())
            if files != self._queue_files:
                rows = read_table(f"{self.run_dir}/tables/review_queue", "review_queue").to_pylist()
                rows.sort(key=lambda r: (r["iteration"], r["created_at"] or review_stats.EPOCH))
                self._queue, self._queue_files = {r["attempt_id"]: r for r in rows}, files
            return self._queue

    def reviews(self) -> list[dict]:
        with self.lock:
            files = set(self._files("reviews"))
            if files != self._review_files:
                self._reviews = read_table(f"{self.run_dir}/tables/reviews", "reviews").to_pylist()
                self._review_files = files
            return list(self._reviews)

    def add(self, queued: dict, reviewer: str, score: float, label: str, comment: str) -> dict:
        row = {**{c: queued[c] for c in COPIED}, "review_id": uuid.uuid4().hex, "reviewer": reviewer,
               "score": float(score), "label": label, "comment": comment,
               "created_at": datetime.now(timezone.utc)}
        self.reviews()  # fold in anyone else's files first, so that ours is all that is new
        with self.lock:
            [uri] = write_partitioned(self.run_dir, "reviews", [row], prefix="review")
            self._review_files.add(resolve_uri(uri)[1])
            self._reviews.append(row)
        return row

    def rows_for(self, reviewer: str) -> tuple[list[dict], dict]:
        """The queue as `reviewer` sees it, and its counts."""
        queue = self.queue()
        mine = {r["attempt_id"]: r for r in review_stats.latest_labels(
            r for r in self.reviews() if r["reviewer"] == reviewer)}
        rows = []
        for q in queue.values():
            label = mine.get(q["attempt_id"])
            label = label if label and label["response_digest"] == q["response_digest"] else None
            row = {k: v for k, v in q.items() if label or k not in BLIND}
            row["label"] = label and {k: label[k] for k in ("score", "label", "comment", "created_at")}
            rows.append(row)
        rows.sort(key=lambda r: (r["label"] is not None, -r["iteration"], r["group_id"] or "",
                                 r["sample_index"] or 0, r["attempt_id"]))
        labeled = sum(r["label"] is not None for r in rows)
        return rows, {"pending": len(rows) - labeled, "labeled": labeled, "total": len(rows)}


def check_review(body: dict) -> tuple[str, str, float, str, str]:
    """(attempt_id, reviewer, score, label, comment) of a POST /api/review body; ValueError why not."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    attempt, reviewer, score = body.get("attempt_id"), body.get("reviewer"), body.get("score")
    label, comment = body.get("label") or "", body.get("comment") or ""
    if not isinstance(attempt, str) or not attempt:
        raise ValueError("attempt_id must be a non-empty string")
    if not isinstance(reviewer, str) or not reviewer.strip() or len(reviewer.strip()) > MAX_REVIEWER:
        raise ValueError(f"reviewer must be a non-empty name of at most {MAX_REVIEWER} characters")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
            or not 0 <= score <= 1:
        raise ValueError(f"score must be a number in [0, 1], not {json.dumps(score)[:40]}")
    if not isinstance(label, str) or len(label) > MAX_LABEL:
        raise ValueError(f"label must be a string of at most {MAX_LABEL} characters")
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT:
        raise ValueError(f"comment must be a string of at most {MAX_COMMENT} characters")
    return attempt, reviewer.strip(), float(score), label, comment


class ReviewServer(CappedServer):
    """The page and its API over the run at `run_dir`; `url` carries the token."""

    label = "review page"

    def __init__(self, run_dir: str, host: str = "127.0.0.1", port: int = 8810,
                 token: str | None = None, limits: ServiceLimits = LIMITS):
        token = None if token is None else check_token(token)
        try:
            check_exposure(host, token)
        except ValueError:
            raise ValueError(f"refusing to listen on {host!r} without a token: anyone who reaches "
                             "it could read the run's attempts and label them; give --token-file "
                             "or bind 127.0.0.1") from None
        self.token = token or secrets.token_urlsafe(24)  # loopback without one: a fresh one
        super().__init__(host, port, _Handler, limits)
        self.store = ReviewStore(run_dir)

    @property
    def url(self) -> str:
        return f"{super().url}/?token={self.token}"


def _json(value):
    return value.isoformat() if isinstance(value, datetime) else str(value)


class _Handler(GatedHandler):
    endpoints = ENDPOINTS
    always_headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                      "Referrer-Policy": "no-referrer"}
    server: ReviewServer

    def json_default(self, value):
        return _json(value)

    def authorize(self) -> None:
        self.query = parse_qs(urlsplit(self.path).query)
        if not self._authorized(self.route, self.query):
            raise Refused(401, "missing or wrong token", {"WWW-Authenticate": "Bearer"})

    def _authorized(self, path: str, query: dict) -> bool:
        """The bearer header, or on the page's own path `?token=` (how a person opens it)."""
        if self.headers.get_all("Authorization"):
            return bearer_matches(self.server.token, self.headers.get_all("Authorization"))
        given = query.get("token", [])
        return path == "/" and len(given) == 1 and hmac.compare_digest(
            given[0].encode("utf-8", "replace"), self.server.token.encode())

    def do_GET(self):  # noqa: N802 (http.server's name; the gate let only known GETs through)
        store = self.server.store
        if self.route == "/":
            return self.reply(200, PAGE, {"Content-Security-Policy": CSP}, "text/html; charset=utf-8")
        if self.route == "/api/stats":
            return self.reply(200, review_stats.summary(store.queue().values(), store.reviews()))
        reviewer = (self.query.get("reviewer") or [""])[0].strip()
        if len(reviewer) > MAX_REVIEWER:
            return self.reply(400, {"error": f"reviewer over {MAX_REVIEWER} characters"})
        rows, counts = store.rows_for(reviewer)
        run_id = next((r["run_id"] for r in rows), None)
        self.reply(200, {"run_id": run_id, "reviewer": reviewer, "rows": rows, "counts": counts})

    def do_POST(self):  # noqa: N802 (only POST /api/review, its length checked)
        body = self.read_body()
        if body is None:  # the client left mid-body: nobody to answer
            return
        try:
            attempt, reviewer, score, label, comment = check_review(json.loads(body))
        except (ValueError, RecursionError) as e:  # bad JSON or UTF-8 are ValueErrors; "[[[..." recurses
            return self.reply(400, {"error": str(e)})
        queued = self.server.store.queue().get(attempt)
        if queued is None:
            return self.reply(404, {"error": f"attempt {attempt[:200]!r} is not in the review queue"})
        row = self.server.store.add(queued, reviewer, score, label, comment)
        self.reply(200, {"label": {k: row[k] for k in ("score", "label", "comment", "created_at")},
                          "review_id": row["review_id"],
                          **{k: queued[k] for k in BLIND}})


def serve(run_dir: str, host: str = "127.0.0.1", port: int = 8810, token: str | None = None,
          ready=print) -> None:
    """Serve until interrupted; `ready(line)` is told the URL (with its token) once listening."""
    server = ReviewServer(run_dir, host, port, token)
    where = "loopback only" if is_loopback(host) else f"on {host}: anyone with the token can label"
    ready(f"review page at {server.url} ({where})")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
