"""Per-domain watch of a run: is each domain still learning, and is one crowding out the others?

With many domains in one run, the all-domain curves hide a domain that takes over the update while
the rest regress, and a policy whose sampling has collapsed onto one answer. Three pieces, each a
plain function (no Beam):

- `domain_rows`: an iteration's `watch/*` metrics rows, per domain and for '*', from its
  `trajectories` table (read through `flywheel.schemas`, so a gs:// run works as a local one);
- `warnings`: from the metrics of a run up to iteration K, the domains that diverge (their success
  rises while the others' falls) or whose entropy collapsed; pure and deterministic;
- `warning_rows`: those warnings as `watch/warning_<kind>` metrics rows, queryable with SQL and
  drawn by the HTML report (reports/html.py).

    rows = domain_rows(run_dir, k, run_id)
    found = warnings(metrics_up_to_k_before + rows)     # held-out pass@1 among them, if any
    rows += warning_rows(found, run_id)                  # -> tables/metrics/iteration=k
    for w in found: event("domain_warning", w)           # cli/progress.py: a `warning:` line
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flywheel.settings.layout import RunLayout
from flywheel.schemas import table_dataset
from flywheel.schemas.read import scan_batches

ALL = "*"
COLUMNS = ["domain", "response_logprobs", "response_mask", "segments", "advantage", "filtered",
           "verdict"]
# the sums kept per domain, in this order
ATTEMPTS, PASSES, KEPT, SURPRISAL, TOKENS, UPDATE = range(6)
KINDS = {"diverging": "its success rose while the other domains' fell",
         "entropy_collapse": "its sampled tokens' entropy collapsed"}
"""What each warning kind means, for the report's list."""


# -- an iteration's rows ---------------------------------------------------------------------------

def domain_rows(run_dir: str, iteration: int, run_id: str) -> list[dict]:
    """`metrics` rows of iteration `iteration`, per domain and for '*' (all domains), from its
    `trajectories` table; no rows when it has none. The table holds the training attempts alone
    (held-out attempts become metrics only, `flywheel eval` writes `evaluations`), so every row
    counts. Each value:

    - `watch/entropy`: mean over the policy's sampled tokens (where `response_mask` is 1, or every
      response token of a row without a mask; an episode's earlier context segments too) of
      -logprob, the surprisal of the sampled token: a Monte Carlo estimate of the entropy of the
      sampling policy (the tempered distribution the logprobs are of), in nats per token, pooled
      over the domain's tokens;
    - `watch/success`: share of attempts whose verdict is `pass` (the training pass rate);
    - `watch/kept_frac`: share of attempts not `filtered` (kept for the loss);
    - `watch/attempt_share`: the domain's share of the iteration's attempts ('*': 1);
    - `watch/update_share`: the domain's share of the update, sum over kept rows of |advantage| x
      trained tokens, over the same sum for all domains ('*': 1; every share is 0 when nothing
      carries an advantage). Under per-turn credit the row's own (outcome) advantage stands for
      its turns'.
    """
    dataset = table_dataset(RunLayout(run_dir).table_dir("trajectories", iteration), "trajectories")
    sums: dict[str, np.ndarray] = {}
    for batch in scan_batches(dataset, "trajectories", COLUMNS):
        _add_batch(sums, batch)
    if not sums:
        return []
    sums[ALL] = np.sum(list(sums.values()), axis=0)
    total = sums[ALL]
    now = dt.datetime.now(dt.timezone.utc)
    rows = []
    for domain in sorted(sums):
        s = sums[domain]
        values = {"watch/success": s[PASSES] / s[ATTEMPTS],
                  "watch/kept_frac": s[KEPT] / s[ATTEMPTS],
                  "watch/attempt_share": s[ATTEMPTS] / total[ATTEMPTS],
                  "watch/update_share": s[UPDATE] / total[UPDATE] if total[UPDATE] > 0 else 0.0}
        if s[TOKENS] > 0:
            values["watch/entropy"] = s[SURPRISAL] / s[TOKENS]
        rows += [{"run_id": run_id, "iteration": iteration, "domain": domain, "name": name,
                  "value": float(value), "policy_version": iteration, "created_at": now}
                 for name, value in sorted(values.items())]
    return rows


