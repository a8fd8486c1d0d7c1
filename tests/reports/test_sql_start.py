"""`flywheel sql` starts without Beam or torch: naming a run's paths and reading its tables are
pyarrow and DuckDB only (settings/layout.py imports Beam inside the methods that touch files)."""

import json
import subprocess
import sys

from flywheel.schemas.write import write_rows


def test_a_query_imports_neither_beam_nor_torch(tmp_path):
    write_rows(str(tmp_path / "tables" / "metrics" / "iteration=0" / "m.parquet"), "metrics",
               [{"schema_version": "1", "run_id": "r", "iteration": 0, "domain": "d", "name": "x",
                 "value": 2.0, "policy_version": 0, "created_at": None}])
    code = ("import contextlib, io, json, sys\n"
            "from flywheel.cli.main import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    code = main(['sql', 'SELECT sum(value) AS s FROM metrics', '--run-dir', {str(tmp_path)!r},"
            " '--format', 'json'])\n"
            "print(json.dumps([code, out.getvalue(), 'apache_beam' in sys.modules, 'torch' in sys.modules]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    code, out, beam, torch = json.loads(done.stdout.splitlines()[-1])
    assert code == 0 and json.loads(out) == {"s": 2.0}
    assert (beam, torch) == (False, False)
