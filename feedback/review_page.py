"""The human review page: people label the attempts a run queued for them (`review_queue`).

    flywheel review add-reviewer --run-dir runs/r ann    # ann's token and link (review_reviewers.py)
    flywheel review serve --run-dir runs/r [--host 127.0.0.1 --port 8810 --token-file T]

GET / is the page (feedback/review_page_html.py); its reviewer's token comes once as `?token=`.
The API takes the token as a bearer header, and the token says who the reviewer is:

    GET  /api/queue                {"run_id", "reviewer", "rows": [...], "counts": {pending, labeled, total}}
    POST /api/review               {attempt_id, score, label, comment} -> the stored label

A label records the reviewer of the token that sent it; a `reviewer` named in a request must be
that one (403 otherwise): a typed name cannot speak for another. Rows come pending first (not
labeled by this reviewer), newest iteration first. The audit is blind: a row's verifier_reward
and verdict are sent only to a reviewer who has labeled it, and nowhere else (the statistics are
`flywheel review stats`, for whoever can read the run). A label is one new `reviews` row
(`<run>/tables/reviews/iteration=K/review-*.parquet`); a relabel is another row, and the newest
per (attempt, reviewer) counts. Every request passes the sandbox service's gate from its headers
alone: where it comes from (web/same_origin.py: a Host this page answers to, no foreign
Origin or cross-site fetch), the token (401 on every path, known or not), then its framing and
size (web/service_limits.py), its endpoint (404, 405) and a JSON body type (415). Without
registered reviewers or --token-file, the person running it is the one reviewer, with a token
made for the session, and only a loopback address is allowed.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import json
import logging
import math
import re
import secrets
import threading
import uuid
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit

import pyarrow.fs as pafs

from flywheel.feedback import review_page_html, review_stats
from flywheel.feedback.review_reviewers import Reviewers
from flywheel.web.gated_http import CappedServer, GatedHandler
from flywheel.web.service_limits import Refused, ServiceLimits
from flywheel.web.service_token import check_exposure, is_loopback
from flywheel.schemas import read_table, resolve_uri
from flywheel.schemas.write import write_partitioned

ENDPOINTS = {"/": "GET", "/api/queue": "GET", "/api/review": "POST"}
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


def check_review(body: dict, reviewer: str) -> tuple[str, float, str, str]:
    """(attempt_id, score, label, comment) of a POST /api/review body sent by `reviewer`'s
    token; ValueError why not, PermissionError when the body names another reviewer."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    attempt, score = body.get("attempt_id"), body.get("score")
    label, comment = body.get("label") or "", body.get("comment") or ""
    if not isinstance(attempt, str) or not attempt:
        raise ValueError("attempt_id must be a non-empty string")
    check_as(body.get("reviewer"), reviewer)
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
            or not 0 <= score <= 1:
        raise ValueError(f"score must be a number in [0, 1], not {json.dumps(score)[:40]}")
    if not isinstance(label, str) or len(label) > MAX_LABEL:
        raise ValueError(f"label must be a string of at most {MAX_LABEL} characters")
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT:
        raise ValueError(f"comment must be a string of at most {MAX_COMMENT} characters")
    return attempt, float(score), label, comment


def check_as(named, reviewer: str) -> None:
    """PermissionError when a request names a reviewer (`named`) other than its token's."""
    if named is not None and named != reviewer:
        raise PermissionError(f"this token is {reviewer}'s: a label is recorded as the token's "
                              f"reviewer, never as a name given ({str(named)[:MAX_REVIEWER]!r})")


