"""Harbor task folders on `docker`: each example's image is built offline from its
environment/Dockerfile on a private dockerd and validates there (solution 1, nothing 0); a
Dockerfile whose base is not on the daemon is a problem naming the image and `docker pull`.
The plain bases the examples name (python, ubuntu, debian) are stood in for by one image
imported from this machine's own bash, coreutils and Python (no registry here)."""

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from flywheel.cli.tasks import main as tasks_main
from flywheel.sandbox.docker_image import _add_path, _elf_deps, build_image, rootfs_tar

EXAMPLES = Path(__file__).resolve().parents[3] / "families" / "harbor" / "examples"
TOOLS = ("bash", "ls", "cat", "sort", "uniq", "wc", "tr", "mv", "mkdir", "rm", "diff", "awk",
         "sed", "grep", "head", "tail", "chmod", "dirname", "cut", "env", "true", "false", "sleep",
         "ln", "printf", "mount", "setsid")
BASES = ("python:3.11-slim", "python:3.12-slim", "ubuntu:24.04", "debian:bookworm-slim")


def base_tar() -> bytes:
    tools = [p for p in (shutil.which(t, path="/usr/bin:/bin") for t in TOOLS) if p]
    buf, seen = io.BytesIO(rootfs_tar()), set()
    with tarfile.open(fileobj=buf, mode="a") as tar:
        seen.update("/" + name for name in tar.getnames())
        for path in [*tools, *sorted(_elf_deps(tools))]:
            if path not in seen:
                _add_path(tar, path, seen)
    return buf.getvalue()


@pytest.fixture(scope="module")
def daemon(docker_daemon):
    client = docker_daemon.client()
    build_image(client)  # the docker backend's own image
    data = base_tar()
    for tag in BASES:
        repository, _, version = tag.partition(":")
        client.api.import_image_from_data(data, repository=repository, tag=version)
    yield docker_daemon


def test_examples_build_and_validate_on_docker(daemon, monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", daemon.url)
    assert tasks_main(["tasks", "validate", str(EXAMPLES), "--sandbox", "docker",
                       "--format", "json"]) == 0, capsys.readouterr()
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["tasks"] == 5 and report["problems"] == []


def test_a_base_missing_from_the_daemon_is_named(daemon, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", daemon.url)
    shutil.copytree(EXAMPLES / "count-words", tmp_path / "t")
    (tmp_path / "t" / "environment" / "Dockerfile").write_text("FROM alpine:3.20\nWORKDIR /app\n")
    assert tasks_main(["tasks", "validate", str(tmp_path), "--sandbox", "docker", "--format", "json"]) == 1
    (problem,) = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["problems"]
    assert "base image alpine:3.20 is not on the Docker daemon" in problem and "docker pull" in problem


@pytest.mark.slow  # a whole `flywheel run` on docker
def test_a_scripted_run_solves_every_example_on_docker(daemon, monkeypatch, tmp_path):
    """The golden trajectories through `flywheel run --policy scripted --sandbox docker`: each
    example in its own image (built from its Dockerfile), solved in three turns."""
    from flywheel.cli.main import main
    from flywheel.cli.tasks import load_tasks
    from flywheel.domains.tools import ToolCall, render_call
    from flywheel.families.harbor.images import build_task_image
    from flywheel.settings.layout import RunLayout
    monkeypatch.setenv("DOCKER_HOST", daemon.url)
    tasks, problems = load_tasks([str(EXAMPLES)])
    assert not problems
    client = daemon.client()
    images = {t["image"] for t in tasks if t.get("image")}
    for task in tasks:
        if task.get("image"):
            build_task_image(client, task)  # as `tasks validate --sandbox docker` does
    assert images  # the examples do run in images of their own here
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps({"prompt": t["prompt"], "actions": [
        render_call(ToolCall("run_shell", {"command": "ls"})),
        render_call(ToolCall("run_shell", {"command": t["reference_script"]})),
        render_call(ToolCall("submit", {"answer": ""}))]}) + "\n" for t in tasks))
    assert main(["run", "--run-dir", str(tmp_path / "run"), "--tasks", str(EXAMPLES),
                 "--sandbox", "docker", "--policy", "scripted",
                 "--set", f"policy.options=script={script}",
                 "--iterations", "1", "--n-samples", "1", "--tasks-per-domain", "5",
                 "--heldout-per-domain", "0", "--max-turns", "4", "--eval-every", "0"]) == 0
    rows = RunLayout(str(tmp_path / "run")).read_table("trajectories").to_pylist()
    assert sorted((r["task_id"], r["reward_raw"], len(r["turns"]), r["sandbox_backend"])
                  for r in rows) == sorted((t["task_id"], 1.0, 3, "docker") for t in tasks)
