"""A repository's own package made importable in its sandbox, without network and without pip:
what SWE-bench gets from `pip install -e .`, decided from what the project declares.

From the snapshot's `pyproject.toml`, `setup.cfg` and `setup.py` (read as text: nothing of the
repository runs on this machine) `install_plan` decides
- the import roots: the folders that hold the top-level packages, relative to the repository
  (`src` for a src layout; none for a flat layout, whose root is on sys.path already), from
  setuptools' `package-dir`/`packages.find where` (pyproject, setup.cfg, or setup.py's literal
  `package_dir=`/`find_packages(where=)`), hatch's wheel `packages`/`sources`, flit's module,
  pdm-backend's `package-dir`, poetry's `packages = [{include, from}]`, else each backend's
  default (a `src/` folder holding a package: the src layout; else flat);
- the distribution's name, version (static, or `__version__` of the package's own files, else
  0+unknown) and top-level names, written as a `NAME-VERSION.dist-info` (METADATA,
  top_level.txt, INSTALLER), so `importlib.metadata.version(NAME)` answers as after an install.

`site_folder` writes that once per machine (content-addressed: one folder per plan, whatever
the snapshot's other files) under the snapshot cache, read-only for the sandbox's uid, and every
call of the task mounts it at SITE_MOUNT; the harness (harnesses/repo.py `env_paths`) reads its
`install.json` and puts the site folder and the import roots (inside the call's own copy of the
tree, so the model's edits are what is imported) after the environment on every child's
sys.path and on shell commands' PYTHONPATH. The site folder holds metadata only, never code.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading

try:
    import tomllib
except ImportError:  # Python 3.10: pyproject.toml is not read; setup.cfg and setup.py still are
    tomllib = None

SITE_MOUNT = "/opt/flywheel-site"  # where a call's sandbox sees the site folder
MARKERS = ("pyproject.toml", "setup.cfg", "setup.py")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
_VERSION = re.compile(r"[A-Za-z0-9.+!_-]{1,64}")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VERSION_LINE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"\n]{1,64})['"]""", re.M)
NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks",
                "scripts", "tools", "build", "dist", "setup", "conftest", "noxfile", "tasks"}
_plans: dict[str, dict | None] = {}
_written: set[str] = set()
_lock = threading.Lock()


def install_plan(files: dict[str, str], digest: str | None = None) -> dict | None:
    """{"name", "version", "roots", "top_level"} for a snapshot that declares a package, else
    None. Cached per snapshot digest (or per the packaging files' text for an inline one)."""
    key = digest or hashlib.sha256(json.dumps([files.get(m) for m in MARKERS]).encode()
                                   + "\n".join(sorted(p for p in files if p.count("/") <= 2)).encode()).hexdigest()
    with _lock:
        if key in _plans:
            return _plans[key]
    plan = _decide(files) if any(m in files for m in MARKERS) else None
    with _lock:
        _plans[key] = plan
    return plan


def _decide(files: dict[str, str]) -> dict | None:
    project, declared = _declared(files)
    roots = list(dict.fromkeys(r for r in map(lambda r: _root(r, files), declared.get("roots") or [])
                               if r is not None))
    if not roots:  # each backend's default: a src/ folder holding a package is a src layout
        roots = ["src"] if any(p.startswith("src/") and _top(p[4:]) for p in files) else [""]
    top = sorted({name for root in roots for name in _tops(files, root)}
                 | {n for n in declared.get("top_level") or [] if _IDENT.fullmatch(n)})
    name = project.get("name") if isinstance(project.get("name"), str) else None
    name = name if name and _NAME.fullmatch(name) else (top[0] if top else None)
    if name is None:
        return None
    version = project.get("version")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        version = _found_version(files, roots, top)
    return {"name": name, "version": version, "roots": [r for r in roots if r], "top_level": top}


