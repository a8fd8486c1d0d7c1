"""Unified diffs for repository-level episodes: write one, apply one, list the paths one touches.

An episode's state is the set of files changed from a repository snapshot; the answer in the
table is a git-style unified diff (`make_diff`), and scoring applies it, or a diff a model wrote
by hand, or a SWE-bench `patch`, to the snapshot (`apply_diff`). Models write sloppy diffs, so
applying is lenient where git's `apply --recount` is (line counts, offsets, prose around the diff,
a blank context line without its space) and strict where a wrong guess would change code
(context and removed lines match exactly, no fuzz). A `PatchError` is read by a model as a tool's
error observation: it names the file, the hunk and what was expected vs. found.

Standard library only and no flywheel imports: this file is also loaded by path in a sandbox.
"""

import bisect
import difflib
import re

MAX_DIFF_CHARS = 16_000_000  # whole rewrites of a few 1 MB modules (a linear parse)
WHOLE_FILE_LINES = 20_000  # past this, make_diff writes one whole-file hunk (difflib is quadratic)
SEARCH_BUDGET = 5_000_000  # line comparisons the offset search may spend on one diff
CONTEXT = 3
NO_NEWLINE = "\\ No newline at end of file"

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_UNSUPPORTED = ("rename from", "rename to", "copy from", "copy to", "similarity index")


class PatchError(ValueError):
    """A diff that does not apply; the message says where and why, for a model to read."""


def _cut(text, limit=120):
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _show(line):
    """One file or diff line as a model should see it: quoted, `\\r`/missing newline visible."""
    return _cut(repr(line), 120)


def _fail(message):
    raise PatchError(_cut(message, 600))


def _lines(text):
    """`text` as lines split on "\\n" only (as git does), each keeping its line ending."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


# ---- writing -------------------------------------------------------------------------------

def _quote(path):
    """`path` as git writes it in a header: C-quoted if it holds quotes, backslashes, controls."""
    if not any(c in path for c in '"\\') and all(ord(c) >= 32 and c != "\x7f" for c in path):
        return path
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    body = "".join(escapes.get(c, c if ord(c) >= 32 and c != "\x7f" else f"\\{ord(c):03o}")
                   for c in path)
    return f'"{body}"'


def _name(prefix, path):
    quoted = _quote(prefix + path)
    return quoted + "\t" if " " in path and not quoted.startswith('"') else quoted  # as git does


def _range(start, count):
    """A hunk side's range as diff writes it: an empty side names the line before it."""
    if count == 0:
        return f"{start},0"
    return f"{start + 1}" if count == 1 else f"{start + 1},{count}"


def _diff_lines(prefix, lines):
    for line in lines:
        if line.endswith("\n"):
            yield prefix + line
        else:
            yield prefix + line + "\n"
            yield NO_NEWLINE + "\n"


def _common_ends(old, new):
    """(lines the two share at the start, lines they share at the end after those)."""
    n, head = min(len(old), len(new)), 0
    while head < n and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < n - head and old[len(old) - 1 - tail] == new[len(new) - 1 - tail]:
        tail += 1
    return head, tail


def _hunks(old, new):
    """The hunks from `old` to `new` (lists of lines). The lines both share at the ends are
    set aside first (linear), so an edit in a large file costs, and shows, only its span; a
    changed span over WHOLE_FILE_LINES is one replace (difflib is quadratic)."""
    head, tail = _common_ends(old, new)
    keep = max(0, head - CONTEXT), max(0, tail - CONTEXT)  # kept for context
    a, b = old[keep[0]:len(old) - keep[1]], new[keep[0]:len(new) - keep[1]]
    if max(len(a), len(b)) > WHOLE_FILE_LINES:
        local = [[("equal", 0, head - keep[0], 0, head - keep[0]),
                  ("replace", head - keep[0], len(a) - (tail - keep[1]), head - keep[0], len(b) - (tail - keep[1])),
                  ("equal", len(a) - (tail - keep[1]), len(a), len(b) - (tail - keep[1]), len(b))]]
        local = [[op for op in local[0] if op[1] < op[2] or op[3] < op[4]]]
    else:
        local = difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(CONTEXT)
    groups = [[(tag, a1 + keep[0], a2 + keep[0], b1 + keep[0], b2 + keep[0]) for tag, a1, a2, b1, b2 in group]
              for group in local]
    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        yield f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@\n"
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                yield from _diff_lines(" ", old[a1:a2])
                continue
            yield from _diff_lines("-", old[a1:a2])
            yield from _diff_lines("+", new[b1:b2])


