"""The SWE-bench task format: rows recognised on sight, run as `repo` on a local snapshot."""

from __future__ import annotations

import json
import os

from flywheel.domains.task_formats import FormatError, task_format
from flywheel.domains.task_paths import inside_folder
from flywheel.families.repository.repo_snapshot import ARCHIVES, split_commit


# -- SWE-bench --------------------------------------------------------------------------------
SWEBENCH_SNAPSHOTS = ("{id}", "{id}.tar.gz", "{id}.tgz", "{id}.zip")
SWEBENCH_FIELDS = ("environment_setup_commit", "version", "base_commit")
# The repo domain's own fields a SWE-bench row may carry, kept as given (validate_task checks them):
# the files the model may run, the golden tool calls, further protected globs, its sandbox
# limits and environment, the most ids one action may take (a whole gold patch in one
# apply_patch needs more than the domain's 512); and SWE-bench's own that a person reads.
KEPT_FIELDS = ("visible_tests", "golden", "protected", "limits", "environment", "split",
               "max_new_tokens", "hints_text", "created_at")


def _swebench_check(row: dict) -> str | None:
    if not isinstance(row["problem_statement"], str) or not row["problem_statement"]:
        return "field `problem_statement` is not a non-empty string"
    return None


def _node_ids(row: dict, name: str) -> list[dict]:
    """Checks of a FAIL_TO_PASS/PASS_TO_PASS list of pytest node ids (or its JSON text, as
    SWE-bench's Hugging Face dataset stores it)."""
    value = row.get(name) or []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FormatError(f"field `{name}` must be a list of pytest node ids (or its JSON text)")
    return [{"id": node, "pytest": node} for node in value]


def _swebench_snapshot(row: dict, folder: str) -> str:
    """The row's snapshot path relative to `folder` (checked inside it): `repo_path`, else the
    first of `<instance_id>` (a folder or an archive), beside the task file or under `repos/`."""
    if "://" in folder:
        raise FormatError(f"the task file is on {folder.split('://')[0]}://; SWE-bench rows need "
                          f"the repository snapshot locally, beside a local task file")
    if row.get("repo_path"):
        candidates, field = [str(row["repo_path"])], "repo_path"
    else:
        name = str(row["instance_id"])
        candidates = [os.path.join(top, pattern.format(id=name)) for top in ("", "repos")
                      for pattern in SWEBENCH_SNAPSHOTS]
        field = "instance_id"
    for relative in candidates:
        path, commit = split_commit(relative)
        real = inside_folder(folder, path, field)
        archive = commit is None and relative.endswith(ARCHIVES)
        if os.path.isfile(real) if archive else os.path.isdir(real):
            return relative
    looked = ", ".join(os.path.join(folder, c) for c in candidates)
    raise FormatError(f"no repository snapshot for {row['instance_id']!r}: looked for {looked}; "
                      f"SWE-bench rows need the repository snapshot locally (a folder or "
                      f".tar.gz/.tgz/.zip archive, or name it in `repo_path`)")


@task_format("swebench", "SWE-bench", "repo", ("instance_id", "problem_statement", "FAIL_TO_PASS"),
             _swebench_check, texts=("instance_id",),
             optional_texts=("repo_path", "patch", "test_patch", "repo", "image", "image_name",
                             "environment", *SWEBENCH_FIELDS))
def _swebench(row: dict, folder: str) -> dict:
    task = {"task_id": str(row["instance_id"]), "prompt": row["problem_statement"],
            "repo": {"path": _swebench_snapshot(row, folder)}, "_folder": folder,
            "reference_patch": row.get("patch") or "", "test_patch": row.get("test_patch") or "",
            "hidden_tests": _node_ids(row, "FAIL_TO_PASS"),
            "regression_tests": _node_ids(row, "PASS_TO_PASS")}
    if row.get("repo"):
        task["github_repo"] = row["repo"]
    # `environment`: the name of the packages its pytest checks run with (`flywheel env build`);
    # `image` (or `image_name`, as SWE-bench's harness names it): the docker image they run in;
    # `limits`: its calls' sandbox limits (a real repository's tests take longer than 10 s)
    if row.get("image") or row.get("image_name"):
        task["image"] = row.get("image") or row["image_name"]
    return {**task, **{k: row[k] for k in (*SWEBENCH_FIELDS, *KEPT_FIELDS) if k in row}}