def _add_batch(sums: dict[str, np.ndarray], batch: pa.RecordBatch) -> None:
    """Add one record batch's per-row figures to the per-domain `sums`."""
    n = batch.num_rows
    surprisal, tokens = _sampled(batch.column("response_logprobs"), batch.column("response_mask"), n)
    segments = batch.column("segments")
    if pc.sum(pc.list_value_length(segments)).as_py():  # episodes' earlier contexts are trained too
        flat = pc.list_flatten(segments)
        s, t = _sampled(pc.struct_field(flat, "response_logprobs"),
                        pc.struct_field(flat, "response_mask"), len(flat))
        owner = pc.list_parent_indices(segments).to_numpy()
        surprisal += np.bincount(owner, weights=s, minlength=n)
        tokens += np.bincount(owner, weights=t, minlength=n)
    kept = ~batch.column("filtered").fill_null(False).to_numpy(zero_copy_only=False)
    advantage = np.abs(batch.column("advantage").fill_null(0.0).to_numpy(zero_copy_only=False))
    passed = pc.equal(batch.column("verdict"), "pass").fill_null(False).to_numpy(zero_copy_only=False)
    figures = np.stack([np.ones(n), passed, kept, surprisal, tokens, kept * advantage * tokens])
    names, index = np.unique(np.asarray(batch.column("domain").to_pylist(), dtype=object),
                             return_inverse=True)
    for i, domain in enumerate(names):
        sums[domain] = sums.get(domain, np.zeros(6)) + figures[:, index == i].sum(axis=1)


