"""train_job as a long-lived server (`--serve`): one process, many updates, each answered
`done PATH` once its result is written; a crash answers `failed PATH` and stops it."""

import json
import subprocess
import sys

from flywheel.policy.checkpoint import recorded_digest, save_checkpoint
from flywheel.trainer.train_job import serve, spec_of
from flywheel.trainer.train_step import TrainConfig

from tests.trainer.test_stale_policy import _policy, _rows, _write


def test_one_server_runs_updates_in_turn_and_reports_a_crash(tmp_path):
    policy = _policy(0)
    digest = save_checkpoint(str(tmp_path / "ck0"), policy, None, {"policy_version": 0})
    _write(tmp_path / "traj" / "domain=a", _rows(policy, digest))
    paths = []
    for k in (1, 2):  # two updates of the same rows from the same start: the same weights
        spec = spec_of(str(tmp_path / "traj"), str(tmp_path / "ck0"), str(tmp_path / f"ck{k}"),
                       TrainConfig(minibatch_size=4), seed=0, result=str(tmp_path / f"r{k}.json"))
        path = tmp_path / f"spec{k}.json"
        path.write_text(json.dumps(spec))
        paths.append(str(path))
    missing = str(tmp_path / "no-such-spec.json")
    server = subprocess.run([sys.executable, "-m", "flywheel.trainer.train_job", "--serve"],
                            input="\n".join([*paths, missing, paths[0]]) + "\n",
                            capture_output=True, text=True, timeout=300)
    assert server.stdout.split("\n")[:3] == [f"done {paths[0]}", f"done {paths[1]}",
                                            f"failed {missing}"]
    assert server.returncode == 1 and "FileNotFoundError" in server.stderr
    stats = [json.loads((tmp_path / f"r{k}.json").read_text())["stats"] for k in (1, 2)]
    assert stats[0]["n_steps"] == stats[1]["n_steps"] > 0
    assert recorded_digest(str(tmp_path / "ck1")) == recorded_digest(str(tmp_path / "ck2"))


def test_replies_are_the_only_stdout(tmp_path):
    replies = []
    assert serve(["", "  "], replies.append) == 0 and replies == []
