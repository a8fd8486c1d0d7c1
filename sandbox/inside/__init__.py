"""Programs that run INSIDE the warm pool's sandbox, on the sandbox's interpreter: the fork server
(`forkserver.py`), its attempt process (`forkserver_child.py`) and a session's file operations
(`forkserver_files.py`).

Standard library only, and never imported on the host: pool.py ships these files by name, with
../seccomp.py, into the server's sandbox, where they import one another by their bare names.
"""
