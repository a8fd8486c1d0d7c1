"""Hostile snapshots, stores, repositories and task rows: every name stays inside its root, the
store is the user's, a repository's own config and attributes never run, the digest cannot be
made to collide, bombs are bounded, and `flywheel tasks validate` writes nothing outside the store."""

import gzip
import io
import json
import os
import shutil
import subprocess
import tarfile
import uuid
import zipfile

import pytest

from flywheel.cli import tasks as tasks_cli
from flywheel.families.repository import repo_snapshot
from flywheel.domains.registry import prepare_task
from flywheel.families.repository.repo import repo_problem
from flywheel.families.repository.repo_base import materialized
from flywheel.families.repository.repo_snapshot import SnapshotError, SnapshotStore, read_snapshot, snapshot_digest

FILES = {"pkg/__init__.py": "", "pkg/core.py": "def f():\n    return 1\n"}
BAD_NAMES = ["../escape.py", "a/../../escape.py", "/tmp/escape.py", "a\0b.py", "a\nb.py",
             "a\\..\\..\\b.py", "./a.py", "a//b.py", "a/", "", ".", "pkg"]  # "pkg": a file and a folder
HIDDEN = [{"id": "h", "module": "pkg.core", "call": "f()", "expect": 2}]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def user(tmp_path, monkeypatch):
    """The user's own store and base cache, under one folder the checks may leave written."""
    mine = tmp_path / "mine"
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_STORE", str(mine / "store"))
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_CACHE", str(mine / "cache"))
    return mine


def crafted_object(root, files):
    """An object of a store holding `files` under their true digest, as anyone can write one."""
    digest = snapshot_digest(files)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, digest.removeprefix("sha256:") + ".json.gz"), "wb") as f:
        f.write(gzip.compress(json.dumps(files).encode("utf-8", "surrogatepass")))
    return digest


def listing(root, skip):
    """Every path under `root` (but `skip`) with its size and mtime."""
    found = {}
    for here, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(here, d) != str(skip)]
        for name in dirs + names:
            path = os.path.join(here, name)
            info = os.lstat(path)
            found[path] = (info.st_size, info.st_mtime_ns)
    return found


def git(repo, *args):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=env,
                          capture_output=True, text=True).stdout.strip()


def git_repo(path, files):
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "c")
    return path


def hostile_git(path, canary):
    """A repository whose config, attributes and hooks would each run a command that writes
    `canary` (any git command that reads its config, or `git archive`, would)."""
    run = f"sh -c 'echo ran >> {canary}'"
    repo = git_repo(path, {**FILES, ".gitattributes": "* filter=evil diff=evil\n*.py export-subst\n",
                           "pkg/version.py": "V = '$Format:%H$'\n"})
    with open(repo / ".git" / "config", "a") as f:
        f.write(f'[filter "evil"]\n\tclean = {run}\n\tsmudge = {run}\n\tprocess = {run}\n\trequired = true\n'
                f'[diff "evil"]\n\ttextconv = {run}\n[core]\n\tfsmonitor = {run}\n\tpager = {run}\n'
                f"\thooksPath = hooks\n[include]\n\tpath = {repo}/more.config\n"
                f'[alias]\n\tarchive = !{run}\n\tls-tree = !{run}\n')
    (repo / "more.config").write_text(f"[core]\n\tsshCommand = {run}\n")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    for hook in ("post-checkout", "pre-auto-gc", "reference-transaction"):
        (repo / "hooks").mkdir(exist_ok=True)
        (repo / "hooks" / hook).write_text(f"#!/bin/sh\necho ran >> {canary}\n")
        os.chmod(repo / "hooks" / hook, 0o755)
    return repo


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_name_that_leaves_its_root_is_refused_by_every_reader_and_writer(tmp_path, user, name):
    files = {**FILES, name: "boom\n"}
    with pytest.raises(SnapshotError):
        SnapshotStore(str(user / "store")).put(files)
    digest = crafted_object(str(user / "store"), files)  # as a shared or copied store may hold
    with pytest.raises(SnapshotError, match="such snapshots are refused"):
        SnapshotStore(str(user / "store")).get(digest)
    assert "field `repo.snapshot`" in repo_problem({"snapshot": digest})[1]
    assert "field `repo.files`" in repo_problem({"files": files})[1]
    before = listing(tmp_path, user / "store")
    with pytest.raises(SnapshotError):
        materialized(files, digest)
    assert listing(tmp_path, user / "store") == before
    assert not os.path.lexists("/tmp/escape.py")


