"""One Harbor task folder as a task row, read on sight by its `task.toml`.

    flywheel tasks validate DIR          # DIR: a task folder, or a folder of task folders

The shared task-file reader (domains/task_files.py) hands every file named `task.toml` to
`read_task_folder`, which reads the folder around it (local disk or any Beam filesystem):
`instruction.md`, `task.toml` and every file under `environment/`, `tests/` and `solution/`,
embedded in the row so any worker can run any turn. A task folder is untrusted: a file that is
a link out of the folder, a name with control characters or a backslash, anything but a regular
file, more than MAX_FILES files or MAX_BYTES bytes: each is a problem naming the path, and the
folder gives no task. The `harbor` format (registered here) turns the row into the `harbor`
domain's fields (harbor.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterator

from flywheel.domains.task_files import task_file_reader
from flywheel.domains.task_formats import FormatError, task_format
from flywheel.families.harbor.dockerfile import DockerfileError, layout, parse_dockerfile

MAX_FILES = 1000
MAX_BYTES = 8 << 20
PARTS = ("environment/", "tests/", "solution/")
_BAD_NAME = re.compile(r"[\x00-\x1f\x7f\\]")


class FolderError(ValueError):
    """A task folder that cannot be read ("path: problem")."""


@task_file_reader("task.toml")
def read_task_folder(path: str, data: bytes) -> Iterator[tuple[int, dict | None, str | None]]:
    """(1, the folder's row, None), or (0, None, why the folder gives no task)."""
    try:
        yield 1, folder_row(os.path.dirname(path), data), None
    except FolderError as e:
        yield 0, None, f"Harbor task folder: {e}"


def folder_row(folder: str, toml_bytes: bytes) -> dict:
    try:
        config = tomllib.loads(toml_bytes.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise FolderError(f"task.toml: not readable TOML: {e}") from None
    files = dict(_files(folder))
    if "instruction.md" not in files:
        raise FolderError("instruction.md missing")
    texts, binary = {}, {}
    for rel, data in files.items():
        if rel.startswith(PARTS):
            try:
                texts[rel] = data.decode("utf-8")
            except UnicodeDecodeError:
                binary[rel] = base64.b64encode(data).decode()
    name = (config.get("task") or {}).get("name") if isinstance(config.get("task"), dict) else None
    return {"task_id": str(name or os.path.basename(folder.rstrip("/"))),
            "instruction": files["instruction.md"].decode("utf-8", "replace"),
            "task_toml": json.loads(json.dumps(config, default=str)),
            "harbor_files": texts, "harbor_binary": binary}


def _files(folder: str) -> Iterator[tuple[str, bytes]]:
    """(path relative to `folder`, bytes) of the task's files, checked as the module says."""
    if "://" in folder:
        yield from _remote_files(folder)
        return
    real, count, total = os.path.realpath(folder), 0, 0
    for here, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(here, d))]):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            if _BAD_NAME.search(rel) or rel != rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"):
                raise FolderError(f"{rel!r}: a file name with control characters, a backslash or "
                                  f"bytes that are not UTF-8")
            target = os.path.realpath(path)
            if target != real and not target.startswith(real + os.sep):
                raise FolderError(f"{rel}: a link out of the task folder (to {target})")
            if not os.path.isfile(target):
                if os.path.isdir(target):
                    continue
                raise FolderError(f"{rel}: not a regular file")
            if rel in ("task.toml",) or not (rel == "instruction.md" or rel.startswith(PARTS)):
                continue
            count += 1
            total += os.path.getsize(target)
            if count > MAX_FILES or total > MAX_BYTES:
                raise FolderError(f"more than {MAX_FILES} files or {MAX_BYTES >> 20} MB")
            with open(target, "rb") as f:
                yield rel, f.read()


def _remote_files(folder: str) -> Iterator[tuple[str, bytes]]:
    from apache_beam.io.filesystems import FileSystems
    metas = FileSystems.match([folder.rstrip("/") + "/**"])[0].metadata_list
    if len(metas) > MAX_FILES or sum(m.size_in_bytes for m in metas) > MAX_BYTES:
        raise FolderError(f"more than {MAX_FILES} files or {MAX_BYTES >> 20} MB")
    for meta in sorted(metas, key=lambda m: m.path):
        rel = meta.path[len(folder.rstrip("/")) + 1:]
        if _BAD_NAME.search(rel) or ".." in rel.split("/"):
            raise FolderError(f"{rel!r}: a name that leaves the folder or holds control characters")
        if rel == "instruction.md" or rel.startswith(PARTS):
            with FileSystems.open(meta.path) as f:
                yield rel, f.read()


