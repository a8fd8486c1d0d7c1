"""The `render` environment: matplotlib, numpy and Pillow for the render domains' sandbox runs.

The render harness (families/render/harnesses/render.py) draws with matplotlib inside the sandbox, whose
interpreter may have none (the local backend runs the system Python as an unprivileged uid). So
the render domains mount an environment (domains/environments.py), `render` by default:

    flywheel env build render --requirements <(printf 'matplotlib\\nnumpy\\npillow\\n')

or, offline on a machine whose own Python has them, `copy_installed("render")` lays the installed
distributions out as `pip install --target` would (same Python minor version as the sandbox's),
with matplotlib's font list prebuilt (font_cache) and the C++ runtime (runtime_libraries).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from flywheel.domains.environments import ENV_MOUNT, environment_dir

ENVIRONMENT = "render"
REQUIREMENTS = ("matplotlib", "numpy", "pillow")
FONT_CACHE = ".flywheel-mplconfig"  # matplotlib's font list, for the harness (font_cache)
LIBRARIES = ".flywheel-libs"        # the C++ runtime, for images without it (runtime_libraries)
RUNTIME = ("libpthread.so.0", "libdl.so.2", "libgcc_s.so.1", "libstdc++.so.6")  # in load order
_EXTRA = re.compile(r";\s*extra\s*==", re.I)


def _closure(names) -> list[metadata.Distribution]:
    """The installed distributions `names` and what they require (extras left out)."""
    found, todo = {}, list(names)
    while todo:
        name = re.split(r"[\s<>=!~;\[(]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if not name or name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional or platform-only requirement
        found[name] = dist
        todo += [r for r in dist.requires or [] if not _EXTRA.search(r)]
    return list(found.values())


def copy_installed(name: str = ENVIRONMENT, requirements=REQUIREMENTS) -> str:
    """Environment `name` made from this interpreter's installed `requirements` (and their
    dependencies), readable by every uid; its folder. Kept as it is when already complete."""
    target = Path(environment_dir(name))
    marker = target / ".flywheel-copied"
    if marker.exists():
        return str(target)
    target.mkdir(parents=True, exist_ok=True)
    for dist in _closure(requirements):
        for file in dist.files or []:
            if "__pycache__" in file.parts or str(file).startswith(".."):
                continue
            source, dest = Path(dist.locate_file(file)), target / file
            if source.is_file():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)
    for here, _, files in os.walk(target):
        os.chmod(here, 0o755)
        for entry in files:
            os.chmod(os.path.join(here, entry), 0o644)
    font_cache(target)
    runtime_libraries(target)
    marker.write_text("\n".join(requirements) + "\n")
    return str(target)


def font_cache(target: Path) -> None:
    """matplotlib's font list, built once here with the environment's own paths rewritten to
    where the sandbox mounts it: the harness copies it into its fresh config folder, which saves
    every run the font scan (about half a second). Without it, each run scans."""
    cache = target / FONT_CACHE
    cache.mkdir(exist_ok=True)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import matplotlib; matplotlib.use('Agg'); "
            "import matplotlib.font_manager")
    subprocess.run([sys.executable, "-I", "-c", code, str(target)], env={**os.environ, "MPLCONFIGDIR": str(cache)},
                   capture_output=True, timeout=300, check=True)
    for path in cache.glob("fontlist-*.json"):
        path.write_text(path.read_text().replace(str(target), ENV_MOUNT))
    for entry in cache.iterdir():
        if not entry.name.startswith("fontlist-"):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
    os.chmod(cache, 0o755)
    for entry in cache.iterdir():
        os.chmod(entry, 0o644)


def runtime_libraries(target: Path) -> None:
    """This machine's C++ runtime (and the libpthread and libdl stubs) beside the packages: the
    extensions of numpy, matplotlib and kiwisolver need them, and a minimal sandbox image (the
    docker backend's) lacks them. The harness loads these first, by path; the extensions then
    find them already loaded by their names."""
    folder = target / LIBRARIES
    folder.mkdir(exist_ok=True)
    for name in RUNTIME:
        for base in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
            if os.path.isfile(os.path.join(base, name)):
                shutil.copy(os.path.realpath(os.path.join(base, name)), folder / name)
                os.chmod(folder / name, 0o644)
                break
    os.chmod(folder, 0o755)
