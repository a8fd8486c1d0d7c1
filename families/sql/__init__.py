"""The sql family: a query run in the sandbox on the task's fixture database (harnesses/sql.py),
its result sets compared with the reference's (`sql_result`); Spider-like task files; the guard
every task SQL runs under (sqlite_guard.py)."""
