"""The `structured` verifier: a JSON response, checked against the task's JSON Schema and fields.

Task fields: `schema` (JSON Schema), `expected` (the right values), optional `reconcile` rules that
the response's own numbers must satisfy, e.g. {"sum": "line_items[].amount", "equals": "total"}
or {"each": "line_items", "product": ["quantity", "unit_price"], "equals": "amount"}.
Reward: 0 unless the JSON is valid against the schema; then the mean over expected leaf fields
(partial credit per field), scaled by the share of reconciliation rules that hold. The rules check
the response's own numbers, so on their own they earn nothing: self-consistent wrong numbers
(`{"total": 0, "line_items": []}`) score 0. Verdict pass when every field and rule holds.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

from flywheel.domains.json_answer import parse_json
from flywheel.verifiers import Verdict, register_verifier


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """path -> scalar, with paths like `line_items[0].amount`."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{path}.{key}" if path else key).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in leaves(item, f"{path}[{i}]").items()}
    return {path: value}


def close(a: Any, b: Any, tol: float) -> bool:
    """Numbers equal within `tol`; an int too large for a float (10**4000) is equal to nothing."""
    try:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=tol)
    except OverflowError:
        return False


def same(got: Any, want: Any, tol: float) -> bool:
    if isinstance(want, bool) or isinstance(got, bool) or want is None:
        return got is want or got == want and type(got) is type(want)
    if isinstance(want, (int, float)):
        return _number(got) and close(got, want, tol)
    if isinstance(want, str) and isinstance(got, str):
        return " ".join(got.split()).casefold() == " ".join(want.split()).casefold()
    return False


def _select(value: Any, path: str) -> list[Any]:
    """Values at a path where `[]` means every item of a list: `line_items[].amount`."""
    found = [value]
    for part in filter(None, re.split(r"\.|(\[\])", path)):
        if part == "[]":
            found = [x for v in found if isinstance(v, list) for x in v]
        else:
            found = [v[part] for v in found if isinstance(v, dict) and part in v]
    return found


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def reconciled(value: Any, rule: dict, tol: float) -> bool:
    """The rule holds on the response's own numbers; sums or products beyond a float's range fail."""
    try:
        return _reconciled(value, rule, tol)
    except OverflowError:  # 10**4000 + 0.5
        return False


def _reconciled(value: Any, rule: dict, tol: float) -> bool:
    if "sum" in rule:
        parts, total = _select(value, rule["sum"]), _select(value, rule["equals"])
        return (all(map(_number, parts)) and len(total) == 1 and _number(total[0])
                and close(sum(parts), total[0], tol))
    items = _select(value, rule["each"] + "[]")
    return bool(items) and all(
        isinstance(it, dict) and all(_number(it.get(k)) for k in [*rule["product"], rule["equals"]])
        and close(math.prod(it[k] for k in rule["product"]), it[rule["equals"]], tol) for it in items)


@lru_cache(maxsize=256)
def _validator(schema_json: str):
    import jsonschema
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# imported with this module in the bounded verifier's worker, off any deadline (verifiers/bounded.py)
WARM_IMPORTS = ("jsonschema",)


@register_verifier("structured", "1")
def structured(task: dict, response: str, execution: Any = None) -> Verdict:
    expected, rules = task["expected"], task.get("reconcile") or []
    validator = _validator(json.dumps(task["schema"], sort_keys=True))
    tol = float(task.get("tolerance") or 0.005)
    value, flags = parse_json(response)
    if value is None:
        return Verdict(0.0, "fail", {"json": 0.0}, detail="no JSON value in the response")
    errors = [e.message for e in validator.iter_errors(value)]
    got = leaves(value)
    fields = {f"field_{path}": float(path in got and same(got[path], want, tol))
              for path, want in leaves(expected).items()}
    checks = {f"reconcile_{i}": float(reconciled(value, rule, tol)) for i, rule in enumerate(rules)}
    components = {**fields, **checks}
    mean = lambda scores: sum(scores) / len(scores) if scores else 1.0  # noqa: E731
    reward = mean(list(fields.values())) * mean(list(checks.values())) if not errors else 0.0
    components.update(json=1.0, schema_valid=float(not errors))
    if flags:
        components.update({f"exploit_{f}": 1.0 for f in flags})
        return Verdict(0.0, "fail", components, True, f"exploit suspected: {', '.join(flags)}")
    detail = "; ".join(errors[:3]) or ", ".join(k for k, v in components.items() if not v)
    return Verdict(reward, "pass" if reward == 1.0 else "fail", components, detail=detail)