def _declared(files: dict[str, str]) -> tuple[dict, dict]:
    """(project metadata {"name", "version"}, {"roots": [...], "top_level": [...]}) as the
    packaging files state them: pyproject.toml first, then setup.cfg, then setup.py."""
    project, layout = {}, {"roots": [], "top_level": []}
    data = _toml(files.get("pyproject.toml"))
    meta = data.get("project") if isinstance(data.get("project"), dict) else {}
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    poetry = tool.get("poetry") if isinstance(tool.get("poetry"), dict) else {}
    project.update({k: meta.get(k) or poetry.get(k) for k in ("name", "version")})
    setuptools = tool.get("setuptools") if isinstance(tool.get("setuptools"), dict) else {}
    layout["roots"] += _package_dir(setuptools.get("package-dir"))
    packages = setuptools.get("packages")
    if isinstance(packages, dict) and isinstance(packages.get("find"), dict):
        where = packages["find"].get("where")
        layout["roots"] += [w for w in (where if isinstance(where, list) else [where]) if isinstance(w, str)]
    elif isinstance(packages, list):
        layout["top_level"] += [p.split(".")[0] for p in packages if isinstance(p, str)]
    hatch = _dig(tool, "hatch", "build", "targets", "wheel")
    for path in hatch.get("packages") or [] if isinstance(hatch.get("packages"), list) else []:
        if isinstance(path, str):
            head, _, base = path.strip("/").rpartition("/")
            layout["roots"].append(head)
            layout["top_level"].append(base)
    sources = hatch.get("sources") or _dig(tool, "hatch", "build").get("sources")
    if isinstance(sources, list):
        layout["roots"] += [s for s in sources if isinstance(s, str)]
    elif isinstance(sources, dict):
        layout["roots"] += [k for k, v in sources.items() if v in ("", "/")]
    module = _dig(tool, "flit", "module").get("name")
    if isinstance(module, str):
        layout["top_level"].append(module.split(".")[0])
    pdm_dir = _dig(tool, "pdm", "build").get("package-dir")
    if isinstance(pdm_dir, str):
        layout["roots"].append(pdm_dir)
    for entry in poetry.get("packages") or [] if isinstance(poetry.get("packages"), list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("include"), str):
            layout["roots"].append(entry.get("from") if isinstance(entry.get("from"), str) else "")
            layout["top_level"].append(entry["include"].split("/")[0].removesuffix(".py"))
    cfg = _cfg(files.get("setup.cfg"))
    if cfg is not None:
        for key in ("name", "version"):
            if not project.get(key) and cfg.has_option("metadata", key):
                project[key] = cfg.get("metadata", key).strip()
        if cfg.has_option("options", "package_dir"):
            layout["roots"] += _package_dir(_cfg_map(cfg.get("options", "package_dir")))
        if cfg.has_option("options.packages.find", "where"):
            layout["roots"] += cfg.get("options.packages.find", "where").split()
    call = _setup_call(files.get("setup.py"))
    for key in ("name", "version"):
        if not project.get(key) and isinstance(call.get(key), str):
            project[key] = call[key]
    layout["roots"] += _package_dir(call.get("package_dir")) + list(call.get("where") or [])
    return project, layout


def _toml(text: str | None) -> dict:
    if not text or tomllib is None:
        return {}
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError):
        return {}


def _cfg(text: str | None):
    if not text:
        return None
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _cfg_map(value: str) -> dict:
    """setup.cfg's `package_dir` (`=src`, or lines of `name = dir`) as a dict."""
    out = {}
    for line in value.strip().splitlines():
        key, _, folder = line.partition("=")
        out[key.strip()] = folder.strip()
    return out


def _dig(table: dict, *keys: str) -> dict:
    for key in keys:
        table = table.get(key) if isinstance(table, dict) else None
    return table if isinstance(table, dict) else {}


def _package_dir(value) -> list[str]:
    """The root of a setuptools `package_dir`: its "" entry (`{"": "src"}`), else the parent
    folder of each package's own entry (`{"pkg": "lib/pkg"}` -> lib)."""
    if not isinstance(value, dict):
        return []
    if isinstance(value.get(""), str):
        return [value[""]]
    return [v.rstrip("/").rpartition("/")[0] for k, v in value.items()
            if isinstance(v, str) and isinstance(k, str) and v.rstrip("/").endswith(k.split(".")[-1])]


def _setup_call(text: str | None) -> dict:
    """The literal keywords of setup.py's `setup(...)` call (name, version, package_dir) and the
    `where` of a `find_packages(...)`/`find_namespace_packages(...)` in it; parsed, never run."""
    if not text:
        return {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict = {"where": []}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if called == "setup":
            for kw in node.keywords:
                if kw.arg in ("name", "version", "package_dir"):
                    try:
                        found[kw.arg] = ast.literal_eval(kw.value)
                    except (ValueError, TypeError, SyntaxError, RecursionError):
                        pass
        elif called in ("find_packages", "find_namespace_packages"):
            where = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "where"), None)
            if isinstance(where, ast.Constant) and isinstance(where.value, str):
                found["where"].append(where.value)
    return found


def _root(root, files: dict[str, str]) -> str | None:
    """`root` as a plain relative folder of the snapshot holding a Python file ("" for the
    repository's own root), or None when it is not one."""
    if not isinstance(root, str):
        return None
    root = root.strip().removeprefix("./").strip("/")
    if root in ("", "."):
        return ""
    parts = root.split("/")
    if any(p in ("", ".", "..") or not re.fullmatch(r"[\w.-]+", p) for p in parts):
        return None
    return root if any(p.startswith(root + "/") and p.endswith(".py") for p in files) else None


def _top(rel: str) -> str | None:
    """The top-level importable name that `rel` (a path under an import root) belongs to."""
    head, _, rest = rel.partition("/")
    if rest:
        return head if rest.endswith(".py") and _IDENT.fullmatch(head) and head not in NOT_PACKAGES else None
    name = head.removesuffix(".py")
    return name if head.endswith(".py") and _IDENT.fullmatch(name) and name not in NOT_PACKAGES else None