# -- the format: a folder's row as the harbor domain's task -----------------------------------
def _part(texts: dict, binary: dict, prefix: str) -> tuple[dict, dict]:
    cut = len(prefix)
    return ({k[cut:]: v for k, v in texts.items() if k.startswith(prefix)},
            {k[cut:]: v for k, v in binary.items() if k.startswith(prefix)})


def _number(table: dict, key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise FormatError(f"task.toml: `{where}.{key}` must be a positive number, got {value!r}")
    return float(value)


def _memory_mb(env: dict) -> float:
    if "memory" in env and "memory_mb" not in env:  # Terminal-Bench 2's "2G" / "512M"
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([MmGg])[Bb]?\s*", str(env["memory"]))
        if not match:
            raise FormatError(f"task.toml: `environment.memory` {env['memory']!r} is not like '2G'")
        return float(match[1]) * (1024 if match[2] in "Gg" else 1)
    return _number(env, "memory_mb", 1024, "environment")


def _table(config: dict, name: str) -> dict:
    table = config.get(name, {})
    if not isinstance(table, dict):
        raise FormatError(f"task.toml: `{name}` must be a table")
    return table


@task_format("harbor", "Harbor task folder", "harbor", ("instruction", "task_toml", "harbor_files"),
             texts=("instruction",))
def harbor_task(row: dict, folder: str) -> dict:
    texts, binary, config = row["harbor_files"], row.get("harbor_binary") or {}, row["task_toml"]
    if not (isinstance(texts, dict) and isinstance(binary, dict) and isinstance(config, dict)):
        raise FormatError("fields `harbor_files`, `harbor_binary` and `task_toml` must be objects")
    if "tests/test.sh" not in texts:
        raise FormatError("tests/test.sh missing (the verifier's entry point)")
    if "environment/Dockerfile" not in texts:
        raise FormatError("environment/Dockerfile missing (docker-compose environments are not read)")
    try:
        env = parse_dockerfile(texts["environment/Dockerfile"])
    except DockerfileError as e:
        raise FormatError(f"environment/Dockerfile: {e}") from None
    verifier, agent, environment = (_table(config, n) for n in ("verifier", "agent", "environment"))
    context_texts, context_binary = _part(texts, binary, "environment/")
    image = environment.get("docker_image")
    if image is not None and not isinstance(image, str):
        raise FormatError("task.toml: `environment.docker_image` must be a string")
    if image:
        env.need(f"task.toml names the prebuilt image {image}")
    else:  # on docker every task runs in its image; on local only a plain one runs, without
        digest = hashlib.sha256(json.dumps([context_texts, context_binary], sort_keys=True).encode())
        slug = re.sub(r"[^a-z0-9._-]+", "-", str(row["task_id"]).lower()).strip("-._")[:60] or "task"
        image = f"flywheel-harbor/{slug}:{digest.hexdigest()[:12]}"
    app_texts, app_binary = {}, {}
    if not env.needs_image:
        for rel, source in layout(env, sorted([*context_texts, *context_binary])).items():
            if rel.startswith(".."):
                raise FormatError(f"environment/Dockerfile copies {source} outside {env.workdir}")
            if source in context_texts:
                app_texts[rel] = context_texts[source]
            else:
                app_binary[rel] = context_binary[source]
    verifier_env = verifier.get("env", {})
    if not (isinstance(verifier_env, dict) and all(isinstance(v, str) for v in verifier_env.values())):
        raise FormatError("task.toml: `verifier.env` must be a table of strings")
    tests, tests_binary = _part(texts, binary, "tests/")
    solution, solution_binary = _part(texts, binary, "solution/")
    return {"task_id": row["task_id"], "prompt": row["instruction"], "workdir": env.workdir,
            "app_files": app_texts, "app_binary": app_binary, "image": image or None,
            "needs_image": env.needs_image, "env": env.env, "tests": tests,
            "context_files": context_texts, "context_binary": context_binary,
            "tests_binary": tests_binary, "solution": solution, "solution_binary": solution_binary,
            "verifier_env": verifier_env, "reference_script": solution.get("solve.sh", ""),
            "limits": {"agent_timeout_s": _number(agent, "timeout_sec", 600, "agent"),
                       "verifier_timeout_s": _number(verifier, "timeout_sec", 120, "verifier"),
                       "memory_mb": _memory_mb(environment),
                       "storage_mb": _number(environment, "storage_mb", 256, "environment")}}
