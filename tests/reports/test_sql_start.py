"""`flywheel sql`, `flywheel status` and `flywheel report --html` start without Beam or torch:
naming a run's paths and reading its tables are pyarrow and DuckDB only (settings/layout.py
imports Beam inside the methods that touch files), the journal's headers are read Beam-free
(records/journal_files.py), and the page is written through schemas/storage."""

import json
import subprocess
import sys

from flywheel.schemas.write import write_rows


def cli_in_fresh_process(argv: list[str]) -> tuple[int, str, bool, bool]:
    """(exit code, stdout, Beam imported, torch imported) of `flywheel ARGV` in a new interpreter."""
    code = ("import contextlib, io, json, sys\n"
            "from flywheel.cli.main import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    code = main({argv!r})\n"
            "print(json.dumps([code, out.getvalue(), 'apache_beam' in sys.modules, 'torch' in sys.modules]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def test_a_query_imports_neither_beam_nor_torch(tmp_path):
    write_rows(str(tmp_path / "tables" / "metrics" / "iteration=0" / "m.parquet"), "metrics",
               [{"schema_version": "1", "run_id": "r", "iteration": 0, "domain": "d", "name": "x",
                 "value": 2.0, "policy_version": 0, "created_at": None}])
    code, out, beam, torch = cli_in_fresh_process(
        ["sql", "SELECT sum(value) AS s FROM metrics", "--run-dir", str(tmp_path), "--format", "json"])
    assert code == 0 and json.loads(out) == {"s": 2.0}
    assert (beam, torch) == (False, False)


def test_status_of_a_run_in_flight_imports_neither_beam_nor_torch(tmp_path):
    """`flywheel status` reads the journal's headers (records/journal_files.py) without Beam: an
    iteration in flight shows its ended episodes."""
    from flywheel.records.journal_files import journal_folder, pack
    from flywheel.schemas import storage
    from flywheel.settings.layout import RunLayout
    layout = RunLayout(str(tmp_path))
    layout.write_json(layout.run_json, {"run_id": "r", "seed": 0, "config": {"iterations": 2}})
    for i, end in enumerate(["submitted", "max_turns"]):
        header = {"key": f"k{i}", "task_id": f"t{i}", "domain": "fix_function", "turns": 2 + i,
                  "end": end, "seconds": 1.5, "ended_at": float(i)}
        storage.write_whole(storage.join(journal_folder(str(tmp_path), 0), f"k{i}.episode"),
                            pack([json.dumps(header).encode(), b"", b""]))
    code, out, beam, torch = cli_in_fresh_process(["status", "--run-dir", str(tmp_path), "--format", "json"])
    episodes = json.loads(out)["in_progress"]["episodes"]
    assert code == 0 and (episodes["ended"], episodes["turns"]) == (2, 5), out
    assert episodes["by_end"] == {"max_turns": 1, "submitted": 1}
    assert (beam, torch) == (False, False)


def test_the_html_report_imports_neither_beam_nor_torch(tmp_path):
    """`flywheel report --html` reads the tables and writes one file through schemas/storage."""
    from flywheel.settings.layout import RunLayout
    layout = RunLayout(str(tmp_path))
    layout.write_json(layout.run_json, {"run_id": "r", "seed": 0, "config": {"iterations": 1}})
    write_rows(str(tmp_path / "tables" / "metrics" / "iteration=0" / "m.parquet"), "metrics",
               [{"schema_version": "1", "run_id": "r", "iteration": 0, "domain": "d",
                 "name": "heldout_pass@1", "value": 0.5, "policy_version": 0, "created_at": None}])
    page = tmp_path / "out" / "report.html"
    code, out, beam, torch = cli_in_fresh_process(["report", "--run-dir", str(tmp_path), "--html", str(page)])
    assert code == 0 and "wrote" in out and page.read_bytes().startswith(b"<!DOCTYPE html>"), out
    assert (beam, torch) == (False, False)
