"""The HTML report's "People's labels" section: what the review queue holds per iteration, how
reviewers agree, and how often they overrule the verifier on audited attempts
(feedback/review_stats.py; `flywheel review stats` prints the same)."""

from __future__ import annotations

import html

from flywheel.feedback.review_stats import read_rows, summary


def _share(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def review_section(run_dir: str) -> str | None:
    """The section's HTML, or None for a run that queued nothing for review."""
    queue, reviews = read_rows(run_dir)
    if not queue:
        return None
    s = summary(queue, reviews)
    rows = "".join(f"<tr><td>{c['iteration']}</td><td>{c['queued']}</td><td>{c['audit']}</td>"
                   f"<td>{c['labeled']}</td><td>{c['pending']}</td></tr>" for c in s["counts"])
    a, audit = s["agreement"], s["audit"]
    domains = "".join(
        f"<tr><td>{html.escape(d)}</td><td>{v['labeled']}</td><td>{_share(v['disagree'])}</td>"
        f"<td>{v['human_fail_verifier_pass']}</td><td>{v['human_pass_verifier_fail']}</td></tr>"
        for d, v in audit["by_domain"].items())
    return (
        "<section><h2>People's labels</h2>"
        f"<p>{s['labels']} labels from {s['reviewers']} reviewers. Agreement on attempts labelled "
        f"by two or more: {a['pairs']} pairs, share agreeing on pass/fail {_share(a['agree'])}, "
        f"mean |score difference| {_share(a['mean_abs_diff'])}, Cohen's kappa "
        f"{_share(a['kappa'])}.</p>"
        "<table><tr><th>iteration</th><th>queued</th><th>of them audit</th><th>labelled</th>"
        f"<th>pending</th></tr>{rows}</table>"
        f"<p>Audits (verified attempts sampled for people): {audit['labeled']} of "
        f"{audit['queued']} labelled; people overrule the verifier in "
        f"{_share(audit['disagree'])} of {audit['labels']} labels "
        f"({audit['human_fail_verifier_pass']} failed what the verifier passed: what a reward "
        f"hack looks like; {audit['human_pass_verifier_fail']} the other way).</p>"
        + (("<table><tr><th>domain</th><th>audits labelled</th><th>disagree</th>"
            "<th>people fail, verifier passes</th><th>people pass, verifier fails</th></tr>"
            f"{domains}</table>") if domains else "")
        + "</section>")