def make_diff(base: dict[str, str], changes: dict[str, str | None]) -> str:
    """A git-style unified diff from `base` (path -> text) to `base` updated by `changes`
    (path -> new text, None: deleted); "" when nothing changes."""
    out = []
    for path in sorted(changes):
        old, new = base.get(path), changes[path]
        if old == new:
            continue
        out.append(f"diff --git {_quote('a/' + path)} {_quote('b/' + path)}\n")
        if old is None:
            out += ["new file mode 100644\n", "--- /dev/null\n", f"+++ {_name('b/', path)}\n"]
        elif new is None:
            out += ["deleted file mode 100644\n", f"--- {_name('a/', path)}\n", "+++ /dev/null\n"]
        else:
            out += [f"--- {_name('a/', path)}\n", f"+++ {_name('b/', path)}\n"]
        out += _hunks(_lines(old or ""), _lines(new or ""))
    return "".join(out)


# ---- reading -------------------------------------------------------------------------------

def _unquote(text):
    """A C-quoted git path ("a/\\303\\251") as text; `text` starts with a quote."""
    raw, i = bytearray(), 1
    simple = {"n": b"\n", "t": b"\t", "r": b"\r", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b",
              "f": b"\f", "v": b"\v"}
    while i < len(text) and text[i] != '"':
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            if text[i + 1:i + 4].isdigit() and len(text[i + 1:i + 4]) == 3:
                raw.append(int(text[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            raw += simple.get(text[i + 1], text[i + 1].encode())
            i += 2
            continue
        raw += c.encode()
        i += 1
    return raw.decode("utf-8", "replace"), text[i + 1:]


def _header_path(rest):
    """The path on a ---/+++ line (after the marker): unquoted, timestamp after a tab dropped."""
    if rest.startswith('"'):
        return _unquote(rest)[0]
    return rest.split("\t")[0].rstrip("\r").rstrip()


def _strip_prefix(path):
    return path[2:] if path[:2] in ("a/", "b/") else path


def _git_paths(rest):
    """Both paths of a `diff --git` line's remainder: (old, new), prefixes still on."""
    if rest.startswith('"'):
        old, rest = _unquote(rest)
        rest = rest.lstrip()
        return old, _unquote(rest)[0] if rest.startswith('"') else rest
    rest = rest.rstrip("\r")
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3:]:
        return rest[:half], rest[half + 1:]  # "a/P b/P", P may hold spaces
    old, _, new = rest.partition(" ")
    if new.startswith('"'):
        new = _unquote(new)[0]
    return old, new


def _is_file_header(lines, i):
    return (lines[i].startswith("--- ") and i + 1 < len(lines)
            and lines[i + 1].startswith("+++ "))


class _FilePatch:
    """One file's part of a diff: its paths, whether it adds or deletes, and its hunks."""

    def __init__(self, line_no, git=False):
        self.line_no, self.git, self.old, self.new, self.hunks = line_no, git, None, None, []
        self.adds = self.deletes = False
        self.unsupported = None

    @property
    def path(self):
        return self.new if self.new not in (None, "/dev/null") else self.old


class _Hunk:
    def __init__(self, number, header, old_start, old_count):
        self.number, self.header = number, _cut(header.rstrip("\r"), 120)
        self.old_start, self.old_count = old_start, old_count
        self.lines = []  # (op, text with its line ending)

    def side(self, ops):
        return [text for op, text in self.lines if op in ops]


def _read_hunk(lines, i, hunk, plain):
    """Reads hunk lines from `lines[i]` on into `hunk`; returns the index after its last line.
    In a `plain` diff (no `diff --git` lines) a ---/+++/@@ run starts the next file instead."""
    while i < len(lines):
        line = lines[i]
        if line == "" or line == "\r":
            j = i
            while j < len(lines) and lines[j] in ("", "\r"):
                j += 1
            if j < len(lines) and lines[j][:1] in " +-\\" and not (plain and _ends_hunk(lines, j)):
                hunk.lines += [(" ", lines[k] + "\n") for k in range(i, j)]  # a space dropped
                i = j
                continue
            return i
        if line[0] not in " +-\\" or (plain and _ends_hunk(lines, i)):
            return i
        if line[0] == "\\":
            if hunk.lines and hunk.lines[-1][1].endswith("\n"):
                op, text = hunk.lines[-1]
                hunk.lines[-1] = (op, text[:-1])
        else:
            hunk.lines.append((line[0], line[1:] + "\n"))
        i += 1
    return i


def _ends_hunk(lines, i):
    """Whether `lines[i]` starts the next file's plain ---/+++ header rather than a hunk line."""
    return (_is_file_header(lines, i) and i + 2 < len(lines)
            and lines[i + 2].startswith("@@"))


def _parse(diff):
    """The file patches in `diff`, in order (PatchError on a malformed one)."""
    lines = diff.split("\n")
    patches, current, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            current = _FilePatch(i + 1, git=True)
            patches.append(current)
            old, new = _git_paths(line[len("diff --git "):])
            current.old, current.new = _strip_prefix(old), _strip_prefix(new)
            i += 1
            continue
        if _is_file_header(lines, i):
            if current is None or current.hunks or current.line_no != _header_owner(lines, i):
                current = _FilePatch(i + 1)
                patches.append(current)
            current.old = _header_path(line[4:])
            current.new = _header_path(lines[i + 1][4:])
            current.adds = current.adds or current.old == "/dev/null"
            current.deletes = current.deletes or current.new == "/dev/null"
            current.old, current.new = _strip_prefix(current.old), _strip_prefix(current.new)
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                _fail(f"line {i + 1}: hunk {_show(line)} comes before any file header "
                      f"(`--- a/PATH` and `+++ b/PATH`)")
            match = _HUNK.match(line)
            if match:
                start, count = int(match[1]), 1 if match[2] is None else int(match[2])
            else:
                start = count = None  # a bare "@@": placed after the previous hunk
            hunk = _Hunk(len(current.hunks) + 1, line, start, count)
            current.hunks.append(hunk)
            i = _read_hunk(lines, i + 1, hunk, plain=not current.git)
            continue
        if current is not None and not current.hunks:
            if line.startswith("new file mode"):
                current.adds = True
            elif line.startswith("deleted file mode"):
                current.deletes = True
            elif line.startswith(_UNSUPPORTED):
                current.unsupported = "renames are not supported; delete and add the file"
            elif line.startswith(("Binary files", "GIT binary patch")):
                current.unsupported = "binary patches are not supported"
        i += 1
    return patches


def _header_owner(lines, i):
    """The 1-based line of the `diff --git` header that the ---/+++ pair at `i` belongs to, if
    only extended header lines (index, mode, ...) stand between them; else None."""
    j = i - 1
    while j >= 0 and lines[j] and not lines[j].startswith(("diff --git ", "@@", "--- ", "+++ ")):
        if lines[j][0] in " +-\\":
            return None
        j -= 1
    return j + 1 if j >= 0 and lines[j].startswith("diff --git ") else None


def normalize_path(path):
    """`path` in the one spelling a repository path has here: backslashes as slashes, no empty or
    `.` parts (`./tests/x.py`, `a/./b`, `a//b` are `tests/x.py`, `a/b`, `a/b`); None when it is
    not a path inside the repository (empty, absolute, a drive, a `..` part, a NUL, a line break)."""
    if not isinstance(path, str) or any(c in path for c in "\0\n\r"):
        return None
    path = path.replace("\\", "/")
    if path.startswith("/") or re.match(r"[A-Za-z]:/", path):
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _check_path(path, where):
    """`path` normalized (normalize_path), or PatchError saying why it is not a repository path."""
    if not path or path == "/dev/null":
        _fail(f"{where}: no file path in the header")
    normal = normalize_path(path)
    if normal is None:
        _fail(f"{where}: path {_show(path)} must be relative, inside the repository, with no `..` part")
    return normal


# ---- applying ------------------------------------------------------------------------------

class _Search:
    """Finds where a hunk's old side sits in one file: nearest its stated line, after `pos`."""

    def __init__(self, lines, budget):
        self.lines, self.budget, self._index = lines, budget, None

    def matches(self, at, old):
        self.budget[0] -= len(old) or 1
        return self.lines[at:at + len(old)] == old

    def find(self, old, target, pos):
        """The position nearest `target` in [pos, len - len(old)] where `old` sits, or None."""
        last = len(self.lines) - len(old)
        if not old:
            return min(max(target, pos), len(self.lines))
        if pos <= target <= last and self.matches(target, old):
            return target
        if self._index is None:
            self._index = {}
            for n, line in enumerate(self.lines):
                self._index.setdefault(line, []).append(n)
        spots = self._index.get(old[0], [])
        lo, hi = bisect.bisect_left(spots, pos), bisect.bisect_right(spots, last)
        split = min(max(bisect.bisect_left(spots, target), lo), hi)
        before, after = split - 1, split
        while before >= lo or after < hi:
            if self.budget[0] < 0:
                _fail("the hunks sit too far from their stated lines to search for; "
                      "give correct @@ line numbers")
            if after < hi and (before < lo or spots[after] - target <= target - spots[before]):
                at, after = spots[after], after + 1
            else:
                at, before = spots[before], before - 1
            if self.matches(at, old):
                return at
        return None

    def explain(self, old, target, pos):
        """Why `old` sits nowhere: the first differing line at the stated place."""
        at = min(max(target, pos), max(len(self.lines) - 1, pos))
        for k, want in enumerate(old):
            have = self.lines[at + k] if at + k < len(self.lines) else None
            if have != want:
                found = "the end of the file" if have is None else _show(have)
                return f"at line {at + k + 1} expected {_show(want)} but found {found}"
        return f"it would run past the end of the file ({len(self.lines)} lines)"


def _apply_file(patch, text, budget):
    """The new text (None: deleted) that `patch`'s hunks make of `text`."""
    lines = _lines(text)
    search, out, pos = _Search(lines, budget), [], 0
    for hunk in patch.hunks:
        where = f"{_cut(patch.path)}, hunk {hunk.number} ({hunk.header})"
        old, new = hunk.side(" -"), hunk.side(" +")
        if hunk.old_start is None:
            target = pos
        elif not old and hunk.old_count == 0:
            target = hunk.old_start
        else:
            target = max(hunk.old_start - 1, 0)
        at = search.find(old, target, pos)
        if at is None:
            after = f" after the previous hunk (line {pos})" if pos else ""
            _fail(f"{where}: context and removed lines do not match the file{after}; "
                  f"{search.explain(old, target, pos)}. Lines must match exactly.")
        out += lines[pos:at]
        if out and new and not out[-1].endswith("\n"):
            _fail(f"{where}: adds lines after the file's last line, which has no newline; "
                  f"include that line as removed and re-added with a newline")
        out += new
        pos = at + len(old)
        if out and not out[-1].endswith("\n") and pos < len(lines):
            _fail(f"{where}: its last line has no newline ({NO_NEWLINE!r}) but is not at the "
                  f"end of the file")
    out += lines[pos:]
    return "".join(out)


def apply_diff(files: dict[str, str], diff: str) -> dict[str, str | None]:
    """The changes (path -> new text, None: deleted) that `diff` makes to `files`
    (path -> text); PatchError on anything that does not apply."""
    if len(diff) > MAX_DIFF_CHARS:
        _fail(f"the diff has {len(diff):,} characters; at most {MAX_DIFF_CHARS:,} are accepted")
    patches = _parse(diff)
    if not patches and diff.strip():  # an empty diff (make_diff of no changes) changes nothing
        _fail("no file header found: a diff needs `--- a/PATH` and `+++ b/PATH` lines "
              "(or `diff --git a/PATH b/PATH`) before its `@@` hunks")
    changes, seen, budget = {}, set(), [SEARCH_BUDGET]
    for patch in patches:
        where = f"diff line {patch.line_no}"
        path = _check_path(patch.path, where)
        where = _cut(path)
        if patch.unsupported:
            _fail(f"{where}: {patch.unsupported}")
        if not (patch.adds or patch.deletes) and normalize_path(patch.old) != normalize_path(patch.new):
            _fail(f"{where}: renames are not supported ({_show(patch.old)} -> "
                  f"{_show(patch.new)}); delete and add the file")
        if path in seen:
            _fail(f"{where}: the diff patches this file twice; put all its hunks under one header")
        seen.add(path)
        if patch.adds and patch.deletes:
            _fail(f"{where}: the header both adds and deletes this file")
        if patch.adds:
            if path in files:
                _fail(f"{where}: the diff adds this file but it already exists; patch it instead")
            changes[path] = _apply_file(patch, "", budget)
            continue
        if path not in files:
            raw = ("a/" + path) if ("a/" + path) in files else None
            if raw is None:
                _fail(f"{where}: no such file in the repository (a new file needs "
                      f"`--- /dev/null`)")
            path = raw
        text = _apply_file(patch, files[path], budget)
        if patch.deletes:
            if text:
                _fail(f"{where}: the diff deletes this file, but its removed lines are not the "
                      f"whole file ({len(_lines(text))} lines would remain)")
            changes[path] = None
        elif text != files[path]:
            changes[path] = text
    return changes


def changed_paths(diff: str) -> list[str]:
    """The paths `diff` touches (both sides of each header, a/ b/ stripped), in order, without
    repeats; never raises, so a junk diff gives what could be read of it."""
    found, lines = {}, diff[:MAX_DIFF_CHARS].split("\n")
    for i, line in enumerate(lines):
        try:
            if line.startswith("diff --git "):
                pair = _git_paths(line[len("diff --git "):])
            elif _is_file_header(lines, i):
                pair = _header_path(line[4:]), _header_path(lines[i + 1][4:])
            elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
                pair = (line.split(" ", 2)[2].rstrip("\r"),)
            else:
                continue
        except (ValueError, IndexError):
            continue
        for path in pair:
            path = normalize_path(_strip_prefix(path)) if path != "/dev/null" else None
            if path:
                found.setdefault(path, None)
    return list(found)