def test_the_digest_frames_each_name_so_a_crafted_list_cannot_collide():
    import hashlib
    x = hashlib.sha256(b"x").hexdigest()
    two = {"a": "x", "b": "y"}
    one = {f"a\0{x}\nb": "y"}  # spelled, in the old `path\0digest\n` framing, the same bytes as `two`
    legacy = hashlib.sha256()
    for path in sorted(one):
        legacy.update(f"{path}\0{hashlib.sha256(one[path].encode()).hexdigest()}\n".encode())
    old = hashlib.sha256(f"a\0{x}\n".encode() + f"b\0{hashlib.sha256(b'y').hexdigest()}\n".encode())
    assert legacy.hexdigest() == old.hexdigest()  # the collision the old framing allowed
    assert snapshot_digest(one) != snapshot_digest(two)
    assert snapshot_digest({"ab": "c"}) != snapshot_digest({"a": "bc"})
    assert snapshot_digest({"a": ""}) != snapshot_digest({})


def test_a_row_naming_its_own_store_is_refused_and_the_users_store_is_read(tmp_path, user):
    elsewhere = str(tmp_path / "their-store")
    digest = crafted_object(elsewhere, FILES)
    row = {"task_id": "t", "domain": "repo", "prompt": "p", "hidden_tests": HIDDEN,
           "repo": {"snapshot": digest, "store": elsewhere}}
    task, problems = prepare_task(row)
    assert task is None and any("field `repo.store`" in p and "never from one a task names" in p
                                for p in problems), problems
    del row["repo"]["store"]  # the same digest: looked up in the user's store only
    assert "cannot be read" in " ".join(prepare_task(row)[1])
    SnapshotStore(str(user / "store")).put(FILES)
    task, problems = prepare_task(row)
    assert problems == [] and task["repo"]["store"] == str(user / "store")


def test_archive_bombs_are_bounded(tmp_path, user, monkeypatch):
    zeros = tmp_path / "zeros.tar.gz"  # 4 MB of zeros in a few kB: past a 1 MB stream limit
    with tarfile.open(zeros, "w:gz") as tar:
        info = tarfile.TarInfo("big.bin")
        info.size = 4 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    monkeypatch.setattr(repo_snapshot, "MAX_STREAM_BYTES", 1 << 20)
    with pytest.raises(SnapshotError, match="archive-size limit"):
        read_snapshot(str(zeros))
    monkeypatch.setattr(repo_snapshot, "MAX_ENTRIES", 50)
    dirs = tmp_path / "dirs.tar"  # members that are no file still count
    with tarfile.open(dirs, "w") as tar:
        for i in range(60):
            info = tarfile.TarInfo(f"d{i}")
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    with pytest.raises(SnapshotError, match="entry limit"):
        read_snapshot(str(dirs))
    with zipfile.ZipFile(tmp_path / "many.zip", "w") as archive:
        for i in range(60):
            archive.writestr(f"f{i}.py", "")
    with pytest.raises(SnapshotError, match="entry limit"):
        read_snapshot(str(tmp_path / "many.zip"))
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.py", "x = 1\n" * 1000)
    data = bytearray(broken.read_bytes())
    data[40:60] = b"\xff" * 20  # the compressed bytes, not the directory
    broken.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="cannot read the snapshot"):
        read_snapshot(str(broken))
    monkeypatch.setattr(repo_snapshot, "MAX_STORED_BYTES", 1 << 16)
    digest = crafted_object(str(user / "store"), {"a.py": "x" * (1 << 17)})
    with pytest.raises(SnapshotError, match="size limit"):
        SnapshotStore(str(user / "store")).get(digest)


@needs_git
def test_a_repositorys_config_attributes_and_hooks_never_run(tmp_path, user):
    canary = tmp_path / "canary"
    repo = hostile_git(tmp_path / "proj", canary)
    snap = read_snapshot(f"{repo}@HEAD")
    assert snap.files["pkg/core.py"] == FILES["pkg/core.py"]
    assert snap.files["pkg/version.py"] == "V = '$Format:%H$'\n"  # no export-subst: the bytes as committed
    assert not canary.exists()


@needs_git
def test_a_git_dir_that_leads_elsewhere_is_refused(tmp_path, user):
    other = git_repo(tmp_path / "other", {"secret.py": "TOKEN = 'hunter2'\n"})
    pointer = tmp_path / "pointer"
    pointer.mkdir()
    (pointer / ".git").write_text(f"gitdir: {other / '.git'}\n")
    link = tmp_path / "link"
    link.mkdir()
    (link / ".git").symlink_to(other / ".git")
    borrower = git_repo(tmp_path / "borrower", FILES)
    (borrower / ".git" / "objects" / "info" / "alternates").write_text(f"{other / '.git' / 'objects'}\n")
    linked = git_repo(tmp_path / "linked", FILES)
    shutil.rmtree(linked / ".git" / "refs")
    (linked / ".git" / "refs").symlink_to(other / ".git" / "refs")
    piped = git_repo(tmp_path / "piped", FILES)
    os.mkfifo(piped / ".git" / "packed-refs")  # git would block reading it
    planted = git_repo(tmp_path / "planted", FILES)
    (planted / ".git" / "objects" / "pack" / "other.pack").symlink_to(tmp_path / "other" / "secret.py")
    for repo, why in [(pointer, "points at another repository"), (link, "points at another repository"),
                      (borrower, "borrowed from another repository"), (linked, "leads out"),
                      (piped, "not a plain file"), (planted, "a link or a special file")]:
        with pytest.raises(SnapshotError, match=why):
            read_snapshot(f"{repo}@HEAD")


