"""`flywheel import`: logged LLM interactions as SFT examples, preference pairs or RL tasks.

    flywheel import logs/*.jsonl.gz --out imported/
    flywheel import chat.jsonl gs://b/recorder --out gs://b/imported --as tasks,sft,pairs \\
        --domain chat_arith --field answer=metadata.expected --drop-field metadata.user_email \\
        --redact email,phone

Inputs are OpenAI chat logs (fine-tuning `messages`, request/response pairs, batch-API lines,
DPO rows), a plain {prompt, response, feedback, correction, chosen, rejected} form, or a
`flywheel serve` recorder folder; docs/IMPORT.md shows each. The work is
feedback/interaction_import.py; this module reads the flags and prints the summary. Exit status:
1 when any line was bad (each is an `errors` row and listed here), 2 for a usage error.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from flywheel.feedback.interaction_import import OUTPUTS, ImportOptions, InputError
from flywheel.feedback.interaction_privacy import REDACTIONS

FIELD_WORDS = ("correction", "response")
SHOWN_ERRORS = 10


class UsageError(ValueError):
    """The flags ask for something that cannot be done; the message says what was expected."""


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="turn logged LLM interactions into SFT examples, "
                                      "preference pairs or RL tasks")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="JSONL files (.gz too, local or gs://, globs) or recorder folders")
    p.add_argument("--out", required=True, metavar="DIR", help="where the tables go (local or gs://)")
    p.add_argument("--as", dest="outputs", default="sft,pairs", metavar="LIST",
                   help=f"what to make, comma-separated from {', '.join(OUTPUTS)} (tasks needs "
                        "--domain); default sft,pairs")
    p.add_argument("--domain", help="the registered domain the tasks are for (flywheel domains)")
    p.add_argument("--field", action="append", default=[], metavar="NAME=SOURCE",
                   help="a task field from each line: SOURCE is a dotted path into the line's "
                        "JSON (metadata.expected), or `correction`, or `response` (the logged "
                        "response, when its outcome was good); alternatives joined by | "
                        "(answer=correction|response: the first the line has); repeatable")
    p.add_argument("--drop-field", action="append", default=[], metavar="PATH",
                   help="remove this dotted path (from the line and each of its messages) "
                        "before anything is stored; repeatable")
    p.add_argument("--redact", default="", metavar="LIST",
                   help=f"replace these in every text: {', '.join(REDACTIONS)} (comma-separated)")
    p.add_argument("--good-rating", type=float, default=ImportOptions.good_rating, metavar="X",
                   help="a score in [0, 1] at or above X is a good outcome (thumbs up is 1, "
                        "down 0); default %(default)s")


def run(args, console) -> int:
    from flywheel.feedback.interaction_import import import_interactions
    try:
        options = import_options(args)
        summary = import_interactions(args.files, args.out, options,
                                      progress=lambda path: console.print(
                                          f"[dim]reading {escape(path)}[/]", highlight=False))
    except (UsageError, InputError) as e:
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 2
    console.print(summary_table(summary, options))
    if summary.errors:
        console.print(f"[red]{sum(summary.errors.values())} bad lines[/] (table errors), the first:",
                      highlight=False)
        for line in summary.first_errors[:SHOWN_ERRORS]:
            console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    console.print(f"wrote {escape(args.out.rstrip('/'))}/tables/"
                  + (" and tasks.jsonl" if "tasks" in options.outputs else ""), highlight=False)
    return 1 if summary.errors else 0


def import_options(args) -> ImportOptions:
    """The flags as ImportOptions; UsageError naming the flag that cannot be used."""
    outputs = frozenset(o.strip() for o in args.outputs.split(",") if o.strip())
    if not outputs or outputs - set(OUTPUTS):
        raise UsageError(f"--as {args.outputs}: expected a comma-separated list of "
                         f"{', '.join(OUTPUTS)}")
    if "tasks" in outputs and not args.domain:
        raise UsageError("--as tasks needs --domain: the registered domain the tasks are for")
    if args.domain:
        from flywheel.domains.registry import DOMAINS
        if args.domain not in DOMAINS:
            raise UsageError(f"--domain {args.domain}: unknown domain; `flywheel domains` lists them")
    fields = []
    for item in args.field:
        name, sep, source = item.partition("=")
        if not sep or not name.strip() or not source.strip():
            raise UsageError(f"--field {item}: expected NAME=SOURCE, SOURCE a dotted path or one "
                             f"of {', '.join(FIELD_WORDS)}")
        fields.append((name.strip(), source.strip()))
    if fields and "tasks" not in outputs:
        raise UsageError("--field fills task fields: add tasks to --as")
    redact = frozenset(r.strip() for r in args.redact.split(",") if r.strip())
    if redact - set(REDACTIONS):
        raise UsageError(f"--redact {args.redact}: expected a comma-separated list of "
                         f"{', '.join(REDACTIONS)}")
    if not 0 <= args.good_rating <= 1:
        raise UsageError(f"--good-rating {args.good_rating}: expected a score in [0, 1]")
    drop = tuple(p.strip() for p in args.drop_field)
    if any(not p or "" in p.split(".") for p in drop):
        raise UsageError("--drop-field: expected a dotted path such as metadata.user_email")
    return ImportOptions(outputs=outputs, domain=args.domain, fields=tuple(fields),
                         drop_fields=drop, redact=redact, good_rating=args.good_rating)


def summary_table(summary, options: ImportOptions) -> Table:
    """Rows written per output, records per outcome, and bad lines per error type."""
    table = Table(title=f"flywheel import: {summary.lines} lines read")
    table.add_column("what")
    table.add_column("rows", justify="right")
    counts = summary.counts
    if "tasks" in options.outputs:
        table.add_row("tasks", str(counts["tasks"]))
    if "sft" in options.outputs:
        table.add_row("sft_examples", str(counts["sft_examples"]))
    if "pairs" in options.outputs:
        for reason in ("correction", "choice", "rating"):
            table.add_row(f"preference_pairs: {reason}", str(counts[f"preference_pairs ({reason})"]))
    for outcome in ("good", "bad", "no outcome"):
        table.add_row(f"[dim]records: {outcome}[/]", f"[dim]{counts[outcome]}[/]")
    if counts["rated, not paired (over the bound)"]:
        table.add_row("[yellow]rated, not paired (over the bound)[/]",
                      f"[yellow]{counts['rated, not paired (over the bound)']}[/]")
    for kind, n in sorted(summary.errors.items()):
        table.add_row(f"[red]errors: {kind}[/]", f"[red]{n}[/]")
    return table
