"""Failures as data: the tag, the row shape and the counters of the `errors` table."""

from __future__ import annotations

import datetime as dt
import json
import traceback
from typing import Any

import apache_beam as beam

ERRORS_TAG = "errors"
_COUNTERS: dict[str, Any] = {}


def count(name: str, n: int = 1) -> None:
    """Increment the Beam counter flywheel/<name> (attempts, passes, errors_<kind>, ...)."""
    if name not in _COUNTERS:
        _COUNTERS[name] = beam.metrics.Metrics.counter("flywheel", name)
    _COUNTERS[name].inc(n)


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def error_row(stage: str, kind: str, error: BaseException | str, element: dict | None = None,
              payload: Any = None, retry_count: int = 0, error_type: str | None = None) -> dict:
    """One `errors` row. `kind` is environment (our side), model (the policy's output) or input;
    `error_type` names the failure when `error` is a message (default: the stage)."""
    element = element or {}
    if isinstance(error, BaseException):
        error_type, message = type(error).__name__, str(error) or repr(error)
        if kind == "environment":
            message += "\n" + "".join(traceback.format_exception(error)[-3:])
    else:
        error_type, message = error_type or stage, error
    if payload is None:
        payload = {k: element[k] for k in ("prompt", "response") if k in element}
    count(f"errors_{kind}")
    return {
        "run_id": element.get("run_id"), "iteration": element.get("iteration"),
        "domain": element.get("domain"), "task_id": element.get("task_id"),
        "sample_index": element.get("sample_index"), "stage": stage, "kind": kind,
        "error_type": error_type, "message": message[:4000],
        "payload": payload if isinstance(payload, str) else json.dumps(payload, default=str)[:4000],
        "retry_count": retry_count, "created_at": now(),
    }


def errors_output(row: dict) -> beam.pvalue.TaggedOutput:
    return beam.pvalue.TaggedOutput(ERRORS_TAG, row)