def test_tasks_validate_of_hostile_rows_writes_nothing_outside_the_store(tmp_path, user, monkeypatch,
                                                                         capsys):
    tasks, outside, work = tmp_path / "tasks", tmp_path / "outside", tmp_path / "cwd"
    for folder in (tasks, outside, work):
        folder.mkdir()
    monkeypatch.chdir(work)
    target = f"/tmp/flywheel-pwned-{uuid.uuid4().hex}"
    theirs = str(outside / "store")
    crafted = crafted_object(theirs, {**FILES, f"../../../../../../..{target}": "pwned\n"})
    (outside / "proj").mkdir()
    (outside / "proj" / "a.py").write_text("SECRET = 1\n")
    with tarfile.open(tasks / "evil.tar.gz", "w:gz") as tar:
        for name in ("ok.py", "../pwned.py", target):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"x=1"))
    (tasks / "link-out").symlink_to(outside / "proj")
    base = {"domain": "repo", "prompt": "p", "hidden_tests": HIDDEN}
    rows = [{"repo": {"snapshot": crafted, "store": theirs}},       # its own store
            {"repo": {"files": {**FILES, "../pwned.py": "x\n"}}},   # inline names out
            {"repo": {"files": {**FILES, target: "x\n"}}},
            {"repo": "proj", "_folder": str(outside)},              # its own folder
            {"repo": "../outside/proj"}, {"repo": {"path": str(outside / "proj")}},
            {"repo": "link-out"}, {"repo": "evil.tar.gz"}]
    if shutil.which("git"):
        hostile_git(tasks / "gitproj", tmp_path / "canary")
        other = git_repo(outside / "other", {"secret.py": "TOKEN = 1\n"})
        (tasks / "pointer").mkdir()
        (tasks / "pointer" / ".git").write_text(f"gitdir: {other / '.git'}\n")
        rows += [{"repo": "gitproj@HEAD", "hidden_tests": []}, {"repo": "pointer@HEAD"}]
    path = tasks / "hostile.jsonl"
    path.write_text("".join(json.dumps({**base, "task_id": f"t{i}", **row}) + "\n"
                            for i, row in enumerate(rows)))
    before = listing(tmp_path, user)

    assert tasks_cli.main(["tasks", "validate", str(path), "--format", "json"]) == 1

    report = json.loads(capsys.readouterr().out)
    assert report["tasks"] == 0
    assert {p.split(": ")[1] for p in report["problems"]} == {f"line {i + 1}" for i in range(len(rows))}
    assert all("field `repo" in p or "field `hidden_tests`" in p for p in report["problems"]), report
    assert listing(tmp_path, user) == before
    assert not os.path.lexists(target) and not (tmp_path / "canary").exists()


def test_a_base_found_in_the_cache_is_checked_not_trusted(tmp_path, user, monkeypatch):
    from flywheel.families.repository import repo_base
    digest = SnapshotStore(str(user / "store")).put(FILES)
    folder = materialized(FILES, digest)
    core = os.path.join(folder, "tree", "pkg", "core.py")
    os.chmod(core, 0o644)
    with open(core, "w") as f:  # changed behind the manifest's back
        f.write("import os; os.system('boom')\n")
    os.symlink(str(tmp_path), os.path.join(folder, "tree", "pkg", "out"))  # and a link planted
    monkeypatch.setattr(repo_base, "_checked", set())  # a new process
    assert materialized(FILES, digest) == folder
    assert open(core).read() == FILES["pkg/core.py"]
    assert not os.path.lexists(os.path.join(folder, "tree", "pkg", "out"))
    if os.geteuid() == 0:  # a cache folder another user owns (or can write) is refused
        other = tmp_path / "theirs"
        other.mkdir(mode=0o777)
        os.chown(other, 65534, 65534)
        monkeypatch.setenv("FLYWHEEL_SNAPSHOT_CACHE", str(other))
        with pytest.raises(SnapshotError, match="not a folder of this user"):
            materialized(FILES, digest)
