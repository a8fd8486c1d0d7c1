"""The HumanEval and MBPP task formats: rows recognised on sight, run as `python_tests`."""

from __future__ import annotations

from flywheel.domains.task_formats import FormatError, field_types, shape_of, task_format, task_id_of


# -- Python unit tests -------------------------------------------------------------------------
@task_format("humaneval", "HumanEval", "python_tests", ("prompt", "entry_point", "test"),
             texts=("prompt", "entry_point", "test"), optional_texts=("canonical_solution",))
def _humaneval(row: dict, folder: str) -> dict:
    return {**row, "task_id": task_id_of(row, "humaneval", "prompt", "test")}


def _mbpp_check(row: dict) -> str | None:
    if "text" not in row and "prompt" not in row:
        return "it has no `text` (or `prompt`) field"
    if not isinstance(row["test_list"], list):
        return "field `test_list` is not a list of asserts"
    return None


def _mbpp_texts(row: dict) -> None:
    description = "text" if "text" in row else "prompt"
    problem = field_types(row, (description,), ("code", "test_setup_code"))
    bad = next((i for i, t in enumerate(row["test_list"]) if not isinstance(t, str)), None)
    problem = problem or (f"field `test_list[{bad}]` must be an assert (a string), got "
                          f"{shape_of(row['test_list'][bad])}" if bad is not None else None)
    if problem:
        raise FormatError(problem)


@task_format("mbpp", "MBPP", "python_tests", ("code", "test_list"), _mbpp_check)
def _mbpp(row: dict, folder: str) -> dict:
    _mbpp_texts(row)
    task = dict(row)
    if "text" not in task:  # MBPP "sanitized" names the description `prompt`
        task["text"] = task.pop("prompt")
    task.pop("prompt", None)  # python_tests renders it from `text` and the visible tests
    task_id = row.get("task_id")
    task["task_id"] = (f"mbpp/{task_id}" if isinstance(task_id, int)
                       else task_id_of(row, "mbpp", "text", "prompt", "test_list"))
    return task
