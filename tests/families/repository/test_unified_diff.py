"""unified_diff: make_diff round-trips through apply_diff and real `git apply`; apply_diff is
lenient where models are sloppy (offsets, counts, a blank line's lost space, prose) and says
exactly where a diff that does not apply goes wrong."""

import os
import random
import shutil
import subprocess
import time

import pytest

from flywheel.families.repository.unified_diff import PatchError, apply_diff, changed_paths, make_diff

WORDS = ["x = 1", "return x", "", "pass", "def f():", "    y = 2", "# note", "}", "if a:"]
PATHS = ["a.py", "pkg/mod.py", "pkg/sub/deep.txt", "dir with space/f.txt", "README", "empty.txt"]


def _text(rng, crlf=False):
    if rng.random() < 0.1:
        return ""
    eol = "\r\n" if crlf else "\n"
    lines = [rng.choice(WORDS) for _ in range(rng.randint(1, 40))]
    return eol.join(lines) + (eol if rng.random() < 0.8 else "")


def _edit(rng, text):
    """`text` with a few lines inserted, deleted or replaced; the last newline maybe toggled."""
    eol = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(eol)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(lines))
        kind = rng.choice(["insert", "delete", "replace"])
        if kind == "insert":
            lines[at:at] = [rng.choice(WORDS) + "!" for _ in range(rng.randint(1, 3))]
        elif kind == "delete":
            del lines[at:at + rng.randint(1, 3)]
        else:
            lines[at:at + 1] = ["changed " + str(rng.random())]
    new = eol.join(lines)
    if rng.random() < 0.2:
        new = new[:-len(eol)] if new.endswith(eol) else new + eol
    return new


def _case(seed):
    rng = random.Random(seed)
    base = {path: _text(rng) for path in rng.sample(PATHS, rng.randint(1, len(PATHS)))}
    base["win.txt"] = _text(rng, crlf=True)
    changes = {}
    for path in base:
        roll = rng.random()
        if roll < 0.5:
            changes[path] = _edit(rng, base[path])
        elif roll < 0.6:
            changes[path] = None
        elif roll < 0.65:
            changes[path] = base[path]  # unchanged: no diff
    for path in ("new/file.py", "new file.txt", "gone.txt"):
        if rng.random() < 0.3:
            changes[path] = None if path == "gone.txt" else _text(rng)  # gone.txt is not in base
    return base, changes


def _normalized(base, changes):
    return {p: t for p, t in changes.items()
            if t != base.get(p) and not (t is None and p not in base)}


@pytest.mark.parametrize("seed", range(300))
def test_round_trip(seed):
    base, changes = _case(seed)
    assert apply_diff(base, make_diff(base, changes)) == _normalized(base, changes)


def test_no_changes_is_empty():
    assert make_diff({"a": "1\n"}, {}) == ""
    assert make_diff({"a": "1\n"}, {"a": "1\n", "b": None}) == ""


def test_make_diff_format():
    diff = make_diff({"a.py": "1\n2\n", "old": "x"}, {"a.py": "1\n3\n", "new": "y\n", "old": None})
    assert diff == (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n 1\n-2\n+3\n"
        "diff --git a/new b/new\nnew file mode 100644\n--- /dev/null\n+++ b/new\n"
        "@@ -0,0 +1 @@\n+y\n"
        "diff --git a/old b/old\ndeleted file mode 100644\n--- a/old\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-x\n\\ No newline at end of file\n")


def test_huge_file_uses_one_hunk_quickly():
    old = "".join(f"{i % 7}\n" for i in range(30_000))
    new = "".join(f"{i % 5}\n" for i in range(30_000))
    start = time.monotonic()
    diff = make_diff({"big": old}, {"big": new})
    assert diff.count("@@ -") == 1 and time.monotonic() - start < 5
    assert apply_diff({"big": old}, diff) == {"big": new}


