"""Sandbox side of the `shell_state` verifier; runs as `python -I harness.py` with the plan on stdin.

For each variant of the task's files: write them into a fresh directory, run the response's
script there with bash (its own session, output to a log the verdict never reads), kill whatever
it left running, then record the directory's end state without following links. The harness is
non-dumpable, so the script cannot write to its stdout through /proc or read its memory; its one
report line (the plan's `marker`, then JSON), is the only thing the verifier reads. With
`log_bytes` in the plan (a multi-turn `run_shell` call), the report also carries the tail of the
script's output, for the model to read. Standard library only.
"""

import ctypes
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time

MAX_FILE, MAX_ENTRIES = 65536, 500


def write_files(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def read_entry(path):
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return {"type": "symlink", "target": os.readlink(path)}
    if stat.S_ISDIR(st.st_mode):
        return {"type": "dir"}
    if not stat.S_ISREG(st.st_mode):
        return {"type": "other"}
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return {"type": "other"}  # swapped for something else between lstat and open
        data = f.read(MAX_FILE + 1)
    return {"type": "file", "content": data[:MAX_FILE].decode("utf-8", "replace"),
            "truncated": len(data) > MAX_FILE, "sha256": hashlib.sha256(data).hexdigest()}


def snapshot(root):
    entries = {}
    for here, dirs, names in os.walk(root, followlinks=False):
        for name in sorted(dirs + names):
            path = os.path.join(here, name)
            if len(entries) >= MAX_ENTRIES:
                return entries, True
            try:
                entries[os.path.relpath(path, root)] = read_entry(path)
            except OSError as e:
                entries[os.path.relpath(path, root)] = {"type": "error", "error": str(e)}
    return entries, False


def log_tail(number, limit):
    with open(f"log{number}.txt", "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode("utf-8", "replace")


def run_variant(number, files, budget_s):
    root = os.path.abspath(f"variant{number}")
    os.mkdir(root)
    write_files(root, files)
    with open(f"log{number}.txt", "wb") as log:
        proc = subprocess.Popen(["/bin/bash", os.path.abspath("script.sh")], cwd=root,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                close_fds=True, start_new_session=True)
        try:
            code, timed_out = proc.wait(timeout=budget_s), False
        except subprocess.TimeoutExpired:
            code, timed_out = None, True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # background jobs it left: stop them writing
        except OSError:
            pass
        proc.wait()
    entries, capped = snapshot(root)
    return {"exit_code": code, "timed_out": timed_out, "files": entries, "capped": capped}


def main():
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, before the script exists
    plan = json.loads(sys.stdin.read())
    with open("script.sh", "w", encoding="utf-8") as f:
        f.write(plan["script"])
    budget = plan["budget_s"] / max(1, len(plan["variants"]))
    start, variants = time.monotonic(), []
    for number, files in enumerate(plan["variants"]):
        variants.append(run_variant(number, files, budget))
        if plan.get("log_bytes"):  # a multi-turn run_shell call: the model reads its output
            variants[-1]["log"] = log_tail(number, plan["log_bytes"])
    report = {"variants": variants, "wall_s": round(time.monotonic() - start, 4)}
    sys.stdout.write("\n" + plan["marker"] + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
