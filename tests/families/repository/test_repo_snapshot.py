"""Repository snapshots: folders, archives and git commits read as text files, untrusted input
refused or skipped with a reason, and the content-addressed store (local and gs://)."""

import gzip
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile

import pytest

from flywheel.families.repository import repo_snapshot
from flywheel.families.repository.repo_snapshot import (SnapshotError, SnapshotStore, default_store, read_snapshot,
                                            snapshot_digest)

FILES = {"pkg/__init__.py": "", "pkg/core.py": "def f():\n    return 1\n", "README.md": "# demo\n"}


def write_tar(path, members, mode="w:gz"):
    """members: name -> bytes, or a TarInfo for links and the like."""
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            if isinstance(data, tarfile.TarInfo):
                tar.addfile(data)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_a_folder_keeps_its_text_files_and_says_why_it_skipped_the_rest(tmp_path):
    root = tmp_path / "repo"
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (root / "latin1.txt").write_bytes(b"caf\xe9")
    (root / "big.txt").write_text("x" * (repo_snapshot.MAX_FILE_BYTES + 1))
    (tmp_path / "secret").write_text("outside\n")
    (root / "link.txt").symlink_to(tmp_path / "secret")
    (root / "linkdir").symlink_to(tmp_path)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")

    snap = read_snapshot(str(root))

    assert snap.files == FILES
    assert snap.skipped == {"logo.png": "binary", "latin1.txt": "not UTF-8", "link.txt": "a symlink",
                            "linkdir": "a symlink",
                            "big.txt": f"over the per-file limit ({repo_snapshot.MAX_FILE_BYTES} bytes)"}
    assert snap.digest == snapshot_digest(FILES)


