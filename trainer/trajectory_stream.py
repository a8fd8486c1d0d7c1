"""An iteration's trajectories streamed from Parquet, in memory bounded by a window of rows.

    rows = StreamedRows(table_dataset(uri, "trajectories", missing_ok=False))
    check(rows.digests)                       # counted while the rows streamed past
    train_on_minibatches(policy, optimizer, rows, cfg, seed)

Two passes, chosen over a shuffle buffer so that the minibatches are exactly those of rows held in
memory (one uniform permutation of the whole iteration per epoch, from the seed):

1. The index pass streams the small columns once (filtered, advantage, checkpoint_digest and the
   response lengths; under per-turn credit the turns too): the numbers of the rows that carry
   signal (trainer/credit.py `has_signal`), their token counts, the longest response, non-finite
   advantages and the digest counts. What it keeps is one int64 per row with signal (0.8 MB per
   100k rows), no tokens.
2. Each epoch's permutation is cut into windows of `window_rows` rows. For each window one scan of
   the training columns picks out the window's rows (Arrow, columnar), puts them in permutation
   order and hands them out a minibatch at a time as dicts. Memory: one window of Arrow rows, one
   minibatch of dicts, the scanner's few batches.

Why not a shuffle buffer: the table is written sorted by domain, task and sample, so a bounded
buffer yields minibatches of one domain and of whole groups at a time, which changes what the
update learns. The price of exactness is one scan per window: ceil(rows with signal / window)
scans per epoch, each reading only TRAIN_COLUMNS. When all rows with signal fit in one window the
window is read once and kept for every epoch (a small iteration costs two reads, as before).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from flywheel.schemas.read import scan_batches
from flywheel.trainer.credit import carried_advantages, has_signal, signal_columns
from flywheel.trainer.trajectory_batches import TRAIN_COLUMNS

INDEX_COLUMNS = ["checkpoint_digest", "response_token_ids"]  # and credit.signal_columns
WINDOW_ROWS = 16384  # ~1-2 KB of Arrow per row for short responses: tens of MB


class StreamedRows:
    """A MinibatchSource (trainer/train_step.py) over a trajectories `table_dataset`."""

    def __init__(self, dataset: ds.Dataset, window_rows: int = WINDOW_ROWS,
                 batch_size: int = 1024, credit: str = "outcome"):
        self.dataset, self.window_rows, self.batch_size = dataset, window_rows, batch_size
        self.n_rows, self.digests = 0, Counter()
        kept, tokens, longest, non_finite = [], 0, 0, 0
        columns = signal_columns(credit)
        for batch in scan_batches(dataset, "trajectories", INDEX_COLUMNS + columns, batch_size):
            self.digests.update(batch.column("checkpoint_digest").to_pylist())
            rows = batch.select(columns).to_pylist()
            signal = np.array([has_signal(r, credit) for r in rows], dtype=bool)
            lengths = pc.list_value_length(batch.column("response_token_ids")).fill_null(0)
            lengths = lengths.to_numpy(zero_copy_only=False)[signal]
            kept.append(np.flatnonzero(signal) + self.n_rows)
            tokens += int(lengths.sum())
            longest = max(longest, int(lengths.max(initial=0)))
            non_finite += sum(not np.all(np.isfinite(carried_advantages(rows[i], credit)))
                              for i in np.flatnonzero(signal))  # NaN is signal, then refused
            self.n_rows += batch.num_rows
        self.kept = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
        self.n_sequences, self.n_tokens = len(self.kept), tokens
        self.longest_response, self.n_non_finite = longest, non_finite
        self._whole: pa.Table | None = None  # all rows with signal, when they fit in one window

    def minibatches(self, order: np.ndarray, size: int, rank: int = 0,
                    world: int = 1) -> Iterator[list[dict]]:
        """The rows numbered by `order` (see MinibatchSource), `size` at a time; with `world`
        ranks, this rank's share of each minibatch only (the others' rows never become dicts,
        and are not read unless the whole iteration fits in one kept window)."""
        window = max(size, self.window_rows // size * size)  # windows hold whole minibatches
        for start in range(0, len(order), window):
            picks = order[start : start + window]
            if world == 1:
                rows = self._window(picks)
                for first in range(0, rows.num_rows, size):
                    yield rows.slice(first, size).to_pylist()
                continue
            shares = [np.arange(first, min(first + size, len(picks)))[rank::world]
                      for first in range(0, len(picks), size)]
            mine = np.concatenate(shares)
            rows = self._window(picks[mine]) if len(mine) else None  # none: read nothing
            offset = 0
            for share in shares:
                yield rows.slice(offset, len(share)).to_pylist() if len(share) else []
                offset += len(share)

    def _window(self, picks: np.ndarray) -> pa.Table:
        """The training columns of the rows with signal numbered `picks`, in that order."""
        if len(self.kept) <= self.window_rows:
            if self._whole is None:
                self._whole = self._read(self.kept)
            return self._whole.take(pa.array(picks))
        return self._read(self.kept[picks])

    def _read(self, row_numbers: np.ndarray) -> pa.Table:
        """The rows at `row_numbers` (numbers in the scan), in that order: one scan, stopped
        after the last row needed."""
        wanted = np.sort(row_numbers)
        pieces, offset = [], 0
        for batch in scan_batches(self.dataset, "trajectories", TRAIN_COLUMNS, self.batch_size):
            lo, hi = np.searchsorted(wanted, [offset, offset + batch.num_rows])
            if hi > lo:
                pieces.append(batch.take(pa.array(wanted[lo:hi] - offset)))
            offset += batch.num_rows
            if hi == len(wanted):
                break
        if sum(p.num_rows for p in pieces) != len(wanted):
            raise RuntimeError("the trajectories changed while the trainer read them")
        rows = pa.Table.from_batches(pieces)
        return rows.take(pa.array(np.searchsorted(wanted, row_numbers)))