def _git_apply(tmp_path, base, diff):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for path, text in base.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(text.encode())
    (tmp_path / "p.diff").write_bytes(diff.encode())
    subprocess.run(["git", "-c", "core.autocrlf=false", "apply", "--whitespace=nowarn",
                    str(tmp_path / "p.diff")], cwd=repo, check=True, capture_output=True)
    found = {}
    for root, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as handle:
                found[os.path.relpath(full, repo).replace(os.sep, "/")] = handle.read().decode()
    return found


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("seed", range(0, 300, 10))
def test_git_apply_agrees(tmp_path, seed):
    base, changes = _case(seed)
    expected = {**base, **{p: t for p, t in changes.items()}}
    expected = {p: t for p, t in expected.items() if t is not None}
    diff = make_diff(base, changes)
    assert _git_apply(tmp_path, base, diff) == expected if diff else expected == base


BASE = {"src/m.py": "".join(f"line {i}\n" for i in range(1, 31))}


def test_offset_and_omitted_and_wrong_counts():
    hunk = " line 10\n-line 11\n+eleven\n line 12\n"
    want = {"src/m.py": BASE["src/m.py"].replace("line 11\n", "eleven\n")}
    for header in ("@@ -5,3 +5,3 @@", "@@ -15,3 +15,3 @@", "@@ -10 +10 @@", "@@ -10,9 +10,1 @@",
                   "@@ -1,2 +1,2 @@ def f():", "@@"):
        diff = f"--- a/src/m.py\n+++ b/src/m.py\n{header}\n{hunk}"
        assert apply_diff(BASE, diff) == want, header


def test_prose_index_lines_timestamps_and_blank_context():
    files = {"f.txt": "a\n\nb\nc\n"}
    diff = ("Here is my fix:\n\n```diff\ndiff --git a/f.txt b/f.txt\nindex 123..456 100644\n"
            "--- a/f.txt\t2024-01-01 00:00:00\n+++ b/f.txt\t2024-01-01 00:00:01\n"
            "@@ -1,4 +1,4 @@\n a\n\n b\n-c\n+C\n```\nThat should do it.\n")
    assert apply_diff(files, diff) == {"f.txt": "a\n\nb\nC\n"}
    assert changed_paths(diff) == ["f.txt"]


def test_several_files_and_hunks_plain_headers():
    files = {"x": "".join(f"{i}\n" for i in range(20)), "y": "q\n"}
    diff = ("--- x\n+++ x\n@@ -2,1 +2,1 @@\n-1\n+one\n@@ -15 +15 @@\n-14\n+fourteen\n"
            "--- a/y\n+++ b/y\n@@ -1 +1 @@\n-q\n+r\n")
    out = apply_diff(files, diff)
    assert out["x"].split("\n")[1:2] == ["one"] and "fourteen\n" in out["x"] and out["y"] == "r\n"


def test_no_newline_both_sides_and_crlf():
    files = {"w": "a\r\nb"}
    diff = "--- a/w\n+++ b/w\n@@ -1,2 +1,2 @@\n a\r\n-b\n\\ No newline at end of file\n+B\r\n"
    assert apply_diff(files, diff) == {"w": "a\r\nB\r\n"}


def test_add_and_delete():
    diff = ("diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n"
            "@@ -0,0 +1,2 @@\n+1\n+2\n"
            "diff --git a/d b/d\ndeleted file mode 100644\n--- a/d\n+++ /dev/null\n"
            "@@ -1 +0,0 @@\n-z\n")
    assert apply_diff({"d": "z\n"}, diff) == {"n": "1\n2\n", "d": None}


def _error(files, diff):
    with pytest.raises(PatchError) as caught:
        apply_diff(files, diff)
    message = str(caught.value)
    assert len(message) <= 600
    return message


def test_mismatch_names_file_hunk_and_lines():
    diff = "--- a/src/m.py\n+++ b/src/m.py\n@@ -3,2 +3,2 @@\n line 3\n-line 99\n+x\n"
    message = _error(BASE, diff)
    assert "src/m.py" in message and "hunk 1" in message and "@@ -3,2 +3,2 @@" in message
    assert "'line 99\\n'" in message and "'line 4\\n'" in message


