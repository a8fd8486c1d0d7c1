"""Programs that run INSIDE the warm pool's sandbox, on the sandbox's interpreter: the fork server
(`forkserver.py`), its zygote (`zygote.py`) and its attempt process (`forkserver_child.py`).

Standard library only, and never imported on the host: pool.py ships these files by name, with
../seccomp.py, into the server's sandbox, where they import one another by their bare names.
"""
