"""What sandboxed code sees of the host (issue 10, class 8): what programs and the interpreter need,
nothing more; on every isolating backend. Fixtures (`isolating`): tests/conftest.py."""

import json
import os

from flywheel.sandbox import ExecRequest

LOOK = """import json, os
def ls(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return None
print(json.dumps({p: ls(p) for p in ('/', '/usr', '/usr/bin', '/usr/lib', '/usr/share', '/etc', '/usr/local',
                                     '/home', '/root', '/var', '/opt', '/srv', '/mnt', '/run')}))
"""
ARCH = f"{os.uname().machine}-linux-gnu"


def test_sandboxed_code_sees_only_what_it_needs(isolating):
    result = isolating.run(ExecRequest({}, ("python", "-c", LOOK)))
    seen = json.loads(result.stdout)
    docker = isolating.label.startswith("docker")
    for hidden in ("/usr/local", "/home", "/root", "/var", "/opt", "/srv", "/mnt", "/run"):
        assert seen[hidden] is None, (hidden, seen[hidden])
    assert set(seen["/usr"]) <= {"bin", "lib", "lib64", "lib32", "share"}, seen["/usr"]
    assert set(seen["/usr/share"] or []) <= {"zoneinfo"}, seen["/usr/share"]
    assert {p for p in seen["/usr/lib"] if not p.startswith("python3")} <= {ARCH, "locale"}, seen
    assert set(seen["/etc"] or []) <= {"alternatives"} | (  # what docker writes, and the image's
        {"passwd", "group", "hostname", "hosts", "resolv.conf", "mtab", "python3.11"} if docker else set()), seen
    if docker:
        assert open_etc(isolating, "resolv.conf") == "", "the host's DNS settings"
    assert set(seen["/usr/bin"]) <= ({"python3", "python3.11", "sh", "dash", "cp"} if docker else
                                     set(os.listdir("/usr/bin"))), seen["/usr/bin"]
    assert set(seen["/"]) <= {"bin", "lib", "lib32", "lib64", "sbin", "usr", "dev", "proc", "sys",
                              "tmp", "sandbox", "etc", "task", "flywheel", ".dockerenv"}, seen["/"]


def open_etc(backend, name):
    return backend.run(ExecRequest({}, ("python", "-c", f"print(open('/etc/{name}').read())"))).stdout.strip()


def test_what_it_needs_still_works(isolating):
    """The standard library's C parts (their shared libraries) and time zones, on every backend;
    on `local`, the shell tools that shell tasks use, through Debian's alternatives links."""
    code = ("import sqlite3, zoneinfo, ssl, ctypes, decimal, unittest, doctest, json, hashlib, zlib\n"
            "print(sqlite3.connect(':memory:').execute('select 6*7').fetchone()[0],"
            " zoneinfo.ZoneInfo('Europe/Paris').key)")
    result = isolating.run(ExecRequest({}, ("python", "-c", code)))
    assert result.stdout.split() == ["42", "Europe/Paris"], result
    if isolating.label.startswith("local"):
        tools = "echo b a | tr ' ' '\\n' | sort | awk '{print toupper($0)}' | sed 's/A/x/' | grep -c ."
        result = isolating.run(ExecRequest({}, ("sh", "-c", tools)))
        assert result.stdout == "2\n", result
