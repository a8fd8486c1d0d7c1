"""Sandbox side of the `render` verifier: `python -I harness.py ROUTE BUDGET_S`, plan on stdin.

Renders the response's code (solution.py) and the task's reference code, and prints one report
line (the plan's `marker`, then JSON) with each one's attributes and a small PNG (and those of
the plan's `source_code`, the program an edit task starts from, when it has one). Routes:
`matplotlib` (the figure's own artists), `svg` (the code prints an SVG document or writes
out.svg; parsed and drawn by render_draw.py) and `scene3d` (the code calls scene3d.py's
primitives; drawn by render_draw.py with matplotlib's 3D axes). A figure is read by render_figure.py.
Agg only, nothing interactive.

Who may see what: the solution's process is forked before the plan (the reference code) is read,
waits on a pipe, and starts only once the reference's render is done and its private folder is
gone; this process is non-dumpable, so the solution cannot read the plan or the reference's
result out of its memory or its stdin. What the solution's process reports is untrusted data:
the verifier bounds it and compares it with the reference's. SVG text and scene primitives are
parsed and drawn here, in a fresh fork of this process, never where the solution ran.
"""

import ctypes
import io
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time

ENV_MOUNT = "/opt/flywheel-env"
sys.path.insert(0, ENV_MOUNT)  # the render environment: matplotlib, numpy, Pillow
sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # render_draw, scene3d (-I leaves them out)
os.environ.setdefault("MPLCONFIGDIR", os.path.join(tempfile.gettempdir(), ".matplotlib"))
FONT_CACHE = os.path.join(ENV_MOUNT, ".flywheel-mplconfig")  # render_environment.py's font_cache
LIBRARIES = os.path.join(ENV_MOUNT, ".flywheel-libs")        # ... and runtime_libraries

MAX_RESULT = 1 << 20     # bytes a child may send back
MAX_CAPTURED = 1 << 20   # characters of stdout the code may print (an SVG document)
MAX_REPORT_PART = 200_000  # bytes of one render's part of the report (the sandbox keeps 512 KB)
MAX_TEXT = 200           # characters kept per text


def clip_text(value):
    return str(value)[:MAX_TEXT]


class Captured(io.TextIOBase):
    """A bounded stdout for the code: what it prints, up to MAX_CAPTURED characters."""

    def __init__(self):
        self.parts, self.size = [], 0

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        if self.size < MAX_CAPTURED:
            self.parts.append(text[:MAX_CAPTURED - self.size])
            self.size += len(self.parts[-1])
        return len(text)

    def value(self):
        return "".join(self.parts)


# ------------------------------------------------------------------ running code in a child
def fork_child(work, go=False, close=()):
    """Fork a child that runs `work()` and sends its JSON result on a pipe: (pid, result fd,
    go fd or None). With `go`, the child first waits for a byte on its go pipe (or its end).
    The child closes the fds `close` first (another child's go pipe)."""
    result_r, result_w = os.pipe()
    go_r, go_w = os.pipe() if go else (None, None)
    pid = os.fork()
    if pid == 0:
        data = b""
        try:
            for fd in close:
                os.close(fd)
            os.close(result_r)
            if go_w is not None:
                os.close(go_w)
            os.setpgid(0, 0)  # its own group: whatever the code starts dies with it
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            if go_r is not None:
                if os.read(go_r, 1) != b"1":
                    os._exit(0)
                os.close(go_r)
            data = json.dumps(work()).encode()
        except BaseException as e:
            data = json.dumps({"error": clip_text(f"{type(e).__name__}: {e}")}).encode()
        finally:
            while data:
                data = data[os.write(result_w, data):]
            os._exit(0)
    os.close(result_w)
    if go_r is not None:
        os.close(go_r)
    return pid, result_r, go_w


def collect(pid, fd, deadline):
    """The child's result (a dict), read until its end or `deadline`; the child then killed."""
    data = b""
    try:
        while (remaining := deadline - time.monotonic()) > 0 and len(data) <= MAX_RESULT:
            if not select.select([fd], [], [], remaining)[0]:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os.waitpid(pid, 0)
    if time.monotonic() >= deadline:
        return {"error": "timed out"}
    if len(data) > MAX_RESULT:
        return {"error": "the result is too large"}
    try:
        result = json.loads(data) if data else {"error": "the program ended without a result"}
    except (ValueError, RecursionError):
        return {"error": "the result is unreadable"}
    return result if isinstance(result, dict) else {"error": "the result is not an object"}