def test_fuzz_is_not_allowed_and_overlap_is_refused():
    fuzzy = "--- a/src/m.py\n+++ b/src/m.py\n@@ -3,2 +3,2 @@\n line  3\n-line 4\n+x\n"
    assert "hunk 1" in _error(BASE, fuzzy)
    overlap = ("--- a/src/m.py\n+++ b/src/m.py\n@@ -10 +10 @@\n-line 10\n+ten\n"
               "@@ -5 +5 @@\n-line 5\n+five\n")
    message = _error(BASE, overlap)
    assert "hunk 2 (@@ -5 +5 @@)" in message and "after the previous hunk" in message


@pytest.mark.parametrize("diff, files, words", [
    ("--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n", {}, ["nope.py", "no such file"]),
    ("--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+a\n", {"f": "x\n"}, ["f:", "already exists"]),
    ("--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", {"f": "x\ny\n"}, ["f:", "whole file"]),
    ("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n--- a/f\n+++ b/f\n@@ -2 +2 @@\n-y\n+z\n",
     {"f": "x\ny\n"}, ["f:", "twice"]),
    ("--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-x\n+y\n", {},
     ["../etc/passwd", ".."]),
    ("--- /abs\n+++ /abs\n@@ -1 +1 @@\n-x\n+y\n", {}, ["/abs", "relative"]),
    ("--- a/f\0\n+++ b/f\0\n@@ -1 +1 @@\n-x\n+y\n", {}, ["relative"]),
    ("diff --git a/f b/g\nsimilarity index 90%\nrename from f\nrename to g\n", {"f": "x\n"},
     ["renames are not supported"]),
    ("@@ -1 +1 @@\n-x\n+y\n", {"f": "x\n"}, ["before any file header"]),
    ("just prose, no diff here\n", {"f": "x\n"}, ["no file header"]),
    ("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n\\ No newline at end of file\n", {"f": "x\nz\n"},
     ["f, hunk 1 (@@ -1 +1 @@)", "not at the end"]),
])
def test_errors(diff, files, words):
    message = _error(files, diff)
    for word in words:
        assert word in message, (word, message)


def test_huge_diff_refused_quickly():
    diff = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n" + "+x\n" * 5_400_000
    start = time.monotonic()
    assert "at most 16,000,000" in _error({"f": "x\n"}, diff)
    assert time.monotonic() - start < 1


def test_offset_search_is_bounded():
    files = {"f": "a\n" * 50_000}
    diff = "--- a/f\n+++ b/f\n@@ -1,1001 +1,1001 @@\n" + " a\n" * 1000 + "-b\n+c\n"
    start = time.monotonic()
    _error(files, diff)
    assert time.monotonic() - start < 10


def test_changed_paths():
    diff = make_diff({"a.py": "1\n", "tests/t.py": "x\n"}, {"a.py": "2\n", "tests/t.py": None,
                                                            "new.py": "n\n"})
    assert changed_paths(diff) == ["a.py", "new.py", "tests/t.py"]
    assert changed_paths("--- a/x\n+++ b/y\nrename from p\nrename to q\n") == ["x", "y", "p", "q"]
    junks = ("", "@@ -1 +1 @@\n", "diff --git\n", "diff --git \"a/\\", "--- \n+++ \n", "\0" * 50)
    for junk in junks:
        assert isinstance(changed_paths(junk), list)
    assert changed_paths("prose\ndiff --git a/q b/q\n@@ garbage\n--- a/q") == ["q"]


def test_paths_are_normalized_and_escapes_refused():
    from flywheel.families.repository.unified_diff import normalize_path
    for spelled in ("./tests/x.py", "tests//x.py", "tests/./x.py", ".//tests/x.py", "tests\\x.py", "tests/x.py/"):
        assert normalize_path(spelled) == "tests/x.py", spelled
    for bad in ("", ".", "../x.py", "a/../../x", "/etc/passwd", "C:/x", "C:\\x", "a\0b", "a\nb", "\\\\server\\x"):
        assert normalize_path(bad) is None, bad
    base = {"tests/x.py": "a\n"}
    diff = "--- a/./tests/x.py\n+++ b/./tests//x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert apply_diff(base, diff) == {"tests/x.py": "b\n"}
    assert changed_paths(diff) == ["tests/x.py"]
    with pytest.raises(PatchError, match="inside the repository"):
        apply_diff(base, "--- a/tests/../../x\n+++ b/tests/../../x\n@@ -1 +1 @@\n-a\n+b\n")
