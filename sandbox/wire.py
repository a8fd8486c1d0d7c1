"""ExecRequest and ExecResult as JSON, for the sandbox service and the `remote` backend.

Text travels as JSON strings; a lone surrogate (model output may hold them) is written as it is
(json.dumps escapes it as \\udXXX), so a request arrives exactly as it was built.
"""

from __future__ import annotations

import dataclasses
import json

from flywheel.sandbox.contract import ExecRequest, ExecResult, Limits


def dump_request(request: ExecRequest) -> bytes:
    return json.dumps({"files": dict(request.files), "command": list(request.command),
                       "stdin": request.stdin, "limits": dataclasses.asdict(request.limits)}).encode()


def load_request(data: bytes) -> ExecRequest:
    """The request in `data`; ValueError (naming what is wrong) for anything malformed."""
    try:
        body = json.loads(data)
        limits = Limits(**body.get("limits", {}))
        files, command, stdin = body["files"], body["command"], body.get("stdin", "")
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"malformed request: {type(e).__name__}: {e}") from None
    if not (isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
            and isinstance(command, list) and all(isinstance(a, str) for a in command)
            and isinstance(stdin, str)):
        raise ValueError("malformed request: files must map str to str, command be a list of str")
    return ExecRequest(files=files, command=tuple(command), stdin=stdin, limits=limits)


def dump_result(result: ExecResult) -> bytes:
    return json.dumps(result.to_dict()).encode()


def load_result(data: bytes) -> ExecResult:
    return ExecResult(**json.loads(data))
