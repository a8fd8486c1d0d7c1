"""The warm pool's attempt process (X): limits, seccomp, and `python -I ARGV` in a warm interpreter.

Shipped into the sandbox beside forkserver.py and seccomp.py; standard library only.
"""

import atexit
import ctypes
import os
import resource
import runpy
import sys
import threading
import traceback
import types

from seccomp import seccomp_filter  # shipped beside this file

libc = ctypes.CDLL(None, use_errno=True)
WORKDIR = "/sandbox"  # the attempts' work dir, where bwrap put the server's (bwrap.WORKDIR)
def install_seccomp() -> None:
    """Load seccomp_filter() into this process (no_new_privs is already set by bwrap)."""
    program = seccomp_filter()
    if not program:
        return
    buf = ctypes.create_string_buffer(program)

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    check(libc.prctl(22, 2, ctypes.byref(Prog(len(program) // 8, ctypes.addressof(buf))), 0, 0),
          "seccomp")  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def decode_output(data):
    """As contract.decode_output (this side cannot import flywheel): what the code emitted, as
    text any table stores; invalid UTF-8 becomes U+FFFD."""
    return bytes(data).decode("utf-8", "replace")


def check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def drop_capabilities():
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # capset v3: clear effective/permitted/inheritable
    check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")


def set_limits(limits):
    cpu = limits["cpu_s"]
    for res, value in ((resource.RLIMIT_AS, limits["memory_mb"] << 20), (resource.RLIMIT_CPU, cpu),
                       (resource.RLIMIT_FSIZE, limits["file_size_mb"] << 20),
                       (resource.RLIMIT_NOFILE, limits["open_files"]), (resource.RLIMIT_CORE, 0),
                       (resource.RLIMIT_NPROC, limits["processes"] + 1)):  # + the next standby
        resource.setrlimit(res, (value, value))  # CPU: SIGKILL at the limit (pid 1 drops SIGXCPU)


def run_python(argv):
    """C: what `python -I ARGV` would do, in this warm interpreter. Returns the exit code."""
    # The error handlers CPython picks under the sandbox's C.UTF-8 locale, as a cold run has them
    sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", errors="surrogateescape", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", errors="backslashreplace",
                                       closefd=False, buffering=1)
    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        elif argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:  # what runpy.run_path does for a plain file, without its 1.5 ms of importer probing
            sys.argv, path = list(argv), os.path.abspath(argv[0])
            main = types.ModuleType("__main__")
            main.__file__, main.__cached__ = path, None
            sys.modules["__main__"] = main
            try:
                with open(path, "rb") as f:
                    source = f.read()
            except OSError as e:  # as CPython says it, with its exit status
                print(f"python3: can't open file {path!r}: [Errno {e.errno}] {e.strerror}",
                      file=sys.stderr)
                return 2
            exec(compile(source, path, "exec"), main.__dict__)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException as e:
        tb = e.__traceback__  # the code's frames only, as a fresh interpreter would print them
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>"):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        code = 1
    threading._shutdown()  # as at interpreter exit: wait for non-daemon threads, run atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120  # what CPython exits with when flushing stdout fails
    return code


def be_code(req, out_w, err_w, setup_w):
    """The code's process (X, capabilities dropped): limits, seccomp, then the code; never returns.
    `setup_w` reports a failure before the code runs; it is closed (with every other fd but 0-2)
    just before, so the code can neither write to it nor see its end of anything."""
    stdin = os.memfd_create("stdin")
    os.write(stdin, req["stdin"].encode("utf-8", "surrogatepass"))  # as contract.encode_text
    os.lseek(stdin, 0, os.SEEK_SET)
    for src, dst in ((stdin, 0), (out_w, 1), (err_w, 2)):
        os.dup2(src, dst)
    os.chdir(WORKDIR)
    set_limits(req["limits"])
    install_seccomp()
    os.closerange(3, 1 << 16)
    if req["argv"][0] != "python":
        try:
            os.execv(req["argv"][0], req["argv"])
        except OSError as e:  # as a shell says it, with its exit status
            os.write(2, f"{req['argv'][0]}: {e.strerror}\n".encode())
            os._exit(127)
    os._exit(run_python(req["argv"][1:]) & 0xFF)
