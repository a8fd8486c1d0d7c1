"""`flywheel review`: the page where people label a run's queued attempts, and what the labels say.

    flywheel review serve --run-dir runs/r [--host 127.0.0.1] [--port 8810] [--token-file T]
    flywheel review stats --run-dir runs/r [--format table|json]

`serve` prints the page's URL, token included, and serves until Ctrl-C (pipelines/review_page.py).
Without --token-file it makes a token for this session and listens on loopback only; an address
beyond loopback needs --token-file. A token file that is empty or not a header-safe token, or a
refused address, ends it with status 2 and one line on stderr. `stats` prints the queue's counts
per iteration, the reviewers' agreement, and the audit's disagreement with the verifier, overall
and per domain (pipelines/review_stats.py); `--format json` prints them as one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table


def add_parser(sub) -> None:
    p = sub.add_parser("review", help="label queued attempts on a local web page; label statistics")
    cmds = p.add_subparsers(dest="review_command", required=True)
    serve = cmds.add_parser("serve", help="serve the review page for a run")
    serve.add_argument("--run-dir", required=True, help="the run (local path or gs://...)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8810, help="0 picks a free port (default: %(default)s)")
    serve.add_argument("--token-file", type=Path, default=None,
                       help="file holding the token (default: a fresh one, loopback only)")
    stats = cmds.add_parser("stats", help="queue counts, reviewer agreement, audit disagreement")
    stats.add_argument("--run-dir", required=True, help="the run (local path or gs://...)")
    stats.add_argument("--format", choices=("table", "json"), default="table")


def run(args, console) -> int:
    return cmd_serve(args, console) if args.review_command == "serve" else cmd_stats(args, console)


def cmd_serve(args, console) -> int:
    from flywheel.pipelines.review_page import serve
    from flywheel.sandbox.service_token import check_token
    try:
        token = None if args.token_file is None else check_token(
            args.token_file.read_text(encoding="utf-8"), f"the token file {args.token_file}")
        serve(args.run_dir, args.host, args.port, token, ready=lambda line: print(line, flush=True))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _share(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def cmd_stats(args, console) -> int:
    from flywheel.pipelines.review_stats import read_rows, summary
    stats = summary(*read_rows(args.run_dir))
    if args.format == "json":
        print(json.dumps(stats, indent=2))
        return 0
    counts = Table("iteration", "queued", "audit", "labeled", "pending", title="review queue")
    for row in stats["counts"]:
        counts.add_row(*(str(row[k]) for k in ("iteration", "queued", "audit", "labeled", "pending")))
    if stats["counts"]:
        counts.add_row("all", *(str(sum(r[k] for r in stats["counts"]))
                                for k in ("queued", "audit", "labeled", "pending")), style="bold")
    console.print(counts)
    agree = stats["agreement"]
    table = Table("reviewers", "attempts", "agree", "kappa", title="agreement (pass = score >= 0.5)")
    for pair in agree["by_pair"]:
        table.add_row(escape(" / ".join(pair["reviewers"])), str(pair["attempts"]), _share(pair["agree"]),
                      _number(pair["kappa"]))
    table.add_row("all pairs", str(agree["pairs"]), _share(agree["agree"]), _number(agree["kappa"]),
                  style="bold")
    console.print(table)
    console.print(f"{stats['labels']} labels by {stats['reviewers']} reviewers; mean |score "
                  f"difference| between reviewers: {_number(agree['mean_abs_diff'])}")
    audit = Table("domain", "audited", "labeled", "labels", "disagree", "verifier pass, human fail",
                  "verifier fail, human pass", title="audit: people vs the verifier")
    rows = [(name, a, None) for name, a in stats["audit"]["by_domain"].items()]
    for name, a, style in [*rows, ("all", stats["audit"], "bold")]:
        audit.add_row(escape(name), str(a["queued"]), str(a["labeled"]), str(a["labels"]),
                      _share(a["disagree"]), str(a["human_fail_verifier_pass"]),
                      str(a["human_pass_verifier_fail"]), style=style)
    console.print(audit)
    return 0
