"""The review page: its API over a real run folder, reviewers told apart by their own tokens,
and the page itself in headless Chromium.

The browser test drives Chromium through the DevTools protocol (tests/pipelines/chromium.py): real mouse
events at the buttons' boxes, real text input, then the labels are read back from Parquet. Set
FLYWHEEL_REVIEW_SCREENSHOT=path.png to keep a screenshot of the page after labeling.
"""

import base64
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from flywheel.feedback.review_page import ReviewServer
from flywheel.feedback.review_reviewers import REGISTRY, add_reviewer
from flywheel.schemas import read_table
from flywheel.schemas.write import write_partitioned
from tests.http_call import http_call

HOSTILE = ('<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
           '</pre><b>bold?</b> & "quotes"')


def queue_row(iteration, group, index, reason="unverified", response="def f(): return 1",
              reward=None, verdict=None, domain="add"):
    return {"run_id": "run-1", "iteration": iteration, "attempt_id": f"{group}/{index}",
            "domain": domain, "task_id": f"task-{group}", "group_id": group, "sample_index": index,
            "reason": reason, "prompt": f"Write f for {group}", "response": response,
            "response_digest": f"digest-{group}-{index}", "observation": "ok\n",
            "verifier_reward": reward, "verdict": verdict,
            "created_at": datetime(2026, 1, 1, tzinfo=timezone.utc)}


@pytest.fixture
def run_dir(tmp_path):
    run = str(tmp_path / "run")
    write_partitioned(run, "review_queue", [queue_row(0, "g0", 0), queue_row(0, "g0", 1)], prefix="queue")
    write_partitioned(run, "review_queue", [
        queue_row(1, "g1", 0, response=HOSTILE),
        queue_row(1, "g1", 1, reason="audit", reward=0.75, verdict="pass", domain="sql")], prefix="queue")
    return run


@pytest.fixture
def server(run_dir):
    server = ReviewServer(run_dir, port=0, reviewers={"ann": "secret-token", "bob": "bob-token"})
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def call(server, path, body=None, token="secret-token", method=None):
    """(status, JSON reply; the page's HTML for `/`) of one request to `server`."""
    status, _, raw = http_call(server.base_url + path, body, token, method)
    if status >= 400:
        return status, json.loads(raw or b"{}")
    return status, json.loads(raw) if path != "/" and "/?" not in path else raw.decode()


def stored_reviews(run_dir):
    return read_table(run_dir + "/tables/reviews", "reviews").to_pylist()


def test_every_path_needs_the_token(server):
    for path in ("/", "/api/queue", "/api/stats", "/nothing-here", "/?token=wrong"):
        assert call(server, path, token=None)[0] == 401, path
        assert call(server, path, token="wrong")[0] == 401, path
    assert call(server, "/api/review", {"attempt_id": "g0/0"}, token=None)[0] == 401
    status, page = call(server, "/?token=secret-token", token=None)
    assert status == 200 and "<script>" in page
    assert call(server, "/api/queue?token=secret-token", token=None)[0] == 401  # the API: header only
    assert call(server, "/nothing-here")[0] == 404 and call(server, "/api/queue", {})[0] == 405
    assert call(server, "/api/stats")[0] == 404  # the audit's figures: `review stats`, not the page


def test_a_non_loopback_bind_needs_a_token(run_dir):
    with pytest.raises(ValueError, match="without a token"):
        ReviewServer(run_dir, host="0.0.0.0", port=0)
    with pytest.raises(ValueError, match="empty"):
        ReviewServer(run_dir, port=0, reviewers={"ann": "  "})


def test_the_queue_is_pending_first_newest_first_and_the_audit_blind(server):
    status, reply = call(server, "/api/queue")
    assert status == 200 and reply["reviewer"] == "ann" and reply["counts"] == {"pending": 4, "labeled": 0, "total": 4}
    assert [r["attempt_id"] for r in reply["rows"]] == ["g1/0", "g1/1", "g0/0", "g0/1"]
    audit = reply["rows"][1]
    assert audit["reason"] == "audit" and "verifier_reward" not in audit and "verdict" not in audit
    assert reply["rows"][0]["response"] == HOSTILE  # JSON carries the text; the page shows it as text


