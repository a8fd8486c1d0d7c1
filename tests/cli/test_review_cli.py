"""`flywheel review serve` and `flywheel review stats`, run as a user runs them."""

import json
import subprocess
import sys
import urllib.request
from datetime import datetime, timezone

import pytest

from flywheel.cli.main import main
from flywheel.feedback.review_page import login_name
from flywheel.feedback.review_reviewers import read_registry, token_digest
from flywheel.schemas.write import write_partitioned

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def queue_row(attempt, iteration, reason, reward=None, domain="add"):
    return {"run_id": "r", "iteration": iteration, "attempt_id": attempt, "domain": domain,
            "task_id": "t", "group_id": attempt.split("/")[0], "sample_index": 0, "reason": reason,
            "prompt": "p", "response": "r", "response_digest": f"d-{attempt}", "observation": "",
            "verifier_reward": reward, "verdict": None, "created_at": T0}


def review(attempt, reviewer, score, iteration):
    return {"run_id": "r", "iteration": iteration, "review_id": f"{attempt}-{reviewer}",
            "attempt_id": attempt, "domain": "add", "task_id": "t", "group_id": attempt.split("/")[0],
            "sample_index": 0, "response_digest": f"d-{attempt}", "reviewer": reviewer,
            "score": score, "label": "", "comment": "", "created_at": T0}


@pytest.fixture
def run_dir(tmp_path):
    run = str(tmp_path / "run")
    write_partitioned(run, "review_queue", [
        queue_row("a/0", 0, "audit", reward=1.0), queue_row("b/0", 0, "unverified"),
        queue_row("c/0", 1, "audit", reward=0.0, domain="[red]sql")], prefix="queue")
    write_partitioned(run, "reviews", [
        review("a/0", "ann", 0.0, 0), review("a/0", "bob", 1.0, 0), review("c/0", "ann", 0.0, 1)],
        prefix="review")
    return run


def test_stats_as_json(run_dir, capsys):
    assert main(["review", "stats", "--run-dir", run_dir, "--format", "json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["counts"] == [{"iteration": 0, "queued": 2, "audit": 1, "labeled": 1, "pending": 1},
                               {"iteration": 1, "queued": 1, "audit": 1, "labeled": 1, "pending": 0}]
    assert stats["agreement"]["pairs"] == 1 and stats["agreement"]["agree"] == 0.0
    assert stats["audit"]["labels"] == 3 and stats["audit"]["disagree"] == pytest.approx(1 / 3)


def test_stats_as_tables(run_dir, capsys):
    assert main(["review", "stats", "--run-dir", run_dir]) == 0
    out = capsys.readouterr().out
    assert "review queue" in out and "agreement" in out and "people vs the verifier" in out
    assert "[red]sql" in out  # a domain's name is text, not rich markup
    assert "ann / bob" in out and "33.3%" in out


def test_serve_prints_its_url_and_answers_with_the_token(run_dir, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("t0ken-for-tests\n")
    proc = subprocess.Popen([sys.executable, "-m", "flywheel.cli.main", "review", "serve",
                             "--run-dir", run_dir, "--port", "0", "--token-file", str(token_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("review page at http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[3]
        assert url.endswith("/?token=t0ken-for-tests")
        request = urllib.request.Request(url.split("/?")[0] + "/api/queue",
                                         headers={"Authorization": "Bearer t0ken-for-tests"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            answer = json.load(reply)
        assert answer["reviewer"] == login_name() and line.rstrip().endswith(f"reviewer {login_name()})")
        assert answer["counts"]["total"] == 3
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("extra, token, message", [
    (["--host", "0.0.0.0"], None, "without a token"),
    ([], "", "is empty"),
    ([], "has space", "spaces"),
])
def test_serve_refuses_with_one_line_and_status_2(run_dir, tmp_path, capsys, extra, token, message):
    if token is not None:
        (tmp_path / "token").write_text(token)
        extra = [*extra, "--token-file", str(tmp_path / "token")]
    assert main(["review", "serve", "--run-dir", run_dir, "--port", "0", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_add_reviewer_prints_the_token_once_and_keeps_its_digest(run_dir, capsys):
    assert main(["review", "add-reviewer", "--run-dir", run_dir, "ann", "--port", "9000"]) == 0
    out = capsys.readouterr().out
    token = out.split("shown only now: ")[1].split()[0]
    assert f"http://127.0.0.1:9000/?token={token}" in out
    assert read_registry(run_dir) == {"ann": token_digest(token)}
    assert main(["review", "add-reviewer", "--run-dir", run_dir, "a b"]) == 2
    assert "reviewer's name" in capsys.readouterr().err
