"""schemas/storage.py, the one storage module, on a local disk and on gs:// (the GCS emulator):
a whole write leaves no temporary, a folder exists while any file lies below it, listing finds
the files below a folder, and deleting a folder removes everything below it."""

import os

import pytest

from flywheel.schemas import storage


def check(root: str) -> None:
    a, b = storage.join(root, "x/iterations/0/_COMMITTED"), storage.join(root, "x/iterations/1/part.bin")
    storage.write_whole(a, b"{}", durable=True)
    storage.write_whole(b, b"one")
    storage.write_whole(b, b"two")  # replaced whole
    assert storage.read_file(b) == b"two"
    assert storage.exists(storage.join(root, "x/iterations")) and storage.exists(a)
    assert not storage.exists(storage.join(root, "x/nothing"))
    assert storage.list_files(storage.join(root, "x/iterations"), recursive=True) == sorted([a, b])
    assert storage.list_files(storage.join(root, "x/iterations")) == []  # files only, this level
    assert storage.list_files(storage.join(root, "x/none")) == []
    storage.delete(storage.join(root, "x/iterations/1"))
    storage.delete(storage.join(root, "x/gone"))  # nothing there: nothing to do
    assert storage.list_files(storage.join(root, "x"), recursive=True) == [a]


def test_local(tmp_path):
    check(str(tmp_path))
    assert [n for n in os.listdir(tmp_path / "x" / "iterations" / "0")] == ["_COMMITTED"]  # no temporary


def test_gs(gcs_emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    check("gs://runs/storage-test")


@pytest.mark.parametrize("uri", ["relative/folder", "./a/../b"])
def test_a_relative_folder_lists_absolute_paths(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage.write_whole(storage.join(uri, "f"), b"1")
    assert storage.list_files(uri) == [os.path.abspath(os.path.join(uri, "f"))]


def test_a_gs_run_deletes_an_interrupted_iteration(gcs_emulator, monkeypatch):
    """RunLayout's delete on gs:// (Beam's `exists` never found a folder there, so nothing was)."""
    from flywheel.settings.layout import RunLayout
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    layout = RunLayout("gs://runs/interrupted")
    written = [storage.join(layout.table_dir("trajectories", 1), "domain=add/part-00000.parquet"),
               storage.join(layout.checkpoint(1), "model.pt"),
               storage.join(layout.table_dir("trajectories", 0), "domain=add/part-00000.parquet")]
    for uri in written:
        storage.write_whole(uri, b"x")
    layout.write_json(layout.commit_marker(0), {"stages": []})
    layout.delete_iteration(1)
    assert storage.list_files(layout.root, recursive=True) == sorted([written[2], layout.commit_marker(0)])
    assert layout.committed_iterations() == [0]


@pytest.mark.parametrize("root", ["local", "gs"])
def test_an_interrupted_update_is_deleted_and_its_rollout_kept(root, tmp_path, request, monkeypatch):
    """delete_update removes the checkpoint and the trainer's metrics file, nothing else (the
    metrics path was once built by joining a path onto the root, and nothing was deleted)."""
    from flywheel.settings.layout import RunLayout
    if root == "gs":
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", request.getfixturevalue("gcs_emulator"))
    layout = RunLayout(str(tmp_path / "run") if root == "local" else "gs://runs/update")
    kept = [storage.join(layout.table_dir("metrics", 2), "rollout.parquet"),
            storage.join(layout.table_dir("trajectories", 2), "domain=add/part-00000.parquet")]
    for uri in kept + [storage.join(layout.table_dir("metrics", 2), "trainer.parquet"),
                       storage.join(layout.checkpoint(2), "model.pt")]:
        storage.write_whole(uri, b"x")
    layout.delete_update(2)
    assert storage.list_files(layout.root, recursive=True) == sorted(kept)


def test_the_layout_refuses_a_path_as_a_name(tmp_path):
    from flywheel.settings.layout import RunLayout
    layout = RunLayout(str(tmp_path / "run"))
    for bad in (layout.table_dir("metrics", 0), "gs://b/x", "/abs"):
        with pytest.raises(ValueError, match="not a path"):
            layout.join(bad, "x.parquet")
    assert layout.join("tables", "metrics") == layout.table_dir("metrics")


def test_a_writer_that_fails_leaves_no_file_and_no_temporary(tmp_path):
    """write_whole with a function (how Parquet streams in): a failure midway leaves the old
    file as it was, and nothing beside it."""
    target = str(tmp_path / "t" / "part.parquet")
    storage.write_whole(target, b"old")

    def half(f):
        f.write(b"new, cut")
        raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError):
        storage.write_whole(target, half)
    assert storage.read_file(target) == b"old" and os.listdir(tmp_path / "t") == ["part.parquet"]
    storage.write_whole(target, lambda f: f.write(b"streamed"))
    assert storage.read_file(target) == b"streamed"
