"""The sandbox service's bearer token: read once, checked for shape, compared in constant time.

One place for the rules the service (`flywheel sandbox serve`) and its client (the `remote`
backend) share, so neither can drift: a token comes from a file, else $FLYWHEEL_SANDBOX_TOKEN,
else a value given in config; a file or variable that holds nothing is an error, never "no token"
(an empty token would make `Authorization: Bearer ` alone the password); a token is visible ASCII
without spaces (what an HTTP header can carry unchanged). A service that listens beyond loopback
without a token would run anyone's code: `check_exposure` refuses it.

Named tokens (`read_named_tokens`: `flywheel serve`'s clients, the review page's reviewers) are
one bare token or lines `name:token`. `default_token` is the token a service issues itself when
none is given: made once with `secrets`, kept 0600 in the user's config folder
($FLYWHEEL_CONFIG_DIR, else $XDG_CONFIG_HOME/flywheel, else ~/.config/flywheel), and reused, so
a client configured once keeps working; a file others may read is refused, never used.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import secrets
import stat
from pathlib import Path

ENV = "FLYWHEEL_SANDBOX_TOKEN"
CONFIG_ENV = "FLYWHEEL_CONFIG_DIR"
_SHAPE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: survives a header byte for byte
_NAMED = re.compile(r"([A-Za-z0-9_.-]{1,64}):(\S+)")
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a client's or reviewer's name


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


def read_named_tokens(path: str | Path, bare_name: str = "default") -> dict[str, str]:
    """{name: token} from a token file: one bare token (named `bare_name`), or lines `name:token`,
    the name of letters, digits, `_`, `.` and `-`; `#` starts a comment line. ValueError for an
    empty file, a line of neither shape, or a name or token given twice."""
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    named = [_NAMED.fullmatch(line) for line in lines]
    if len(lines) <= 1 and not any(named):  # an empty file is refused here, never "no token"
        return {bare_name: check_token("".join(lines), f"the token file {path}")}
    if not all(named):
        raise ValueError(f"the token file {path} must hold one token, or lines name:token")
    tokens = {m[1]: check_token(m[2], f"{path}: the token of {m[1]}") for m in named}
    if len(tokens) != len(lines) or len(set(tokens.values())) != len(tokens):
        raise ValueError(f"the token file {path}: a name or a token appears twice")
    return tokens


def config_dir() -> Path:
    """The user's Flywheel config folder (not created here)."""
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "flywheel"


def default_token(name: str) -> tuple[Path, str, bool]:
    """(path, token, made now) of the token a service issues itself, kept as `name` in the
    config folder: read when it exists (ValueError when group or others may read or write it,
    or it is not a regular file of this user), else made (0600, its folder 0700)."""
    path = config_dir() / name
    try:
        info = path.lstat()
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another server made it first: use that one
            return default_token(name)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(token + "\n")
        return path, token, True
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ValueError(f"the token file {path} must be a regular file of yours that only you may "
                         f"read (chmod 600 {path}), or remove it to have a new one made")
    return path, check_token(path.read_text(encoding="utf-8"), f"the token file {path}"), False