def _sampled(logprobs: pa.Array, mask: pa.Array, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per list (n,): the sum of -logprob over the policy's own tokens, and how many there are.

    A null mask means every token is the policy's; a mask is as long as its logprobs (the trainer
    relies on it too, trainer/trajectory_batches.py)."""
    owner = pc.list_parent_indices(logprobs).to_numpy()
    values = pc.list_flatten(logprobs).to_numpy(zero_copy_only=False).astype(np.float64)
    own = np.ones(len(values))
    masked = mask.is_valid().to_numpy(zero_copy_only=False)
    if masked.any():
        flags = pc.list_flatten(mask).to_numpy(zero_copy_only=False)
        at = masked[owner]
        if at.sum() != len(flags):
            raise ValueError("a response_mask is not as long as its response_logprobs")
        own[at] = flags == 1
    own[np.isnan(values)] = 0.0  # a token without a recorded logprob says nothing
    return (np.bincount(owner, weights=-np.nan_to_num(values) * own, minlength=n),
            np.bincount(owner, weights=own, minlength=n))


# -- warnings --------------------------------------------------------------------------------------

def warnings(metrics: Iterable[Mapping] | pa.Table, iteration: int | None = None, *,
             window: int = 3, delta: float = 0.1, entropy_fraction: float = 0.2,
             entropy_floor: float = 0.05) -> list[dict]:
    """The warnings of iteration K (`iteration`, default: the latest in `metrics`), from a run's
    metrics rows up to K (rows after K are ignored; rows of other names too). Each is
    {"iteration": K, "domain", "kind", "metric", "message"}, sorted by kind, domain and metric.

    - `diverging`: over the last `window` iterations (K-window+1 .. K, the change being the value
      at K minus the first one in the window) a domain's success rose by more than `delta` while
      the mean change of the other domains (those with both values) fell by more than `delta`:
      the update may be serving one domain at the others' expense. Checked on `watch/success`
      (training pass rate) and, where recorded, `heldout_pass@1`, each on its own.
    - `entropy_collapse`: a domain's `watch/entropy` at K is below `entropy_fraction` of its value
      at its first recorded iteration, or below `entropy_floor` nats per token whatever it began
      at: the policy samples nearly one answer, and groups stop carrying signal. '*' (all
      domains) is checked too.
    """
    series = _series(metrics)
    if iteration is None:
        iteration = max((i for points in series.values() for i in points), default=None)
        if iteration is None:
            return []
    series = {key: {i: v for i, v in points.items() if i <= iteration}
              for key, points in series.items()}
    found = []
    for metric in ("watch/success", "heldout_pass@1"):
        found += _diverging(series, metric, iteration, window, delta)
    found += _entropy_collapse(series, iteration, entropy_fraction, entropy_floor)
    return sorted(found, key=lambda w: (w["kind"], w["domain"], w["metric"]))


def _series(metrics: Iterable[Mapping] | pa.Table) -> dict[tuple[str, str], dict[int, float]]:
    """{(name, domain): {iteration: value}} of the names the warnings read."""
    if isinstance(metrics, pa.Table):
        metrics = metrics.select(["iteration", "domain", "name", "value"]).to_pylist()
    out: dict[tuple[str, str], dict[int, float]] = {}
    for row in metrics:
        if row["name"] in ("watch/success", "heldout_pass@1", "watch/entropy") \
                and row["value"] is not None:
            out.setdefault((row["name"], row["domain"]), {})[int(row["iteration"])] = float(row["value"])
    return out


def _change(points: dict[int, float], first: int, last: int) -> tuple[int, float] | None:
    """(the window's first iteration with a value, value at `last` minus that value), or None."""
    inside = [i for i in points if first <= i < last]
    if last not in points or not inside:
        return None
    start = min(inside)
    return start, points[last] - points[start]


def _diverging(series, metric: str, k: int, window: int, delta: float) -> list[dict]:
    changes = {domain: _change(points, k - window + 1, k)
               for (name, domain), points in series.items() if name == metric and domain != ALL}
    changes = {d: c for d, c in changes.items() if c is not None}
    found = []
    for domain, (start, rise) in sorted(changes.items()):
        others = [c[1] for d, c in changes.items() if d != domain]
        if not others or rise <= delta:
            continue
        fall = -sum(others) / len(others)
        if fall > delta:
            found.append(_warning(k, domain, "diverging", metric,
                                  f"{metric} of {domain} rose by {rise:.3f} over iterations "
                                  f"{start}..{k} while the mean of the {len(others)} other domains "
                                  f"fell by {fall:.3f}: the update may favour {domain}"))
    return found


def _entropy_collapse(series, k: int, fraction: float, floor: float) -> list[dict]:
    found = []
    for (name, domain), points in sorted(series.items()):
        if name != "watch/entropy" or k not in points:
            continue
        first, now = min(points), points[k]
        where = "all domains" if domain == ALL else domain
        if now < floor:
            why = f"below the floor of {floor:g} nats/token"
        elif first < k and now < fraction * points[first]:
            why = (f"below {fraction:.0%} of its {points[first]:.3f} at iteration {first}")
        else:
            continue
        found.append(_warning(k, domain, "entropy_collapse", name,
                              f"entropy of {where} is {now:.3f} nats/token, {why}: the policy "
                              "samples nearly one answer there"))
    return found


def _warning(k: int, domain: str, kind: str, metric: str, message: str) -> dict:
    return {"iteration": k, "domain": domain, "kind": kind, "metric": metric, "message": message}


def warning_rows(found: Iterable[Mapping], run_id: str) -> list[dict]:
    """`metrics` rows of `warnings`: `watch/warning_<kind>` = 1.0 per iteration and domain (once,
    however many metrics gave that kind), so `SELECT * FROM metrics WHERE name LIKE
    'watch/warning_%'` lists them."""
    now = dt.datetime.now(dt.timezone.utc)
    keys = sorted({(w["iteration"], w["domain"], w["kind"]) for w in found})
    return [{"run_id": run_id, "iteration": k, "domain": domain, "name": f"watch/warning_{kind}",
             "value": 1.0, "policy_version": k, "created_at": now} for k, domain, kind in keys]
