"""Sandbox side of the `harbor` domain; runs as `python -I harness.py` with the plan on stdin.

The container's paths live in the sandbox's work dir (ROOT, the harness's cwd): the task's
working directory (/app) at ROOT/app, /tests, /solution and /logs at ROOT/tests, ROOT/solution
and ROOT/logs; every script run here has those absolute paths rewritten (`mapped`), since the
sandbox's root file system is read-only.

1. The working directory is laid out: the task's files (plan `app`, `app_b64`), or the image's
   own working directory copied (plan `image_workdir`, a task built from its Dockerfile).
2. The agent's commands run as one bash script in ROOT/app (`before`: earlier turns, output
   discarded; `now`: this turn, its output kept for the model), then every process they left
   is killed.
3. Verification (plan `tests`), as Harbor does it after the agent's turn ends: everything in
   ROOT but app/ is deleted (an agent's /logs/verifier/reward.txt, /tests, a planted home), the
   tests are written (they were only ever in this process's memory: its stdin, and it is not
   dumpable), and `bash /tests/test.sh` runs in a clean environment (system PATH, a fresh HOME,
   no user site-packages); then its /logs/verifier/reward.json and reward.txt are read, as text,
   for the trusted side to judge.
The one report line (the plan's `marker`, then JSON) is the only thing the domain reads.
Standard library only.
"""

import base64
import ctypes
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

ROOT = os.getcwd()
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REWARD_BYTES = 4096


def mapped(text, prefixes):
    """`text` with each container path (/app, /tests, ...) as a path prefix rewritten into ROOT."""
    for prefix, here in prefixes.items():
        text = re.sub(r"(?<![\w./-])" + re.escape(prefix) + r"(?=$|[/\s'\"`;:)|&<>}])",
                      os.path.join(ROOT, here), text, flags=re.M)
    return text


def write_tree(root, texts, b64=None, prefixes=None):
    for rel, text in texts.items():
        data = (mapped(text, prefixes) if prefixes else text).encode("utf-8", "surrogatepass")
        _write(root, rel, data)
    for rel, data in (b64 or {}).items():
        _write(root, rel, base64.b64decode(data))


def _write(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if data.startswith(b"#!"):
        os.chmod(path, 0o755)


def ancestors():
    """This process and its ancestors: the processes kill_others must spare."""
    keep, pid = set(), os.getpid()
    while pid > 0 and pid not in keep:
        keep.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return keep


def kill_others():
    """SIGKILL every process of the run but the harness and its ancestors, until none is left
    (a daemon the agent started with setsid escapes a process-group kill, not this)."""
    keep = ancestors()
    for _ in range(100):
        found = False
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in keep:
                try:
                    os.kill(int(name), signal.SIGKILL)
                    found = True
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.01)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def run_bash(script_path, cwd, env, budget_s, log_path):
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["/bin/bash", script_path], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                close_fds=True, start_new_session=True)
        try:
            code, timed_out = proc.wait(timeout=max(0.1, budget_s)), False
        except subprocess.TimeoutExpired:
            code, timed_out = None, True
    kill_others()
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pass
    return code, timed_out


def tail(path, limit):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def remove(path):
    def unlock(func, where, _):
        try:
            os.chmod(os.path.dirname(where), 0o700)
            os.chmod(where, 0o700)
        except OSError:
            pass
        func(where)
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        os.chmod(path, 0o700)
        shutil.rmtree(path, onerror=unlock)


def read_reward(path):
    """The file's first REWARD_BYTES as text (None: absent), never through a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, False
    except OSError as e:
        return f"<unreadable: {e.strerror}>", False
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "<not a regular file>", False
        data = f.read(REWARD_BYTES + 1)
    return data[:REWARD_BYTES].decode("utf-8", "replace"), len(data) > REWARD_BYTES


def verify(plan, prefixes):
    for name in os.listdir(ROOT):
        if name != "app" or os.path.islink(os.path.join(ROOT, name)):
            remove(os.path.join(ROOT, name))
    os.makedirs(os.path.join(ROOT, "app"), exist_ok=True)
    write_tree(os.path.join(ROOT, "tests"), plan["tests"], plan.get("tests_b64"), prefixes)
    for folder in ("logs/verifier", "verifier-home"):
        os.makedirs(os.path.join(ROOT, folder))
    env = {**{k: mapped(v, prefixes) for k, v in plan.get("verifier_env", {}).items()},
           "PATH": SYSTEM_PATH, "HOME": os.path.join(ROOT, "verifier-home"), "LANG": "C.UTF-8",
           "TMPDIR": os.path.join(ROOT, "verifier-home"), "PYTHONNOUSERSITE": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    log = os.path.join(ROOT, "verifier-home", ".test.log")
    code, timed_out = run_bash(os.path.join(ROOT, "tests", "test.sh"), os.path.join(ROOT, "app"),
                               env, plan["verifier_budget_s"], log)
    reward_json, json_big = read_reward(os.path.join(ROOT, "logs", "verifier", "reward.json"))
    reward_txt, txt_big = read_reward(os.path.join(ROOT, "logs", "verifier", "reward.txt"))
    return {"exit_code": code, "timed_out": timed_out, "log": tail(log, 1500),
            "reward_json": reward_json, "reward_txt": reward_txt, "too_big": json_big or txt_big}


def main():
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, before any agent command exists
    plan = json.loads(sys.stdin.read())
    prefixes = plan["prefixes"]
    app = os.path.join(ROOT, "app")
    report = {}
    if plan.get("image_workdir"):
        if not os.path.isdir(plan["image_workdir"]):
            report["environment_error"] = (
                f"this task needs its image ({plan.get('needs_image')}); its working directory "
                f"{plan['image_workdir']} is not here: run it with the docker sandbox")
        else:
            shutil.copytree(plan["image_workdir"], app, symlinks=True, dirs_exist_ok=True)
    os.makedirs(app, exist_ok=True)
    if "environment_error" not in report:
        write_tree(app, plan.get("app", {}), plan.get("app_b64"))
        write_tree(os.path.join(ROOT, "solution"), plan.get("solution", {}),
                   plan.get("solution_b64"), prefixes)
        os.makedirs(os.path.join(ROOT, "home"), exist_ok=True)
        script = os.path.join(ROOT, ".agent.sh")
        log = os.path.join(ROOT, ".agent.log")
        with open(script, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(mapped(plan.get("before", ""), prefixes) + "\n")
            if plan.get("now") is not None:
                f.write(f'exec >"{log}" 2>&1\n' + mapped(plan["now"], prefixes) + "\n")
        env = {**{k: mapped(v, prefixes) for k, v in plan.get("env", {}).items()},
               "PATH": SYSTEM_PATH, "HOME": os.path.join(ROOT, "home"), "LANG": "C.UTF-8",
               "TMPDIR": ROOT, "PYTHONDONTWRITEBYTECODE": "1"}
        start = time.monotonic()
        code, timed_out = run_bash(script, app, env, plan["budget_s"], os.devnull)
        report["agent"] = {"exit_code": code, "timed_out": timed_out,
                           "wall_s": round(time.monotonic() - start, 3)}
        if plan.get("now") is not None:
            report["agent"]["log"] = tail(log, plan.get("log_bytes", 2000))
        if plan.get("tests") is not None:
            report["verifier"] = verify(plan, prefixes)
    sys.stdout.write("\n" + plan["marker"] + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