def _tops(files: dict[str, str], root: str) -> set[str]:
    """The packages (folders with __init__.py) and modules directly under import root `root`."""
    prefix = root.strip("/").removeprefix("./") + "/" if root.strip("/.") else ""
    out = set()
    for path in files:
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix):]
        head, _, rest = rel.partition("/")
        if (rest == "__init__.py" or (not rest and head.endswith(".py") and head != "setup.py")) and _top(rel):
            out.add(_top(rel))
    return out


def _found_version(files: dict[str, str], roots: list[str], top: list[str]) -> str:
    """`__version__ = "..."` in the package's __init__, _version.py, version.py or __about__.py."""
    for root in roots:
        prefix = f"{root}/" if root else ""
        for name in top:
            for leaf in ("__init__.py", "_version.py", "version.py", "__about__.py", "__version__.py"):
                match = _VERSION_LINE.search(files.get(f"{prefix}{name}/{leaf}", ""))
                if match and _VERSION.fullmatch(match.group(1)):
                    return match.group(1)
    return "0+unknown"


def dist_files(plan: dict) -> dict[str, str]:
    """The site folder's files: install.json (for the harness) and the .dist-info."""
    info = f"{re.sub(r'[-_.]+', '_', plan['name'])}-{plan['version']}.dist-info"
    return {"install.json": json.dumps({"roots": plan["roots"], "top_level": plan["top_level"],
                                        "name": plan["name"]}, sort_keys=True),
            f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {plan['name']}\nVersion: {plan['version']}\n",
            f"{info}/INSTALLER": "flywheel\n",
            f"{info}/top_level.txt": "".join(f"{n}\n" for n in plan["top_level"]),
            f"{info}/RECORD": ""}


def site_folder(plan: dict) -> str:
    """The host folder holding `plan`'s site files, written once per machine (its name is the
    digest of its files; a folder found there is checked before it is used, as repo_base does)."""
    from flywheel.families.repository.repo_base import cache_root
    files = dist_files(plan)
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:32]
    root = cache_root()
    folder = os.path.join(root, f"site-{digest}")
    with _lock:
        if folder in _written and os.path.isdir(folder):
            return folder
    os.makedirs(root, mode=0o755, exist_ok=True)
    if os.path.lexists(folder) and not _holds(folder, files):
        shutil.rmtree(folder, ignore_errors=True)
    if not os.path.lexists(folder):
        tmp = tempfile.mkdtemp(dir=root, prefix=".site-")
        try:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
                with open(os.path.join(tmp, rel), "x", encoding="utf-8") as f:
                    f.write(text)
            for here, _, names in os.walk(tmp):
                os.chmod(here, 0o755)
                for name in names:
                    os.chmod(os.path.join(here, name), 0o444)
            os.rename(tmp, folder)
        except OSError:  # another process wrote it first: checked below
            shutil.rmtree(tmp, ignore_errors=True)
    if not _holds(folder, files):
        raise OSError(f"the install folder {folder} is not this user's or not what it should hold; "
                      f"set FLYWHEEL_SNAPSHOT_CACHE to a folder of your own")
    with _lock:
        _written.add(folder)
    return folder


def _holds(folder: str, files: dict[str, str]) -> bool:
    """Whether `folder` is this user's, writable by no one else, and holds exactly `files`."""
    try:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return False
        found = {}
        for here, dirs, names in os.walk(folder):
            for name in dirs + names:
                if os.path.islink(os.path.join(here, name)):
                    return False
            for name in names:
                path = os.path.join(here, name)
                with open(path, encoding="utf-8") as f:
                    found[os.path.relpath(path, folder)] = f.read()
        return found == files
    except (OSError, UnicodeDecodeError):
        return False


def shadow_problem(files: dict[str, str], digest: str | None, environment: str, name: str) -> str | None:
    """Why environment folder `environment` (named `name`) hides the repository's own package,
    or None: an environment holding the package itself (pip installed, not editable) comes
    first on sys.path, so the model's edits would never be imported."""
    plan = install_plan(files, digest)
    for top in (plan or {}).get("top_level") or []:
        if os.path.isdir(os.path.join(environment, top)) or os.path.isfile(os.path.join(environment, top + ".py")):
            return (f"field `environment`: environment {name!r} holds the repository's own package "
                    f"{top!r}, which is imported before the repository's copy (edits would not count); "
                    f"build it from the project's dependencies only")
    return None


def install_mounts(files: dict[str, str], digest: str | None = None) -> list[list[str]]:
    """[[site folder, SITE_MOUNT]] for a snapshot that declares a package, else []: what every
    call of its task mounts (repo.py `_request`)."""
    plan = install_plan(files, digest)
    return [[site_folder(plan), SITE_MOUNT]] if plan else []