def test_a_label_is_validated_stored_and_read_back(server, run_dir):
    bad = [({"attempt_id": "g1/1", "score": 1.5}, 400),
           ({"attempt_id": "g1/1", "score": "1"}, 400),
           ({"attempt_id": "g1/1", "score": True}, 400),
           ({"attempt_id": "g1/1", "score": 1, "comment": "c" * 10_001}, 400),
           ({"attempt_id": "nope/9", "score": 1}, 404)]
    for body, expected in bad:
        assert call(server, "/api/review", body)[0] == expected, body
    assert call(server, "/api/review", b"{not json")[0] == 400
    assert call(server, "/api/review", b"[" * 200_000)[0] == 400
    assert call(server, "/api/review", b"x" * (300 << 10))[0] == 413
    assert stored_reviews(run_dir) == []

    status, reply = call(server, "/api/review", {"attempt_id": "g1/1", "score": 0, "reviewer": "ann",
                                                 "label": "hack", "comment": "prints the answer"})
    assert status == 200 and reply["verifier_reward"] == 0.75 and reply["label"]["score"] == 0.0
    call(server, "/api/review", {"attempt_id": "g1/1", "score": 0.25})  # relabel
    [first, second] = sorted(stored_reviews(run_dir), key=lambda r: r["created_at"])
    assert (first["iteration"], first["domain"], first["task_id"], first["group_id"],
            first["sample_index"], first["response_digest"], first["run_id"]) == (
        1, "sql", "task-g1", "g1", 1, "digest-g1-1", "run-1")
    assert (first["reviewer"], first["score"], first["label"], first["comment"]) == (
        "ann", 0.0, "hack", "prints the answer")
    assert second["score"] == 0.25 and first["review_id"] != second["review_id"]
    files = list(Path(run_dir, "tables", "reviews", "iteration=1").glob("review-*.parquet"))
    assert len(files) == 2

    _, queue = call(server, "/api/queue")
    assert queue["counts"] == {"pending": 3, "labeled": 1, "total": 4}
    done = queue["rows"][-1]
    assert done["attempt_id"] == "g1/1" and done["label"]["score"] == 0.25
    assert done["verifier_reward"] == 0.75  # seen once labeled


def test_two_reviewers_each_see_only_their_own_reveals_and_no_name_speaks_for_another(server, run_dir):
    """Labels carry the token's reviewer; a name in the request cannot change it; the verifier's
    reward is revealed to ann after ann's label, and still hidden from bob."""
    assert call(server, "/api/review", {"attempt_id": "g1/1", "score": 1})[0] == 200  # ann's token
    impersonations = [call(server, "/api/review", {"attempt_id": "g1/0", "score": 0, "reviewer": "bob"}),
                      call(server, "/api/review", {"attempt_id": "g1/0", "score": 0, "reviewer": 5}),
                      call(server, "/api/queue?reviewer=bob")]
    assert [status for status, _ in impersonations] == [403, 403, 403]
    _, ann = call(server, "/api/queue")
    _, bob = call(server, "/api/queue", token="bob-token")
    assert (ann["reviewer"], bob["reviewer"]) == ("ann", "bob")
    ann_audit, bob_audit = ([r for r in q["rows"] if r["attempt_id"] == "g1/1"][0] for q in (ann, bob))
    assert ann_audit["verifier_reward"] == 0.75 and ann_audit["label"]["score"] == 1.0
    assert "verifier_reward" not in bob_audit and "verdict" not in bob_audit and bob_audit["label"] is None
    assert "0.75" not in json.dumps(bob)
    status, reply = call(server, "/api/review", {"attempt_id": "g1/1", "score": 0}, token="bob-token")
    assert status == 200 and reply["reviewer"] == "bob" and reply["verifier_reward"] == 0.75
    assert sorted((r["reviewer"], r["score"]) for r in stored_reviews(run_dir)) == [("ann", 1.0), ("bob", 0.0)]


