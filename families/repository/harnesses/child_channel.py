"""A report from a child process that the code it runs cannot forge by printing or by path.

The repository harness (repo.py, repo_checks.py) starts children that run the repository's code:
the trusted pytest run (pytest_report.py) and the visible tests' runner. What those children
print is the model's to write, so their counts never come from it. Instead:

- the child starts as `python -I -B -c LAUNCHER FD`: the launcher reads its whole brief from FD
  (an unlinked file the parent wrote: a fresh nonce, the modules to run as source text, the
  entry point, its arguments), closes FD, and only then runs anything: no file on disk that the
  code could have rewritten is executed, and the nonce exists only in the child's memory;
- the child writes its records, one JSON line each, to another unlinked file it inherited by
  descriptor (no path reaches it), each line led by HMAC-SHA256(nonce, line) (`Writer`);
- the parent keeps the lines whose MAC verifies and reports any other line as forged
  (`run_child`). Code in the child's own interpreter could still find the writer in memory:
  that is what pytest_report.py's tamper checks are for.

Standard library only (loaded by path in the sandbox, and sent to the children as text).
"""

import hashlib
import hmac
import json
import os
import secrets
import sys
import tempfile

MAX_REPORT = 1 << 23  # bytes of records a child may write
LAUNCHER = """\
import os, sys
fd = int(sys.argv[1])
chunks = []
while True:
    chunk = os.read(fd, 1 << 20)
    if not chunk:
        break
    chunks.append(chunk)
os.close(fd)
import json, types
given = json.loads(b"".join(chunks))
del chunks
modules = {}
for name, path, source, register in given.pop("modules"):
    module = types.ModuleType(name)
    module.__file__ = path
    if register:
        sys.modules[name] = module
    modules[name] = module
    exec(compile(source, path, "exec"), vars(module))
module, function = given.pop("entry")
sys.exit(getattr(modules[module], function)(given, modules))
"""


class Writer:
    """The child's side: signed records on the inherited report descriptor."""

    def __init__(self, given):
        nonce = given.pop("nonce")
        self._mac = hmac.new(bytes.fromhex(nonce), digestmod=hashlib.sha256)
        self._fd = os.dup(given.pop("report_fd"))  # not inheritable: commands the tests start lack it
        self._dumps = json.dumps

    def send(self, record):
        payload = self._dumps(record, sort_keys=True)
        mac = self._mac.copy()
        mac.update(payload.encode())
        data = (mac.hexdigest() + " " + payload + "\n").encode()
        while data:
            data = data[os.write(self._fd, data):]


def verify(data, nonce):
    """(records, forged): the JSON records of the lines `nonce` signed, and whether any other
    line was there (written by something that did not hold the key)."""
    key, records, forged = bytes.fromhex(nonce), [], False
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        mac, _, payload = line.partition(b" ")
        want = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, want):
            forged = True
            continue
        try:
            record = json.loads(payload)
        except ValueError:
            forged = True
            continue
        records.append(record) if isinstance(record, dict) else None
    return records, forged


def run_child(h, modules, entry, args, budget_s, log_bytes, env=None):
    """Run `entry` ((module, function)) of `modules` ([(name, path, source, register)]) in a
    child: (exit code or None on timeout, its output's tail, its signed records, forged)."""
    nonce = secrets.token_hex(32)
    work = os.path.join(h.HERE, ".flywheel")
    os.makedirs(work, exist_ok=True)
    with tempfile.TemporaryFile(dir=work) as report, tempfile.TemporaryFile(dir=work) as brief:
        brief.write(json.dumps({"nonce": nonce, "report_fd": report.fileno(), "modules": modules,
                                "entry": list(entry), "args": args}).encode())
        brief.seek(0)
        code, out = h.run_logged([sys.executable, "-I", "-B", "-c", LAUNCHER, str(brief.fileno())],
                                 budget_s, log_bytes, pass_fds=(brief.fileno(), report.fileno()),
                                 env=env, on_start=brief.close)
        size = os.fstat(report.fileno()).st_size
        data = os.pread(report.fileno(), MAX_REPORT + 1, 0)
    if size > MAX_REPORT:
        return code, out, [], True
    records, forged = verify(data, nonce)
    return code, out, records, forged
