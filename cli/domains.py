"""`flywheel domains`: every registered domain with its tier, verifier and task count.

    flywheel domains                 # a table
    flywheel domains --format json   # one JSON object per line
"""

from __future__ import annotations

import json

from flywheel.domains.registry import all_domains


def domain_rows(prefix: str = "") -> list[dict]:
    return [d.describe() for name, d in all_domains().items() if name.startswith(prefix)]


def add_parser(sub) -> None:
    p = sub.add_parser("domains", help="list the domains: name, tier, verifier, task count")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--prefix", default="", help="only domains whose name starts with this")


def run(args, console) -> int:
    from rich.table import Table
    rows = domain_rows(args.prefix)
    if args.format == "json":
        for row in rows:
            print(json.dumps(row))
        return 0
    table = Table("name", "tier", "verifier", "tasks", "sandbox", "description",
                  title=f"{len(rows)} domains")
    for r in rows:
        table.add_row(r["name"], str(r["tier"]), r["verifier"], str(r["tasks"]), r["sandbox"] or "-",
                      r["description"])
    console.print(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from rich.console import Console
    parser = argparse.ArgumentParser(prog="flywheel")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv), Console())