def test_archives_strip_their_single_top_folder(tmp_path):
    members = {f"demo-3f2a1c/{p}": t.encode() for p, t in FILES.items()}
    link = tarfile.TarInfo("demo-3f2a1c/evil-link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    for name in ("a.tar.gz", "a.tgz", "a.tar"):
        snap = read_snapshot(write_tar(tmp_path / name, {**members, "demo-3f2a1c/evil-link": link},
                                       "w" if name.endswith(".tar") else "w:gz"))
        assert snap.files == FILES, name
        assert snap.skipped == {"evil-link": "a link"}
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("demo-3f2a1c/blob.bin", b"\0\1\2")
    snap = read_snapshot(str(tmp_path / "a.zip"))
    assert snap.files == FILES and snap.skipped == {"blob.bin": "binary"}


def test_a_file_at_the_top_keeps_the_folders(tmp_path):
    snap = read_snapshot(write_tar(tmp_path / "b.tar.gz", {"src/a.py": b"a\n", "setup.py": b"s\n"}))
    assert snap.files == {"src/a.py": "a\n", "setup.py": "s\n"}


@pytest.mark.parametrize("member", ["../evil.py", "src/../../evil.py", "/etc/evil.py"])
def test_members_leading_out_of_the_archive_are_refused(tmp_path, member):
    path = write_tar(tmp_path / "evil.tar.gz", {"ok.py": b"", member: b"boom"})
    with pytest.raises(SnapshotError, match="leads outside the archive") as raised:
        read_snapshot(path)
    assert repr(member) in str(raised.value)
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as archive:
        archive.writestr(zipfile.ZipInfo(member), b"boom")
    with pytest.raises(SnapshotError, match="leads outside the archive"):
        read_snapshot(str(tmp_path / "evil.zip"))


def test_the_size_limits_say_which_limit(tmp_path, monkeypatch):
    path = write_tar(tmp_path / "many.tar.gz", {f"f{i}.py": b"x" * 100 for i in range(20)})
    monkeypatch.setattr(repo_snapshot, "MAX_FILES", 10)
    with pytest.raises(SnapshotError, match="file-count limit"):
        read_snapshot(path)
    monkeypatch.setattr(repo_snapshot, "MAX_FILES", 50_000)
    monkeypatch.setattr(repo_snapshot, "MAX_TOTAL_BYTES", 1000)
    with pytest.raises(SnapshotError, match="total-size limit"):
        read_snapshot(path)


def test_a_missing_source_is_a_snapshot_error(tmp_path):
    with pytest.raises(SnapshotError, match="no such folder or archive"):
        read_snapshot(str(tmp_path / "nowhere.tar.gz"))
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(SnapshotError, match="not a folder or an archive"):
        read_snapshot(str(tmp_path / "notes.txt"))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_repository_is_read_at_a_commit(tmp_path):
    repo = tmp_path / "project"
    repo.mkdir()

    def git(*args):
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        return subprocess.run(["git", "-C", str(repo), *args], check=True, env=env,
                               capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (repo / "a.py").write_text("one\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "first")
    first = git("rev-parse", "HEAD")
    (repo / "a.py").write_text("two\n")
    (repo / "b.py").write_text("new\n")
    git("add", "a.py", "b.py")
    git("commit", "-q", "-m", "second")

    assert read_snapshot(f"{repo}@{first[:7]}").files == {"a.py": "one\n"}
    assert read_snapshot(f"{repo}@HEAD").files == {"a.py": "two\n", "b.py": "new\n"}
    with pytest.raises(SnapshotError, match="could not find commit"):
        read_snapshot(f"{repo}@0000000")
    with pytest.raises(SnapshotError, match="not a commit name"):
        read_snapshot(f"{repo}@--output=x")


def test_the_digest_ignores_order_and_sees_content():
    reordered = dict(reversed(list(FILES.items())))
    assert snapshot_digest(reordered) == snapshot_digest(FILES)
    assert snapshot_digest({**FILES, "README.md": "# other\n"}) != snapshot_digest(FILES)
    assert snapshot_digest(FILES).startswith("sha256:") and len(snapshot_digest(FILES)) == 71


def test_the_store_writes_once_and_reads_back_verified(tmp_path):
    store = SnapshotStore(str(tmp_path / "store"))
    digest = store.put(FILES)
    assert digest == snapshot_digest(FILES)
    stored = tmp_path / "store" / (digest.removeprefix("sha256:") + ".json.gz")
    assert json.loads(gzip.decompress(stored.read_bytes())) == FILES
    written = stored.stat().st_mtime_ns
    assert store.put(dict(reversed(list(FILES.items())))) == digest
    assert stored.stat().st_mtime_ns == written  # present: not written again
    assert store.get(digest) == FILES


def test_a_corrupt_or_missing_object_is_refused_naming_its_uri(tmp_path):
    root = tmp_path / "corrupt"
    digest = SnapshotStore(str(root)).put(FILES)
    uri = root / (digest.removeprefix("sha256:") + ".json.gz")
    uri.write_bytes(gzip.compress(json.dumps({**FILES, "pkg/core.py": "evil"}).encode()))
    with pytest.raises(SnapshotError, match="does not match its digest") as raised:
        SnapshotStore(str(root)).get(digest)
    assert str(uri) in str(raised.value)
    missing = "sha256:" + "0" * 64
    with pytest.raises(SnapshotError, match="cannot be read") as raised:
        SnapshotStore(str(root)).get(missing)
    assert "0" * 64 + ".json.gz" in str(raised.value)
    with pytest.raises(SnapshotError, match="not a snapshot digest"):
        SnapshotStore(str(root)).get("sha256:../../etc/passwd")


def test_the_default_store_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_STORE", "gs://bucket/snapshots")
    assert default_store() == "gs://bucket/snapshots"
    monkeypatch.delenv("FLYWHEEL_SNAPSHOT_STORE")
    assert default_store() == os.path.expanduser("~/.cache/flywheel/snapshots")


def test_a_gs_store_round_trips_through_the_emulator(gcs_emulator, monkeypatch):
    pytest.importorskip("apache_beam.io.gcp.gcsio")
    from flywheel.transforms.gcs_credentials import anonymous_for_emulator
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    anonymous_for_emulator()
    files = {**FILES, "gs.py": "on gcs\n"}
    store = SnapshotStore("gs://runs/snapshots")
    digest = store.put(files)
    assert store.put(files) == digest
    assert store.get(digest) == files
    with pytest.raises(SnapshotError, match="gs://runs/snapshots/" + "1" * 64):
        store.get("sha256:" + "1" * 64)
