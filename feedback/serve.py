"""`flywheel serve`: a Flywheel policy behind the OpenAI chat-completions API, every interaction
recorded as table rows, so an application pointed at it feeds the next run.

    flywheel serve --model smollm2 --record-dir records/app            # then, in the app:
    OpenAI(base_url="http://127.0.0.1:8800/v1", api_key=TOKEN).chat.completions.create(...)

POST /v1/chat/completions (serve_api.py: what a request may hold), POST /v1/feedback, GET
/v1/models, GET /health. Each answer is one `interactions` row per choice, with the exact token
ids and log-probabilities the sampler produced and the digest of the weights that produced them;
feedback is a `feedback` row (serve_recorder.py writes both under the record dir).

Generation runs on the engine loop the rollout's episodes use (policy/batching_engine.py): the
policy's rollout engine (the hf sampler; vLLM with `--policy-options engine=vllm`:
policy/rollout_engine.py) behind ONE generation thread, the only one that touches the model. Each
request's handler thread encodes its messages and asks that loop for its rows; the loop samples
whatever rows are waiting at that moment (up to `max_batch`, one max_tokens per call), and with
vLLM a request joins the running engine at its next step instead of waiting for a batch to end.
At most `max_batch + max_queue` requests are admitted at once; beyond that, 503 with Retry-After
(the client's cue to back off). Rows are independent by contract: each choice samples with its own
seed, so an answer does not depend on what it was batched with.

The HTTP side is the sandbox service's (sandbox/service.py), built of its parts: a gate on
headers alone before a body byte is read (where it comes from: a Host this server answers to,
no foreign Origin or cross-site fetch, 400/403; token 401; framing 400/411; size 413; endpoint
404/405; a POST body declared JSON, 415), per-phase deadlines, a connection cap, no listening
beyond loopback without a token. A browser page elsewhere, or one that rebinds its own name to
127.0.0.1, can therefore neither read answers nor have a request recorded.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field

from flywheel.feedback.serve_api import (REFUSAL_CODES, ApiError, ApiLimits, ChatRequest,
                                          ServedPolicy, completion_body, error_body, models_body,
                                          parse_chat, parse_feedback, parse_json)
from flywheel.feedback.serve_recorder import RecorderClosed, TableRecorder
from flywheel.web.gated_http import CappedServer, GatedHandler
from flywheel.web.service_limits import Refused, ServiceLimits, refusal
from flywheel.web.service_token import bearer_matches, is_loopback
from flywheel.policy.batching_engine import BatchingEngine
from flywheel.policy.checkpoint import Checkpoint
from flywheel.policy.policy import Sample
from flywheel.policy.rollout_engine import create_engine

ENDPOINTS = {"/v1/chat/completions": "POST", "/v1/feedback": "POST", "/v1/models": "GET",
             "/health": "GET"}
SERVE_LIMITS = ServiceLimits(max_body=1 << 20, max_connections=64)
log = logging.getLogger(__name__)


@dataclass
class _Job:
    """One chat request on its way through the engine loop."""
    request: ChatRequest
    client: str
    interaction_id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    started: float = field(default_factory=time.monotonic)
    seed: int = 0
    prompt_ids: list[int] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    token_texts: list[list[str]] | None = None
    error: ApiError | None = None


class ChatServer(CappedServer):
    """The HTTP server, its engine loop and its recorder: `start()`, then `close()` (answer the
    admitted requests, write every buffered row, stop listening)."""

    label = "serve"
    over_cap = refusal(503, "Service Unavailable",  # in OpenAI's error shape, as every answer
                       error_body(503, "too many connections", "too_many_connections"))

    def __init__(self, served: ServedPolicy, recorder: TableRecorder, host: str = "127.0.0.1",
                 port: int = 0, tokens: dict[str, str] | None = None, max_batch: int = 8,
                 max_queue: int = 64, api: ApiLimits = ApiLimits(),
                 limits: ServiceLimits = SERVE_LIMITS, allowed_hosts=()):
        if not tokens and not is_loopback(host):
            raise ValueError(f"refusing to listen on {host!r} without a token: anyone who reaches "
                             "it could use the model; give --token-file or bind 127.0.0.1")
        if max_batch < 1 or max_queue < 1:
            raise ValueError("max_batch and max_queue must be >= 1")
        self.issued = recorder.known_interactions()  # id -> client: feedback names its own
        super().__init__(host, port, _Handler, limits, allowed_hosts)
        self.served, self.recorder, self.tokens = served, recorder, dict(tokens or {})
        self.max_batch, self.max_queue, self.api = max_batch, max_queue, api
        self.policy_lock = threading.Lock()  # held while the policy samples: others wait on it
        self.engine = create_engine(served.policy.engine)  # the rollout's sampler of this policy
        self.engine.update_weights(Checkpoint(served.policy, None, {}, served.digest))
        self.batcher = BatchingEngine(self.engine, self.policy_lock, max_batch=max_batch)
        self.draining = False
        self.admitted = 0  # requests admitted and not yet answered
        self._lock = threading.Condition()
        self._serving: threading.Thread | None = None

    @property
    def generating(self) -> int:
        """Rows in the engine call now."""
        return self.batcher.running

    @property
    def batches(self) -> int:
        """Engine calls so far."""
        return self.batcher.calls

    @property
    def queued(self) -> int:
        """Rows waiting for an engine call."""
        return self.batcher.pending

    def start(self) -> ChatServer:
        self._serving = threading.Thread(target=self.serve_forever, name="serve-http", daemon=True)
        self._serving.start()
        return self

    def close(self) -> None:
        """Refuse new requests (503), answer the admitted ones, flush the recorder, stop."""
        with self._lock:
            if self.draining:
                return
            self.draining = True  # under the lock: nothing is admitted after this
            while self.admitted:
                self._lock.wait()
        try:
            self.recorder.close()
        finally:
            self.batcher.close()
            self.engine.close()
            if self._serving is not None:
                self.shutdown()
            self.server_close()

    def client_of(self, authorization: list[str]) -> str | None:
        """The name of the token the request carries; "anonymous" without tokens; None: refused."""
        if not self.tokens:
            return "anonymous"
        found = [name for name, token in self.tokens.items() if bearer_matches(token, authorization)]
        return found[0] if found else None

    def submit(self, request: ChatRequest, client: str) -> _Job:
        """The finished job (samples or error), sampled by the engine loop on the caller's thread."""
        job = _Job(request, client)
        job.seed = secrets.randbelow(1 << 62) if request.seed is None else request.seed
        with self._lock:
            if self.draining:
                raise ApiError(503, "the server is stopping", "draining")
            if self.recorder.full():  # writes failing: no answer that could not be recorded
                raise ApiError(503, "the recorder is behind on writing its tables; retry later",
                               "recorder_behind")
            if self.admitted >= self.max_batch + self.max_queue:
                raise ApiError(503, f"{self.max_queue} requests are already waiting; retry later",
                               "queue_full")
            self.admitted += 1
        try:
            self._run(job)
        except Exception as e:  # the policy's own defect: this client hears of it
            log.exception("serve: sampling failed")
            job.error = job.error or ApiError(500, f"sampling failed: {type(e).__name__}: {e}",
                                              "sampling_failed")
        finally:
            with self._lock:
                self.admitted -= 1
                self._lock.notify_all()
        return job

    def _run(self, job: _Job) -> None:
        policy, request = self.served.policy, job.request
        try:
            job.prompt_ids = list(policy.encode_messages(request.messages, request.tools))
        except Exception as e:  # a template that refuses these messages (roles, order)
            job.error = ApiError(400, f"the messages do not fit the model's chat template: "
                                 f"{type(e).__name__}: {e}"[:500], "invalid_messages")
            return
        if len(job.prompt_ids) >= policy.context:
            job.error = ApiError(400, f"the prompt is {len(job.prompt_ids)} tokens: the model's "
                                 f"context holds {policy.context}", "context_length_exceeded")
            return
        # choice i samples with seed + i, recorded in its row
        job.samples = self.batcher.sample([job.prompt_ids] * request.n, [request.temperature] * request.n,
                                          [job.seed + i for i in range(request.n)], request.max_tokens)
        job.texts = [policy.decode(s.token_ids) for s in job.samples]
        if request.logprobs:
            job.token_texts = [[policy.decode([t]) for t in s.token_ids] for s in job.samples]
        self._record(job)

    def _record(self, job: _Job) -> None:
        request, latency_ms = job.request, (time.monotonic() - job.started) * 1000
        for i, (sample, text) in enumerate(zip(job.samples, job.texts)):
            self.recorder.add("interactions", {
                "interaction_id": job.interaction_id, "choice_index": i,
                "day": f"{job.created_at:%Y-%m-%d}",
                "created_at": job.created_at, "model": self.served.name,
                "checkpoint_digest": self.served.digest, "client": job.client,
                "messages": json.dumps(request.messages), "prompt": request.prompt,
                "tools": None if request.tools is None else json.dumps(request.tools),
                "prompt_token_ids": job.prompt_ids, "response": text,
                "response_token_ids": sample.token_ids, "response_logprobs": sample.logprobs,
                "finish_reason": sample.finish_reason, "sampling_temperature": request.temperature,
                "max_tokens": request.max_tokens, "seed": job.seed + i, "latency_ms": latency_ms})
        self.issued[job.interaction_id] = job.client


