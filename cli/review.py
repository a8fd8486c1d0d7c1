"""`flywheel review`: the page where people label a run's queued attempts, and what the labels say.

    flywheel review add-reviewer --run-dir runs/r NAME [--host H --port P]
    flywheel review serve --run-dir runs/r [--host 127.0.0.1] [--port 8810] [--token-file T]
                          [--allowed-host NAME[:PORT] ...]
    flywheel review stats --run-dir runs/r [--format table|json]

Each reviewer has a token of their own, and a label records the reviewer its token names
(feedback/review_reviewers.py). `add-reviewer` gives NAME a new token, keeps only its digest in
the run (`review/reviewers.json`), and prints the token and the page's link once. `serve`
serves the page for every registered reviewer and for those of --token-file (lines
`name:token`; one bare token is the reviewer named by your login), and prints the link of each
reviewer whose token it holds; with neither, you are the one reviewer, with a token made for
this session, on loopback only. An address beyond loopback needs reviewers' tokens. A token
file that is empty or not header-safe tokens, or a refused address, ends it with status 2 and
one line on stderr. `stats` prints the queue's counts per iteration, the reviewers' agreement,
and the audit's disagreement with the verifier, overall and per domain
(feedback/review_stats.py); `--format json` prints them as one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from flywheel.cli.arg_types import nonnegative_int


def add_parser(sub) -> None:
    p = sub.add_parser("review", help="label queued attempts on a local web page; label statistics")
    cmds = p.add_subparsers(dest="review_command", required=True)
    serve = cmds.add_parser("serve", help="serve the review page for a run")
    serve.add_argument("--run-dir", required=True, help="the run (local path or gs://...)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=nonnegative_int, default=8810,
                       help="0 picks a free port (default: %(default)s)")
    serve.add_argument("--token-file", type=Path, default=None,
                       help="reviewers' tokens: lines name:token, or one token (yours, named by your "
                            "login); make one with `openssl rand -hex 32`. Default: the reviewers "
                            "added with `flywheel review add-reviewer`; none: you, with a fresh "
                            "token, loopback only")
    serve.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                       help="a further Host name reviewers use (a proxy's, a DNS name); requests "
                            "naming any other host are refused (DNS rebinding). Repeatable")
    add = cmds.add_parser("add-reviewer", help="give a reviewer their own token (printed once); "
                                               "their labels are recorded under NAME")
    add.add_argument("name", help="the reviewer's name: letters, digits, _ . - (at most 64)")
    add.add_argument("--run-dir", required=True, help="the run (local path or gs://...)")
    add.add_argument("--host", default="127.0.0.1", help="the host of the printed link (default: %(default)s)")
    add.add_argument("--port", type=nonnegative_int, default=8810,
                     help="the port of the printed link (default: %(default)s)")
    stats = cmds.add_parser("stats", help="queue counts, reviewer agreement, audit disagreement")
    stats.add_argument("--run-dir", required=True, help="the run (local path or gs://...)")
    stats.add_argument("--format", choices=("table", "json"), default="table")


def run(args, console) -> int:
    return {"serve": cmd_serve, "stats": cmd_stats, "add-reviewer": cmd_add_reviewer}[
        args.review_command](args, console)


def cmd_serve(args, console) -> int:
    from flywheel.feedback.review_page import login_name, serve
    from flywheel.web.service_token import read_named_tokens
    try:
        reviewers = None if args.token_file is None else read_named_tokens(
            args.token_file, bare_name=login_name())
        serve(args.run_dir, args.host, args.port, reviewers, ready=lambda line: print(line, flush=True),
              allowed_hosts=args.allowed_host)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_add_reviewer(args, console) -> int:
    from flywheel.feedback.review_reviewers import add_reviewer
    from flywheel.web.same_origin import bracket
    try:
        token, replaced = add_reviewer(args.run_dir, args.name)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    note = " (their previous token no longer works)" if replaced else ""
    print(f"reviewer {args.name} added to {args.run_dir}{note}; their token, shown only now: {token}")
    print(f"their link: http://{bracket(args.host)}:{args.port}/?token={token}")
    return 0


def _share(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def cmd_stats(args, console) -> int:
    from flywheel.feedback.review_stats import read_rows, summary
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