def run_source(source, filename, route):
    """Run the code like a script (SystemExit ends it, as it would), then read what it drew:
    the raw output of its route ({"svg": text} or {"primitives": [...]}, drawn later) or, for
    matplotlib, its figure's attributes and raster."""
    import matplotlib.pyplot as plt
    import scene3d
    from render_figure import class_snapshot, describe_figure, patched_classes, remember_figures
    figures = remember_figures()
    snapshot = class_snapshot()
    captured = Captured()
    sys.stdout = captured
    error = None
    try:
        code = compile(source, filename, "exec")
        exec(code, {"__name__": "__main__", "__file__": filename, "__builtins__": __builtins__})
    except SystemExit:
        pass
    except BaseException as e:
        error = clip_text(f"{type(e).__name__}: {e}")
    sys.stdout = sys.__stdout__
    if error:
        return {"error": error}
    if route == "svg":
        text = captured.value()
        if os.path.isfile("out.svg"):
            with open("out.svg", encoding="utf-8", errors="replace") as f:
                text = f.read(MAX_CAPTURED)
        return {"svg": text}
    if route == "scene3d":
        return {"primitives": list(scene3d.PRIMITIVES)[:1000]}
    figure = figures[-1] if figures else (plt.gcf() if plt.get_fignums() else None)
    if figure is None:
        return {"error": "the code drew no figure"}
    result = describe_figure(figure)
    result["signals"] = sorted(set(result.get("signals", [])) | patched_classes(snapshot))
    return result


def reference_work(plan, key="reference_code"):
    """A trusted program's run (the reference, or an edit task's source), in a private folder
    that is gone before the solution starts."""
    def work():
        folder = tempfile.mkdtemp(prefix=".reference-")
        os.chdir(folder)
        return run_source(plan[key], "reference.py", plan["route"])
    return work


def solution_work(route):
    def work():
        with open("solution.py", encoding="utf-8", errors="replace") as f:
            source = f.read()
        return run_source(source, "solution.py", route)
    return work


def drawn(raw, plan):
    """What an SVG document or a primitives list looks like: attributes and PNG (render_draw)."""
    import render_draw
    from render_figure import preview
    if plan["route"] == "svg":
        return render_draw.svg_render(raw.get("svg") or "", preview)
    return render_draw.scene_render(raw.get("primitives"), plan.get("bounds"), preview)


def render(raw, plan, deadline, go=None):
    """The solution's or the reference's result, drawn here (in a fork) when it is data; the
    fork closes `go` (the solution's go pipe) first."""
    if "error" in raw or plan["route"] == "matplotlib":
        return raw
    pid, fd, _ = fork_child(lambda: drawn(raw, plan), close=[go] if go is not None else [])
    return collect(pid, fd, deadline)


def bounded_json(report):
    """The report as JSON, each render's part at most MAX_REPORT_PART bytes (else its error)."""
    parts = {}
    for name, part in report.items():
        try:
            text = json.dumps(part)
        except (ValueError, TypeError, RecursionError):
            text = None
        if text is None or len(text) > MAX_REPORT_PART:
            text = json.dumps({"error": "the render's description is too large or unreadable"})
        parts[name] = text
    return "{" + ", ".join(f"{json.dumps(name)}: {text}" for name, text in parts.items()) + "}"


def main():
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc reading of this process
    route, budget = sys.argv[1], float(sys.argv[2])
    for name in ("libpthread.so.0", "libdl.so.2", "libgcc_s.so.1", "libstdc++.so.6"):  # for images without them
        if os.path.isfile(os.path.join(LIBRARIES, name)):
            try:
                ctypes.CDLL(os.path.join(LIBRARIES, name), mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass
    if os.path.isdir(FONT_CACHE):  # the font list built with the environment: no font scan here
        os.makedirs(os.environ["MPLCONFIGDIR"], exist_ok=True)
        for name in os.listdir(FONT_CACHE):
            shutil.copy(os.path.join(FONT_CACHE, name), os.environ["MPLCONFIGDIR"])
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401  (imported once, before the forks)
        import numpy  # noqa: F401
        import PIL.Image  # noqa: F401
        import render_draw  # noqa: F401
        import render_figure  # noqa: F401
        import scene3d  # noqa: F401
        environment = None
    except Exception as e:  # the render environment is not mounted: say so, render nothing
        environment = clip_text(f"{type(e).__name__}: {e}")
    solution = fork_child(solution_work(route), go=True) if environment is None else None
    plan = json.loads(sys.stdin.read())
    sys.stdin.close()
    if environment is not None:
        report = {"environment_error": environment}
    else:  # the budget starts after the imports: half for the reference, the rest for the response
        half = time.monotonic() + budget / 2
        go = solution[2]
        pid, fd, _ = fork_child(reference_work(plan), close=[go])
        reference = render(collect(pid, fd, half), plan, time.monotonic() + 2.0, go)
        report = {"reference": reference}
        if plan.get("source_code"):  # an edit task: the program before the edit, drawn the same way
            pid, fd, _ = fork_child(reference_work(plan, "source_code"), close=[go])
            report["source"] = render(collect(pid, fd, time.monotonic() + budget / 4), plan, time.monotonic() + 2.0, go)
        for folder in [f for f in os.listdir(tempfile.gettempdir()) if f.startswith(".reference-")]:
            shutil.rmtree(os.path.join(tempfile.gettempdir(), folder), ignore_errors=True)
        pid, fd, _ = solution
        deadline = time.monotonic() + budget / 2
        os.write(go, b"1")
        os.close(go)
        response = render(collect(pid, fd, deadline), plan, time.monotonic() + 2.0)
        report["response"] = response
    sys.stdout.write("\n" + plan["marker"] + bounded_json(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