class _Handler(GatedHandler):
    endpoints = ENDPOINTS
    server: ChatServer

    def authorize(self) -> None:
        self.client = self.server.client_of(self.headers.get_all("Authorization") or [])
        if self.client is None:
            raise Refused(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    def refusal_body(self, refused: Refused) -> dict:
        return error_body(refused.status, refused.message, REFUSAL_CODES.get(refused.status, "refused"))

    def do_GET(self):  # noqa: N802 (the gate let only GET /health and /v1/models through)
        server, created = self.server, int(time.time())
        if self.route == "/v1/models":
            return self.reply(200, models_body(server.served.name, created))
        self.reply(200, {"status": "draining" if server.draining else "ok",
                          "model": server.served.name, "checkpoint_digest": server.served.digest,
                          "queued": server.queued, "generating": server.generating,
                          "batches": server.batches, "connections": server.connections})

    def do_POST(self):  # noqa: N802 (a POST endpoint, its length checked)
        body = self.read_body()
        if body is None:  # the client closed mid-body: nobody to answer
            return
        try:
            data = parse_json(body)
            status, answer = (self._chat if self.route == "/v1/chat/completions" else self._feedback)(data)
        except ApiError as e:
            return self.reply(e.status, e.body(), e.headers)
        except Exception as e:  # a defect of ours: still an answer in the client's terms
            log.exception("serve: %s failed", self.route)
            return self.reply(500, error_body(500, f"{type(e).__name__}: {e}", "server_error"))
        self.reply(status, answer)

    def _chat(self, data: dict) -> tuple[int, dict]:
        server = self.server
        job = server.submit(parse_chat(data, server.api), self.client)
        if job.error:
            raise job.error
        return 200, completion_body(job.interaction_id, int(job.created_at.timestamp()),
                                    server.served.name, job.samples, job.texts,
                                    len(job.prompt_ids), job.token_texts)

    def _feedback(self, data: dict) -> tuple[int, dict]:
        server = self.server
        feedback = parse_feedback(data, server.api)
        if server.issued.get(feedback["interaction_id"]) != self.client:  # or another's: unseen
            raise ApiError(404, f"no interaction {feedback['interaction_id'][:80]!r} was recorded "
                           "here", "unknown_interaction")
        now, feedback_id = dt.datetime.now(dt.timezone.utc), f"fb-{uuid.uuid4().hex}"
        try:
            server.recorder.add("feedback", {"feedback_id": feedback_id, "day": f"{now:%Y-%m-%d}",
                                             "created_at": now, "client": self.client, **feedback})
        except RecorderClosed as e:
            raise ApiError(503, str(e), "draining") from None
        return 200, {"feedback_id": feedback_id, "object": "feedback"}
