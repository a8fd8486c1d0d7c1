"""The sandbox service's bearer token: read once, checked for shape, compared in constant time.

One place for the rules the service (`flywheel sandbox serve`) and its client (the `remote`
backend) share, so neither can drift: a token comes from a file, else $FLYWHEEL_SANDBOX_TOKEN,
else a value given in config; a file or variable that holds nothing is an error, never "no token"
(an empty token would make `Authorization: Bearer ` alone the password); a token is visible ASCII
without spaces (what an HTTP header can carry unchanged). A service that listens beyond loopback
without a token would run anyone's code: `check_exposure` refuses it.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
from pathlib import Path

ENV = "FLYWHEEL_SANDBOX_TOKEN"
_SHAPE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: survives a header byte for byte


def read_token(token_file: str | Path | None = None, token: str | None = None) -> str | None:
    """The token from `token_file`, else $FLYWHEEL_SANDBOX_TOKEN, else `token`; None when none
    is given. ValueError when the one given is empty or not a header-safe token; OSError when the
    file cannot be read."""
    if token_file is not None:
        return check_token(Path(token_file).read_text(encoding="utf-8"), f"the token file {token_file}")
    if os.environ.get(ENV) is not None:
        return check_token(os.environ[ENV], f"${ENV}")
    return None if token is None else check_token(token, "the token")


def check_token(text: str, source: str = "the token") -> str:
    """`text` without surrounding whitespace, or ValueError saying why it cannot be a token."""
    token = text.strip()
    if not token:
        raise ValueError(f"{source} is empty: a token is required once one is named (an empty "
                         "one would accept `Bearer ` alone)")
    if not _SHAPE.fullmatch(token):
        raise ValueError(f"{source} holds spaces, control or non-ASCII characters: a token must "
                         "be visible ASCII, e.g. `openssl rand -hex 32`")
    return token


def bearer_matches(token: str | None, authorization: list[str]) -> bool:
    """Whether the request's Authorization header(s) carry `token` (always, when None): exactly
    one header, compared in constant time."""
    if token is None:
        return True
    if len(authorization) != 1:
        return False
    return hmac.compare_digest(authorization[0].strip().encode("utf-8", "replace"),
                               f"Bearer {token}".encode())


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; a name or a wildcard ("", 0.0.0.0, ::) is not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """ValueError when a service on `host` would run code for anyone who can reach it."""
    if token is None and not is_loopback(host):
        raise ValueError(f"refusing to listen on {host!r} without a token: anyone who reaches it "
                         f"could run code here; give --token-file (or ${ENV}) or bind 127.0.0.1")
