"""The answer's diff applied as SWE-bench 5.x applies a model's patch (the `score` mode's first
step; repo_checks.py loads it after the harness registered itself as `harness`).

swebench/harness/run_evaluation.py (5.0.2) tries, in order, `git apply --verbose`,
`git apply --verbose --3way`, `git apply --verbose --reject` and
`patch --batch --forward --fuzz=5 -p1 -i`, each later try from the pristine tree, and when all
fail counts the patch applied if `git apply --check --reverse` says the chain left it applied.
Here the same commands run where the sandbox has them (`APPLIERS`), with the same resets;
`--3way` is skipped (it needs a git repository and the tree is not one). git runs outside any
repository (GIT_CEILING_DIRECTORIES above the tree, no system or global config, no `.git` in the
tree), so no configuration, attribute or hook of anyone's is read. Where the sandbox has neither
git nor patch (a minimal image), the project's own applier (unified_diff.py) applies the diff.
`Pristine` holds the snapshot's bytes (the read-only base mount, or a copy of an inline tree):
the resets between tries, and the test tree put back after the answer (repo_checks.py).

Standard library only.
"""

import os
import shutil
import subprocess
import sys

h = sys.modules["harness"]
TOOL_PATH = "/usr/local/bin:/usr/bin:/bin"
GIT_APPLY = ("git apply", ["apply", "--verbose"])
GIT_REJECT = ("git apply --reject", ["apply", "--verbose", "--reject"])
PATCH = ("patch --fuzz", ["--batch", "--forward", "--fuzz=5", "-p1", "-i"])
OUTPUT_CHARS = 1500


def tools():
    """{"git": path, "patch": path} of the tools the sandbox has (git only when the tree holds no
    `.git`: git would read it)."""
    found = {name: shutil.which(name, path=TOOL_PATH) for name in ("git", "patch")}
    if os.path.lexists(os.path.join(h.REPO, ".git")):
        found["git"] = None
    return {name: path for name, path in found.items() if path}


def tool_env():
    scratch = h.SCRATCH
    os.makedirs(scratch, exist_ok=True)
    return {"PATH": TOOL_PATH, "HOME": scratch, "TMPDIR": scratch, "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1",
            "GIT_CEILING_DIRECTORIES": os.path.dirname(h.REPO), "GIT_TERMINAL_PROMPT": "0"}


def run(argv, budget_s):
    """(exit code, output tail): a tool on the tree; None on timeout."""
    try:
        done = subprocess.run(argv, cwd=h.REPO, env=tool_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=max(1.0, budget_s), close_fds=True)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    except OSError as e:
        return 127, str(e)
    return done.returncode, done.stdout.decode("utf-8", "replace")[-OUTPUT_CHARS:]


def attempts(found, path):
    """[(name, argv)] of the chain's commands this sandbox can run, in SWE-bench's order."""
    out = []
    if "git" in found:
        out += [(name, [found["git"], *args, path]) for name, args in (GIT_APPLY, GIT_REJECT)]
    if "patch" in found:
        out.append((PATCH[0], [found["patch"], *PATCH[1], path]))
    return out


def apply(patch, budget_s, reset, own):
    """Apply the diff text `patch` to the tree: (applied, which applier, its output). `reset()`
    puts the tree back as it was before (between tries); `own()` applies it with unified_diff.py
    and raises ValueError when it does not apply (used only where no tool is found)."""
    found = tools()
    chain = attempts(found, os.path.join(os.path.dirname(h.REPO), ".flywheel", "answer.diff"))
    if not chain:
        try:
            own()
        except (ValueError, TypeError) as e:
            return False, "flywheel", str(e)[:OUTPUT_CHARS]
        return True, "flywheel", ""
    path = chain[0][1][-1]
    with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
        f.write(patch)
    per_try = budget_s / (len(chain) + 1)
    output = ""
    for n, (name, argv) in enumerate(chain):
        if n:
            reset()
        code, output = run(argv, per_try)
        if code == 0:
            return True, name, output
    if "git" in found:  # the chain may have left it applied while each command exited non-zero
        code, _ = run([found["git"], "apply", "--check", "--reverse", path], per_try)
        if code == 0:
            return True, "already applied (git apply --check --reverse)", output
    return False, chain[-1][0], output


def read_bytes(path, limit=1 << 26):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    with open(path, "wb") as f:
        f.write(data)


class Pristine:
    """The snapshot's own bytes of the tree's files, to put a file back: the read-only base
    mount's copy (a stored snapshot), else a copy read before the answer touched the tree (an
    inline snapshot, small by nature)."""

    def __init__(self, plan, before):
        self.before = before
        self.base = os.path.join(plan["base"], "tree") if plan.get("base") else None
        self.saved = {} if self.base else {rel: read_bytes(os.path.join(h.REPO, rel))
                                           for rel, entry in before.items() if entry[0] == "file"}

    def restore(self, rel):
        """Put `rel` back as the snapshot has it (removed when the snapshot has none)."""
        entry = self.before.get(rel)
        try:
            full = h.inside(rel)
        except ValueError:
            return
        if entry is None or entry[0] not in ("file", "link"):
            if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
                os.unlink(full)
        elif entry[0] == "link":
            if os.path.lexists(full):
                os.unlink(full)
            os.symlink(entry[1], full)
        else:
            write_bytes(full, self.saved[rel] if self.base is None else
                        read_bytes(os.path.join(self.base, rel)))

    def reset(self, known):
        """The whole tree back as the snapshot has it (between the apply chain's tries)."""
        now = h.walk(h.REPO, known)
        for rel in sorted(set(now) | set(self.before)):
            if now.get(rel) != self.before.get(rel):
                self.restore(rel)


def apply_answer(ud, plan, known, pristine):
    """Apply the answer's diff (`plan["patch"]`) to the tree as SWE-bench does: (None, which
    applier) or (why it does not apply, which applier). A blank answer changes nothing."""
    patch = plan.get("patch") or ""
    if not patch.strip():
        return None, ""  # no change: nothing to apply, the checks run on the snapshot

    applied, applier, output = apply(patch, max(5.0, plan["budget_s"] * 0.15),
                                     lambda: pristine.reset(known), lambda: apply_own(ud, patch))
    return (None if applied else (output.strip() or "the patch does not apply")), applier


def apply_own(ud, patch):
    """Apply `patch` to the tree with our own applier (unified_diff.py); ValueError, TypeError
    or OSError when it does not apply."""
    files = {}
    for rel in ud.changed_paths(patch):
        full = h.inside(rel)
        if os.path.isfile(full):
            files[rel] = h.read_text(full, 1 << 24)[0]
    for rel, text in ud.apply_diff(files, patch).items():
        if text is None:
            os.unlink(h.inside(rel))
        else:
            h.write(h.inside(rel), text)
