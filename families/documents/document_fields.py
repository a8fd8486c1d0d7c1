"""The `document_fields` verifier: figures reported from a document, checked against the truth and
against each other.

Task fields (families/documents/documents.py writes them; users' task files too):
- `fields`: [{"name", "value", "tolerance", "unit"?, "required"? (default true)}]: the response's
  JSON object must map each name to a number within `tolerance` of `value` (the task's question
  states the unit, the scale and the rounding; a percent asked is not a fraction).
- `checks` (optional): [{"field", "op", "args", "tolerance"?}]: the response's own `field` must
  equal `op` (sum, difference, ratio, ratio_pct, change_pct) over its own `args` values, within the
  field's tolerance: a derived figure must agree with the inputs the response reports.
- `document` (optional; else the prompt): what the response may not copy.

Reward: mean over fields (partial credit, `field_<name>` components) times the share of checks
that hold (`check_<name>`), so checks on their own earn nothing: self-consistent wrong numbers
score 0. Pass when every required field and every check holds. Reward 0, flagged: hedging (two
different JSON answers, a key given twice, a list of candidates for a field) and a response that
copies the document. The JSON is read by the `structured` verifier's reader (last ```json block,
bounded depth and size); numbers are plain floats, never evaluated text; every step is linear in
the response, which is capped.
"""

from __future__ import annotations

import math
from typing import Any

from flywheel.families.documents.documents_questions import apply_op
from flywheel.verifiers import Verdict, register_verifier
from flywheel.families.documents.documents import ANSWER_CHARS
from flywheel.domains.json_answer import parse_json

MAX_RESPONSE_CHARS = ANSWER_CHARS  # 32,000: far above any answer's JSON; a copied report is longer
MAX_MAGNITUDE = 1e18            # a larger "figure" is no figure of any report
COPY_LINE_CHARS = 24            # lines shorter than this are too common to count as copied
COPY_CHARS = 2_000              # copied characters that flag a copy (less for short documents)


def number(x: Any) -> float | None:
    """`x` as a finite float of sane size, or None (bools, strings, 1e999, 10**4000 are not)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        f = float(x)
    except OverflowError:
        return None
    return f if math.isfinite(f) and abs(f) <= MAX_MAGNITUDE else None


def within(got: float, want: float, tol: float) -> bool:
    return abs(got - want) <= tol + 1e-12 * max(1.0, abs(want))


def copied_chars(response: str, document: str) -> int:
    """Characters of the response on lines that are whole lines of the document (long enough to
    be distinctive). Linear: one set of the document's lines, one pass over the response."""
    lines = {s for s in (line.strip() for line in document.splitlines()) if len(s) >= COPY_LINE_CHARS}
    seen, total = set(), 0
    for line in response[:4 * MAX_RESPONSE_CHARS].splitlines():
        s = line.strip()
        if s in lines and s not in seen:
            seen.add(s)
            total += len(s)
    return total


def copies_document(response: str, document: str) -> bool:
    distinctive = sum(len(s) for s in {line.strip() for line in document.splitlines()}
                      if len(s) >= COPY_LINE_CHARS)
    return bool(distinctive) and copied_chars(response, document) >= min(COPY_CHARS, distinctive // 2)


def _hint(got: float, spec: dict) -> str:
    """Why a number a reader would recognise is wrong: a fraction for a percent, a scale slip."""
    want = float(spec["value"])
    if spec.get("unit") == "percent" and want and within(got * 100, want, float(spec.get("tolerance") or 0) + 0.05):
        return " (a fraction where a percent was asked)"
    if spec.get("unit") == "amount" and want and any(within(got * k, want, abs(want) * 1e-3) for k in (1e3, 1e-3, 1e6, 1e-6)):
        return " (wrong scale)"
    return ""


def _score_fields(fields: list[dict], answer: dict) -> tuple[dict[str, float], list[str], bool]:
    """(field_<name> -> 0/1, what is wrong, whether some field is a list of candidates)."""
    scores, wrong, hedged = {}, [], False
    for spec in fields:
        name, got = spec["name"], answer.get(spec["name"])
        hedged = hedged or isinstance(got, (list, dict))
        value = number(got)
        ok = value is not None and within(value, float(spec["value"]), float(spec.get("tolerance") or 0))
        scores[f"field_{name}"] = float(ok)
        if not ok:
            wrong.append(f"{name}: " + ("missing" if got is None else "not a number" if value is None
                                        else f"{value:g}{_hint(value, spec)}"))
    return scores, wrong, hedged


def _score_checks(checks: list[dict], fields: list[dict], answer: dict) -> dict[str, float]:
    """check_<field> -> 0/1: the response's figure equals the op over its own inputs."""
    tolerances = {f["name"]: float(f.get("tolerance") or 0) for f in fields}
    scores = {}
    for check in checks:
        name = check["field"]
        stated = number(answer.get(name))
        args = [number(answer.get(a)) for a in check["args"]]
        computed = None if None in args else apply_op(check["op"], args)
        tol = float(check.get("tolerance", tolerances.get(name, 0.0)))
        scores[f"check_{name}"] = float(stated is not None and computed is not None
                                        and math.isfinite(computed) and within(stated, computed, tol))
    return scores


@register_verifier("document_fields", "1")
def document_fields(task: dict, response: str, execution: Any = None) -> Verdict:
    fields, checks = task["fields"], task.get("checks") or []
    document = task.get("document") or task.get("prompt") or ""
    if copies_document(response, document):
        return Verdict(0.0, "fail", {"json": 0.0, "exploit_document_copy": 1.0}, True,
                       "exploit suspected: the response copies the document")
    if len(response) > MAX_RESPONSE_CHARS:
        return Verdict(0.0, "fail", {"json": 0.0},
                       detail=f"response of {len(response)} characters; at most {MAX_RESPONSE_CHARS}")
    answer, flags = parse_json(response)
    if not isinstance(answer, dict):
        return Verdict(0.0, "fail", {"json": 0.0},
                       detail="no JSON object in the response" if answer is None else "the JSON is not an object")
    field_scores, wrong, hedged = _score_fields(fields, answer)
    check_scores = _score_checks(checks, fields, answer)
    components = {"json": 1.0, **field_scores, **check_scores}
    flags += ["candidate_lists"] if hedged else []
    if flags:
        components.update({f"exploit_{f}": 1.0 for f in flags})
        return Verdict(0.0, "fail", components, True, f"exploit suspected: {', '.join(flags)}")
    mean = lambda xs: sum(xs) / len(xs) if xs else 1.0  # noqa: E731
    reward = mean(list(field_scores.values())) * mean(list(check_scores.values()))
    required = [f"field_{f['name']}" for f in fields if f.get("required", True)]
    passed = all(components[k] for k in required) and all(check_scores.values())
    failed_checks = [k[len("check_"):] for k, v in check_scores.items() if not v]
    detail = "; ".join(wrong[:8] + [f"{name} disagrees with its inputs" for name in failed_checks[:4]])
    return Verdict(reward, "pass" if passed else "fail", components, detail=detail[:1000])
