"""The tree a repository call sees, read without writing it out; a call's changes as splices.

Sandbox side: a sibling of harness.py (families/repository/harnesses/repo.py), loaded by path,
standard library only. Two jobs, both so that a call's cost and its report do not grow with the
repository or with the size of the file it edits:

- `View`: the tree the plan describes (the read-only base's manifest and files with the plan's
  changes over them, or the plan's inline tree), read in place. The tools that run none of the
  repository's code (list, read, search, edit, write, patch) work on it alone: no copy of the
  base, no walk, no hashing. Their edits are checked as the file system would check them (a
  file cannot also be a folder) and kept as the call's new texts.
- `delta`: each changed file reported as one splice of its text before the call (the view's),
  `{"at", "cut", "text", "sha256"}`: the text from `at` with `cut` characters replaced by
  `text` (without `at` and `cut`: the whole text), and the digest of the whole result, which the trusted side checks after applying it
  (families/repository/repo.py `apply_delta`). Editing a line of a 1 MB module reports that
  line, not the module. The report must fit the sandbox's output cap (the plan's
  `report_bytes`): a change that would not fit is not kept and is named in `skipped`.
"""

import hashlib
import json
import os

PYC = (".pyc", ".pyo")
SKIPPED_SHOWN = 100  # skipped files named in a report (the observation shows 10)


def walk_key(rel):
    """os.walk's order as a sort key: names sorted, a folder's files before its subfolders."""
    parts = rel.split("/")
    return [(1, p) for p in parts[:-1]] + [(0, parts[-1])]


def kept(h, rel):
    """Whether the harness keeps `rel` (its walk skips caches and bytecode)."""
    parts = rel.split("/")
    return not (set(parts[:-1]) & h.SKIP_DIRS or parts[-1] in h.SKIP_DIRS or rel.endswith(PYC))


class View:
    """The plan's tree, read in place; `put`/`remove` record a call's edits (`news`)."""

    def __init__(self, h, plan):
        self.h = h
        self.root = os.path.join(plan["base"], "tree") if "base" in plan else None
        manifest = {}
        if self.root:
            with open(os.path.join(plan["base"], "manifest.json"), encoding="utf-8") as f:
                manifest = json.load(f)
        self.manifest = manifest
        self.texts = dict(plan["changes"] if self.root else plan.get("tree") or {})
        self.names = set(manifest)
        for rel, text in self.texts.items():
            (self.names.discard if text is None else self.names.add)(rel)
        self.news = {}  # rel -> the call's new text, or None: deleted
        self._folders = None

    def listed(self):
        return sorted((rel for rel in self.names if kept(self.h, rel)), key=walk_key)

    def folders(self):
        if self._folders is None:
            self._folders = {rel.rsplit("/", i)[0] for rel in self.names for i in range(1, rel.count("/") + 1)}
        return self._folders

    def text(self, rel, limit):
        """(text, problem) of file `rel` as the call sees it: the call's edits, the plan's
        changes, else the base's bytes (read_text's rules and limit)."""
        if rel not in self.names:
            return None, "a folder" if rel in self.folders() else "no such file"
        text = self.news.get(rel, self.texts.get(rel))
        if text is None and rel in self.names and self.root:
            return self.h.read_text(os.path.join(self.root, rel), limit)
        if len(text) > limit:
            return None, f"over {limit} bytes"
        return text, ""

    def before(self, rel):
        """The text of `rel` before the call: "" when it had none, None when it cannot be read
        (the splice then carries the whole new text)."""
        if rel in self.texts:
            return self.texts[rel] or ""
        if self.root and rel in self.manifest:
            path = os.path.join(self.root, rel)
            try:
                return self.h.read_text(path, max(self.h.MAX_FILE, os.lstat(path).st_size))[0]
            except OSError:
                return None
        return ""

    def key(self, path):
        """The tree-relative name of `path` (the harness's `inside` rules), or ValueError."""
        full = self.h.inside(path)
        rel = os.path.relpath(full, self.h.REPO).replace(os.sep, "/")
        if rel == ".":
            raise ValueError(f"{path!r} is the repository's folder, not a file")
        return rel

    def put(self, rel, text):
        """Write `text` to `rel` in the view, as a file system would allow it."""
        if rel in self.folders():
            raise ValueError(f"{rel} is a folder")
        head = rel
        while "/" in head:
            head = head.rpartition("/")[0]
            if head in self.names:
                raise ValueError(f"{rel}: {head} is a file, not a folder")
        if rel not in self.names and self._folders is not None:
            self._folders |= {rel.rsplit("/", i)[0] for i in range(1, rel.count("/") + 1)}
        self.names.add(rel)
        self.news[rel] = text

    def kept(self, rel):
        return kept(self.h, rel)

    def delta(self, news, deleted, skipped, budget):
        return delta(self, news, deleted, skipped, budget)

    def remove(self, rel):
        if rel not in self.names:
            raise ValueError(f"{rel}: no such file")
        self.names.discard(rel)
        self._folders = None
        self.news[rel] = None


def splice(old, new):
    """(at, cut, text): `new` is old[:at] + text + old[at + cut:], the middle as short as a
    common prefix and suffix make it (compared by halving: C-speed slices, not a loop)."""
    n = min(len(old), len(new))
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    at, room = lo, n - lo
    lo, hi = 0, room
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid:] == new[len(new) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    return at, len(old) - at - lo, new[at:len(new) - lo]


def digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def delta(view, news, deleted, skipped, budget):
    """The report's `delta`: {"changed": {rel: splice}, "deleted": [rel], "skipped": {rel: why}}
    for the call's new texts `news` and `deleted` files, within `budget` bytes of JSON (what
    does not fit is skipped, named, smallest changes kept first)."""
    changed, used = {}, len(json.dumps({"deleted": deleted, "skipped": skipped})) + 64
    entries = []
    for rel, text in news.items():
        old = view.before(rel)
        if old is None:  # the whole text, for whatever the trusted side held
            entry = {"text": text, "sha256": digest(text)}
        else:
            at, cut, middle = splice(old, text)
            entry = {"at": at, "cut": cut, "text": middle, "sha256": digest(text)}
        entries.append((len(json.dumps(entry)) + len(json.dumps(rel)) + 4, rel, entry))
    for size, rel, entry in sorted(entries, key=lambda e: (e[0], e[1])):
        if used + size > budget:
            skipped[rel] = f"over the report's size limit ({budget} bytes for one call's changes)"
            continue
        changed[rel], used = entry, used + size
    shown = dict(sorted(skipped.items())[:SKIPPED_SHOWN])
    return {"changed": dict(sorted(changed.items())), "deleted": deleted, "skipped": shown}