def test_registered_reviewers_label_as_themselves_and_a_new_token_voids_the_old(run_dir):
    ann, _ = add_reviewer(run_dir, "ann")
    carl, _ = add_reviewer(run_dir, "carl")
    registry = Path(run_dir, REGISTRY)
    assert ann not in registry.read_text() and registry.stat().st_mode & 0o077 == 0  # digests only
    server = ReviewServer(run_dir, port=0)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        assert server.links == {} and server.url == server.base_url + "/"
        assert call(server, "/api/review", {"attempt_id": "g0/0", "score": 1}, token=carl)[0] == 200
        new_ann, replaced = add_reviewer(run_dir, "ann")  # while serving: read at the next request
        assert replaced and call(server, "/api/queue", token=ann)[0] == 401
        assert call(server, "/api/queue", token=new_ann)[1]["reviewer"] == "ann"
        dave, _ = add_reviewer(run_dir, "dave")
        assert call(server, "/api/queue", token=dave)[1]["reviewer"] == "dave"
    finally:
        server.shutdown()
        server.server_close()
    assert [(r["reviewer"], r["attempt_id"]) for r in stored_reviews(run_dir)] == [("carl", "g0/0")]
    with pytest.raises(ValueError, match="reviewer's name"):
        add_reviewer(run_dir, "not a name")


# --- the page in headless Chromium ---------------------------------------------------------------

def test_a_person_labels_three_attempts_in_the_browser(server, run_dir, browser):
    browser.call("Page.enable")
    browser.call("Page.navigate", url=server.url)
    browser.wait_for("document.body && document.body.dataset.loaded === 'true'")
    assert browser.eval("location.search") == ""  # the token left the address bar
    assert browser.eval("document.querySelectorAll('article.attempt').length") == 4

    # hostile text is text: no new script or image, nothing ran, and the markup reads as typed
    assert browser.eval("document.querySelectorAll('script').length") == 1
    assert browser.eval("document.images.length") == 0
    assert browser.eval("typeof window.pwned") == "undefined"
    assert browser.eval("document.querySelector('article pre.response').textContent") == HOSTILE
    assert "<script>window.pwned = 1</script>" in browser.eval("document.body.innerText")
    # the blind audit: the verifier's reward is nowhere on the page before a label
    assert "0.75" not in browser.eval("document.body.innerText")

    assert browser.eval("document.getElementById('reviewer').textContent") == "ann"  # the token's
    browser.click('article[data-attempt-id="g1/0"] button.pass')
    browser.wait_for("document.querySelector('article.labeled')?.dataset.attemptId === 'g1/0'")
    assert browser.eval("document.activeElement.closest('article').dataset.attemptId") == "g1/1"
    browser.click('article[data-attempt-id="g1/1"] button.fail')
    browser.type('article[data-attempt-id="g0/0"] input.score', "0.7")
    browser.type('article[data-attempt-id="g0/0"] input.label', "partly")
    browser.click('article[data-attempt-id="g0/0"] button.submit')
    browser.wait_for("document.querySelectorAll('article.attempt.labeled').length === 3")
    assert browser.eval("document.getElementById('counts').textContent") == \
        "pending 1 / labeled by you 3 / total 4"
    audit = browser.eval("document.querySelector('article[data-attempt-id=\"g1/1\"]').innerText")
    assert "score 0 (fail)" in audit and "verifier: reward 0.75" in audit
    assert browser.eval("document.querySelectorAll('input#reviewer').length") == 0  # no name to type

    if os.environ.get("FLYWHEEL_REVIEW_SCREENSHOT"):
        browser.eval("window.scrollTo(0, 0)")
        shot = browser.call("Page.captureScreenshot", format="png")
        with open(os.environ["FLYWHEEL_REVIEW_SCREENSHOT"], "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    labels = {r["attempt_id"]: (r["reviewer"], r["score"], r["label"]) for r in stored_reviews(run_dir)}
    assert labels == {"g1/0": ("ann", 1.0, ""), "g1/1": ("ann", 0.0, ""), "g0/0": ("ann", 0.7, "partly")}
    assert browser.eval("typeof window.pwned") == "undefined"