def login_name() -> str:
    """The reviewer name of the person running the page (their login), as a reviewer name."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        name = ""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)[:64] or "reviewer"


class ReviewServer(CappedServer):
    """The page and its API over the run at `run_dir`. Reviewers are the run's registry
    (review_reviewers.py) and `reviewers` ({name: token}); with neither, the person running it
    (their login name) with a fresh token, on loopback only. `links` maps the reviewers whose
    token this server knows to their page's URL."""

    label = "review page"

    def __init__(self, run_dir: str, host: str = "127.0.0.1", port: int = 8810,
                 reviewers: dict[str, str] | None = None, limits: ServiceLimits = LIMITS,
                 allowed_hosts=()):
        self.reviewers = Reviewers(run_dir, reviewers)
        given = dict(reviewers or {})
        if not self.reviewers.refresh():  # nobody registered: the one running it, this session
            given = {login_name(): secrets.token_urlsafe(24)}
            try:
                check_exposure(host, None)
            except ValueError:
                raise ValueError(f"refusing to listen on {host!r} without a token: anyone who "
                                 "reaches it could read the run's attempts and label them; add "
                                 "reviewers (flywheel review add-reviewer), give --token-file, or "
                                 "bind 127.0.0.1") from None
            self.reviewers = Reviewers(run_dir, given)
        super().__init__(host, port, _Handler, limits, allowed_hosts)
        self.store = ReviewStore(run_dir)
        self.tokens = given

    @property
    def base_url(self) -> str:
        return super().url

    @property
    def links(self) -> dict[str, str]:
        return {name: f"{self.base_url}/?token={token}" for name, token in self.tokens.items()}

    @property
    def url(self) -> str:
        """The first known reviewer's link, or the page's address when none is known here."""
        return next(iter(self.links.values()), f"{self.base_url}/")


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
        self.reviewer = self._reviewer(self.route, self.query)
        if self.reviewer is None:
            raise Refused(401, "missing or wrong token", {"WWW-Authenticate": "Bearer"})

    def _reviewer(self, path: str, query: dict) -> str | None:
        """The reviewer of the bearer header's token, or on the page's own path of `?token=`
        (how a person opens it); None when neither names one."""
        authorization = self.headers.get_all("Authorization") or []
        if authorization:
            scheme, _, token = authorization[0].strip().partition(" ")
            ok = len(authorization) == 1 and scheme == "Bearer" and token.strip()
            return self.server.reviewers.who(token.strip()) if ok else None
        given = query.get("token", [])
        return self.server.reviewers.who(given[0]) if path == "/" and len(given) == 1 else None

    def do_GET(self):  # noqa: N802 (http.server's name; the gate let only known GETs through)
        store = self.server.store
        if self.route == "/":
            return self.reply(200, PAGE, {"Content-Security-Policy": CSP}, "text/html; charset=utf-8")
        try:
            check_as((self.query.get("reviewer") or [None])[0], self.reviewer)
        except PermissionError as e:
            return self.reply(403, {"error": str(e)})
        rows, counts = store.rows_for(self.reviewer)
        run_id = next((r["run_id"] for r in rows), None)
        self.reply(200, {"run_id": run_id, "reviewer": self.reviewer, "rows": rows, "counts": counts})

    def do_POST(self):  # noqa: N802 (only POST /api/review, its length checked)
        body = self.read_body()
        if body is None:  # the client left mid-body: nobody to answer
            return
        try:
            attempt, score, label, comment = check_review(json.loads(body), self.reviewer)
        except PermissionError as e:
            return self.reply(403, {"error": str(e)})
        except (ValueError, RecursionError) as e:  # bad JSON or UTF-8 are ValueErrors; "[[[..." recurses
            return self.reply(400, {"error": str(e)})
        queued = self.server.store.queue().get(attempt)
        if queued is None:
            return self.reply(404, {"error": f"attempt {attempt[:200]!r} is not in the review queue"})
        row = self.server.store.add(queued, self.reviewer, score, label, comment)
        self.reply(200, {"label": {k: row[k] for k in ("score", "label", "comment", "created_at")},
                          "review_id": row["review_id"], "reviewer": self.reviewer,
                          **{k: queued[k] for k in BLIND}})  # revealed to the one who labeled


def serve(run_dir: str, host: str = "127.0.0.1", port: int = 8810,
          reviewers: dict[str, str] | None = None, ready=print, allowed_hosts=()) -> None:
    """Serve until interrupted; `ready(line)` is told each known reviewer's link once listening
    (registered reviewers use the link add-reviewer printed)."""
    server = ReviewServer(run_dir, host, port, reviewers, allowed_hosts=allowed_hosts)
    where = "loopback only" if is_loopback(host) else f"on {host}: anyone with a token can label"
    for name, link in server.links.items():
        ready(f"review page at {link} ({where}; reviewer {name})")
    registered = server.reviewers.registered()
    if registered:
        ready(f"review page at {server.base_url}/ ({where}); registered reviewers "
              f"({', '.join(registered)}) open the link `flywheel review add-reviewer` printed them")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
