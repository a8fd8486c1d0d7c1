"""Which requests a service on this machine answers at all, from their headers: the rule that
stops a web page from using a service it can reach through the user's browser.

A browser will send requests wherever a page tells it to: to 127.0.0.1, and under a name the
page's owner controls that resolves to 127.0.0.1 a moment later (DNS rebinding). A listener
on loopback is therefore not trusted by where it listens. `OriginRule.check` refuses, before a
byte of a body is read (web/gated_http.py calls it in every service's gate):

- a `Host` that is not one this server answers to (400 when missing or repeated, 403 when
  foreign): the address the connection arrived on with the bound port; `localhost`,
  `127.0.0.1` and `[::1]` when that address is loopback; the machine's own names when bound
  beyond loopback; and names the user adds (`--allowed-host NAME[:PORT]`). A rebinding page's
  requests carry its own name, never one of these;
- an `Origin` that is present and not one of those hosts over http or https (403; `null`, the
  origin of sandboxed frames and files, included): a page elsewhere posting here;
- `Sec-Fetch-Site` other than `same-origin` or `none` (403): the browser's own word that another
  site (or another port of this one) sent the request;
- (`check_json_type`, once the endpoint is known) a POST whose `Content-Type` is not
  `application/json` (415; a `charset` parameter, if given, must be utf-8): `text/plain`, form
  and multipart bodies are what a page may send to any address without asking the server first
  (a CORS "simple request"), and JSON is what every endpoint here reads. A JSON request from
  another origin needs a CORS preflight, which no service here answers.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from email.message import Message

from flywheel.web.service_limits import Refused
from flywheel.web.service_token import is_loopback

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
SAFE_FETCH_SITES = ("same-origin", "none")  # the page itself; the user typing or pasting a URL
JSON = "application/json"
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*|\[[0-9a-f:.]+\]")  # a DNS name or IP; [IPv6]
_AUTHORITY = re.compile(rf"({_NAME.pattern})(?::([0-9]{{1,5}}))?")
_ORIGIN = re.compile(r"(https?)://([^/?#\s]+)")
_DEFAULT_PORT = {"http": 80, "https": 443}


def bracket(address: str) -> str:
    """An address as a Host header spells it: IPv6 in brackets, names lowercased."""
    address = address.strip("[]").lower()
    return f"[{address}]" if ":" in address else address


def parse_allowed_host(entry: str) -> tuple[str, int | None]:
    """(name, port or None: any port) of an `--allowed-host` entry; ValueError when it is not a
    host name or address with an optional port (no scheme, path, user or wildcard)."""
    match = _AUTHORITY.fullmatch(entry.strip().lower())
    if not match or not 0 < int(match[2] or 1) < 65536:
        raise ValueError(f"--allowed-host {entry!r} must be a host name or address with an optional "
                         "port, e.g. review.example.org or 10.0.0.5:8700")
    return bracket(match[1]), None if match[2] is None else int(match[2])


class OriginRule:
    """The hosts a server bound to (`host`, `port`) answers to, and the checks of `check`."""

    def __init__(self, host: str, port: int, allowed_hosts=()):
        self.port = port
        self.names: set[str] = set()     # answered on the bound port (or without one on 80)
        self.any_port: set[str] = set()  # user-named hosts without a port: any port
        self.exact: set[tuple[str, int]] = set()
        for entry in allowed_hosts:
            name, entry_port = parse_allowed_host(entry)
            (self.any_port.add(name) if entry_port is None else self.exact.add((name, entry_port)))
        bound = host.strip("[]")
        if is_loopback(bound):
            self.names.update(LOOPBACK_NAMES)
        elif bound:  # beyond loopback: also the machine's own names (a rebinding page has its own)
            self.names.update(bracket(n) for n in {socket.gethostname(), socket.getfqdn()} if n)
        if bound and bound not in ("0.0.0.0", "::"):
            self.names.add(bracket(bound))

    def allows(self, authority: str, local_address: str, default_port: int = 80) -> bool:
        """Whether `authority` (a Host header, or an Origin's host[:port]) names this server, for a
        connection that arrived on `local_address`."""
        match = _AUTHORITY.fullmatch(authority.strip().lower())
        if not match:
            return False
        name, port = bracket(match[1]), int(match[2]) if match[2] else default_port
        if name in self.any_port or (name, port) in self.exact:
            return True
        if port != self.port:
            return False
        return name in self.names or name in _local_names(local_address)

    def check(self, headers: Message, local_address: str) -> None:
        """Refused unless the request's Host, Origin and Sec-Fetch-Site say it comes from a
        client of this server, not a page elsewhere (check_json_type is the body's part)."""
        hosts = headers.get_all("Host") or []
        if len(hosts) != 1:
            raise Refused(400, "a request needs exactly one Host header")
        if not self.allows(hosts[0], local_address):
            raise Refused(403, f"Host {hosts[0][:100]!r} is not a name this server answers to (a "
                          "page using DNS rebinding sends its own); if it is yours, start the "
                          "server with --allowed-host NAME")
        origins = headers.get_all("Origin") or []
        if origins:
            match = _ORIGIN.fullmatch(origins[0].strip().lower()) if len(origins) == 1 else None
            if not match or not self.allows(match[2], local_address, _DEFAULT_PORT[match[1]]):
                raise Refused(403, f"requests from the page at Origin {origins[0][:100]!r} are refused: "
                              "only this server's own page and clients that are not browsers may call it")
        sites = headers.get_all("Sec-Fetch-Site") or []
        if any(site.strip().lower() not in SAFE_FETCH_SITES for site in sites):
            raise Refused(403, f"a request sent by another site (Sec-Fetch-Site: {sites[0][:40]}) is "
                          "refused; open the link by pasting it into the address bar")


def check_json_type(headers: Message) -> None:
    """Refused(415) unless the body is declared `application/json` (charset, if any, utf-8)."""
    types = headers.get_all("Content-Type") or []
    if len(types) != 1:
        raise Refused(415, "the body must be sent with Content-Type: application/json")
    media, *params = (part.strip() for part in types[0].split(";"))
    charsets = [p.split("=", 1)[1].strip().strip('"').lower() for p in params
                if p.lower().startswith("charset=")]
    if media.lower() != JSON or any(c not in ("utf-8", "utf8") for c in charsets):
        raise Refused(415, f"the body must be JSON (Content-Type: application/json), not "
                      f"{types[0][:80]!r}: a page elsewhere can send other types without asking")


def _local_names(local_address: str) -> tuple[str, ...]:
    """The Host spellings of the address a connection arrived on (an IPv4 client of an IPv6
    wildcard socket arrives on ::ffff:a.b.c.d, and says a.b.c.d)."""
    try:
        address = ipaddress.ip_address(local_address.split("%", 1)[0])
    except ValueError:
        return ()
    mapped = getattr(address, "ipv4_mapped", None)
    names = (bracket(str(address)),) + ((str(mapped),) if mapped else ())
    return names + (LOOPBACK_NAMES if address.is_loopback or (mapped and mapped.is_loopback) else ())
