"""`flywheel serve` as a user runs it: a real process, named tokens recorded as `client`, SIGTERM
writing every buffered row, `flywheel sql` reading the tables, the refusals before any model
loads, a run's checkpoint served by digest, and docs/SERVE.md naming only real flags."""

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from flywheel.cli.main import main, parser
from flywheel.cli.serve import load_policy, read_tokens
from flywheel.web.service_token import default_token
from flywheel.schemas import read_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "SERVE.md"


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    """The issued token goes to a folder of the test's, never the user's ~/.config."""
    monkeypatch.setenv("FLYWHEEL_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def post(url, path, body, token):
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read())


@pytest.mark.slow  # a real `flywheel serve` process (2 s)
def test_serve_records_named_clients_and_flushes_on_sigterm(tmp_path, capsys):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("# who may call\nalice:tok-alice\nbob:tok-bob\n")
    record = tmp_path / "records" / "app"
    proc = subprocess.Popen([sys.executable, "-m", "flywheel.cli.main", "serve", "--policy", "tiny",
                             "--port", "0", "--record-dir", str(record), "--token-file", str(tokens)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving tiny at http://127.0.0.1:"), line + proc.stderr.read()
        base = re.search(r"at (http://\S+)/v1 ", line)[1]
        assert "alice, bob" in line and str(record) in line
        answer = post(base, "/v1/chat/completions", {"model": "tiny", "max_tokens": 5, "seed": 3,
                                                     "messages": [{"role": "user", "content": "1+1="}]},
                      "tok-alice")
        with pytest.raises(urllib.error.HTTPError) as other:  # bob cannot rate alice's answers
            post(base, "/v1/feedback", {"interaction_id": answer["id"], "label": "down"}, "tok-bob")
        assert other.value.code == 404
        post(base, "/v1/feedback", {"interaction_id": answer["id"], "label": "up"}, "tok-alice")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "recorded 1 interaction rows and 1 feedback rows" in out
    row = read_table(f"{record}/tables/interactions", "interactions").to_pylist()[0]
    assert (row["interaction_id"], row["client"], row["seed"], row["recorder_id"]) == (
        answer["id"], "alice", 3, "app")
    assert row["response"] == answer["choices"][0]["message"]["content"]

    capsys.readouterr()
    query = ("SELECT i.client, f.client AS rater, f.rating, i.model FROM interactions i "
             "JOIN feedback f USING (interaction_id)")
    assert main(["sql", query, "--run-dir", str(record), "--format", "json"]) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [
        {"client": "alice", "rater": "alice", "rating": 1.0, "model": "tiny"}]


@pytest.mark.parametrize("flags, tokens, message", [
    (["--policy", "tiny", "--host", "0.0.0.0"], None, "without a token"),
    (["--policy", "tiny"], "", "is empty"),
    (["--policy", "tiny"], "a:1\nnot a pair\n", "name:token"),
    ([], None, "give --model"),
    (["--model", "tiny-llama", "--run-dir", "somewhere"], None, "not both"),
    (["--model", "tiny-llama", "--iteration", "2"], None, "give --run-dir too"),
    (["--policy", "tiny", "--no-token"], "x", "not both"),
    (["--policy", "tiny", "--allowed-host", "http://evil.example/"], None, "allowed-host"),
])
def test_serve_refuses_before_loading_a_model(tmp_path, capsys, config_dir, flags, tokens, message):
    if tokens is not None:
        (tmp_path / "t").write_text(tokens)
        flags = flags + ["--token-file", str(tmp_path / "t")]
    assert main(["serve", "--record-dir", str(tmp_path / "r"), "--port", "0", *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists() and not config_dir.exists()  # nor a token issued


@pytest.mark.slow  # a real `flywheel serve` process (2 s)
def test_serve_issues_its_own_token_once_and_the_openai_client_uses_it(tmp_path, config_dir):
    openai = pytest.importorskip("openai")
    record = tmp_path / "records"
    proc = subprocess.Popen([sys.executable, "-m", "flywheel.cli.main", "serve", "--policy", "tiny",
                             "--port", "0", "--record-dir", str(record)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, issued = proc.stdout.readline(), proc.stdout.readline()
        assert line.startswith("serving tiny at http://127.0.0.1:"), line + proc.stderr.read()
        base = re.search(r"at (http://\S+/v1) ", line)[1]
        token_file = config_dir / "serve-token"
        token = token_file.read_text().strip()
        assert str(token_file) in line and issued.rstrip().endswith(token)
        assert token_file.stat().st_mode & 0o777 == 0o600
        client = openai.OpenAI(base_url=base, api_key=token, max_retries=0)
        reply = client.chat.completions.create(model="tiny", max_tokens=3,
                                               messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=base, api_key="unused", max_retries=0).models.list()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    row = read_table(f"{record}/tables/interactions", "interactions").to_pylist()[0]
    assert (row["interaction_id"], row["client"]) == (reply.id, "default")


def test_the_issued_token_is_made_once_reused_and_refused_when_others_may_read_it(config_dir):
    path, token, made = default_token("serve-token")
    assert made and path == config_dir / "serve-token" and path.stat().st_mode & 0o777 == 0o600
    assert default_token("serve-token") == (path, token, False)
    path.chmod(0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        default_token("serve-token")
    path.unlink()
    path.symlink_to(config_dir / "elsewhere")
    with pytest.raises(ValueError, match="regular file"):
        default_token("serve-token")


def test_token_files(tmp_path):
    path = tmp_path / "t"
    path.write_text("  s3cret-token \n")
    assert read_tokens(str(path)) == {"default": "s3cret-token"}
    path.write_text("ci:abc\nide:def\n")
    assert read_tokens(str(path)) == {"ci": "abc", "ide": "def"}
    path.write_text("ci:abc\nide:abc\n")
    with pytest.raises(ValueError, match="twice"):
        read_tokens(str(path))


def test_a_run_dir_serves_its_last_committed_checkpoint(tmp_path):
    from flywheel.settings.layout import RunLayout
    from flywheel.policy.checkpoint import save_checkpoint
    from flywheel.policy.backends import POLICIES
    layout = RunLayout(str(tmp_path / "demo"))
    digests = [save_checkpoint(layout.checkpoint(k), POLICIES.get("tiny").create({}, seed=seed), None, {})
               for seed, k in enumerate((None, 0, 1))]
    layout.write_json(layout.commit_marker(0), {})  # iteration 1 is not committed
    served = load_policy(run_dir=layout.root)
    assert (served.digest, served.name) == (digests[1], "demo@iteration-0")
    assert load_policy(run_dir=layout.root, iteration="initial").digest == digests[0]
    with pytest.raises(ValueError, match="not committed"):
        load_policy(run_dir=layout.root, iteration="1")


def test_every_flag_in_the_doc_is_a_real_flag():
    sub = next(a for a in parser()._actions if a.dest == "command")
    real = {o for name in ("serve", "sql") for a in sub.choices[name]._actions for o in a.option_strings}
    mentioned = set(re.findall(r"(--[a-z][a-z-]+)", DOC.read_text()))
    assert {"--model", "--run-dir", "--token-file", "--max-queue"} <= mentioned <= real, mentioned - real
