"""The GSM8K and MATH task formats: rows recognised on sight, run as `math`."""

from __future__ import annotations

from flywheel.domains.task_formats import task_format, task_id_of
from flywheel.domains.untrusted_text import boxed
from flywheel.families.math.math_answer import INSTRUCTION as MATH_INSTRUCTION


# -- math answers ------------------------------------------------------------------------------
def gsm8k_final(answer: str) -> str | None:
    """The text after the `####` that ends a GSM8K answer (on its own last line, or on the line
    before with nothing but whitespace after it), stripped; None when there is none. With str
    methods only: a task file is untrusted input, and the pattern it replaces
    (`####\\s*([^\\n]+?)\\s*$`) is quadratic in a long run of spaces."""
    body = answer.rstrip()
    last_line = body.rfind("\n") + 1
    before = body.rfind("####", 0, last_line)
    if before >= 0 and not body[before + 4:last_line].strip():
        return body[before + 4:].strip() or None
    first = body.find("####", last_line)
    return body[first + 4:].strip() or None if first >= 0 else None


def _gsm8k_check(row: dict) -> str | None:
    answer = row["answer"]
    if not isinstance(answer, str) or gsm8k_final(answer) is None:
        return "field `answer` does not end in '#### N'"
    return None


@task_format("gsm8k", "GSM8K", "math", ("question", "answer"), _gsm8k_check, texts=("question",))
def _gsm8k(row: dict, folder: str) -> dict:
    solution = row["answer"]
    final = gsm8k_final(solution).replace(",", "").replace("$", "").strip()
    task = {k: v for k, v in row.items() if k not in ("question", "answer")}
    return {**task, "task_id": task_id_of(row, "gsm8k", "question"),
            "prompt": f"{row['question']}{MATH_INSTRUCTION}", "answer": final,
            "solution": solution[:solution.rindex("####")].strip()}


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}) in `text`, braces balanced (in one
    pass: a task file is untrusted input, and unclosed boxes must not cost a scan each)."""
    contents = boxed(text)
    return contents[-1] if contents else None


def _math_check(row: dict) -> str | None:
    if not isinstance(row["solution"], str) or last_boxed(row["solution"]) is None:
        return "field `solution` holds no \\boxed{...} answer"
    return None


@task_format("math", "MATH", "math", ("problem", "solution"), _math_check, texts=("problem",),
             optional_texts=("unique_id",))
def _math(row: dict, folder: str) -> dict:
    task = {k: v for k, v in row.items() if k not in ("problem", "answer")}
    task_id = row.get("task_id") or row.get("unique_id")  # MATH-500 names its rows unique_id
    return {**task, "task_id": str(task_id) if task_id else task_id_of(row, "math", "problem"),
            "prompt": f"{row['problem']}{MATH_INSTRUCTION}",
            "answer": last_boxed(row["solution"]).strip()}
