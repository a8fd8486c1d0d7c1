"""AttemptCoder: how Beam encodes the attempt record (records/attempt.py).

The field values in order, through Beam's deterministic primitives coder (dicts by sorted key), so
equal attempts always encode to equal bytes, whichever worker built them. Registered for Attempt
on import; transforms/__init__.py imports it, so every Beam stage has it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import apache_beam as beam

from flywheel.domains.episodes import EpisodeState
from flywheel.records.attempt import FIELDS, Attempt
from flywheel.sandbox import ExecResult

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _maybe(fn):
    return lambda value: None if value is None else fn(value)


def _fields(record) -> tuple:
    """A frozen dataclass's field values in order (their own values, not copies)."""
    return tuple(getattr(record, f.name) for f in dataclasses.fields(record))


# Fields that the primitives coder cannot encode deterministically: (to primitives, back).
_AS_PRIMITIVES = {
    "started_at": (_maybe(lambda t: (t - _EPOCH) // dt.timedelta(microseconds=1)),
                   _maybe(lambda us: _EPOCH + dt.timedelta(microseconds=us))),
    "finished_at": (_maybe(lambda t: (t - _EPOCH) // dt.timedelta(microseconds=1)),
                    _maybe(lambda us: _EPOCH + dt.timedelta(microseconds=us))),
    "execution": (_maybe(dataclasses.astuple), _maybe(lambda values: ExecResult(*values))),
    "episode": (_maybe(_fields), _maybe(lambda values: EpisodeState(*values))),
}


class AttemptCoder(beam.coders.Coder):
    """Attempt <-> bytes: the field values in order (timestamps as UTC microseconds, the tables'
    precision; the sandbox result and the episode state as their fields), deterministically
    encoded."""

    def __init__(self, values: beam.coders.Coder | None = None):
        """`values`: the coder of the field values (default: Beam's deterministic primitives
        coder, which pickles a value of a type it does not know)."""
        self._values = values or beam.coders.FastPrimitivesCoder().as_deterministic_coder("Attempt")

    def encode(self, attempt: Attempt) -> bytes:
        return self._values.encode(tuple(
            _AS_PRIMITIVES[name][0](value) if name in _AS_PRIMITIVES else value
            for name, value in ((name, getattr(attempt, name)) for name in FIELDS)))

    def decode(self, encoded: bytes) -> Attempt:
        return Attempt(*(_AS_PRIMITIVES[name][1](value) if name in _AS_PRIMITIVES else value
                         for name, value in zip(FIELDS, self._values.decode(encoded))))

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return Attempt


beam.coders.registry.register_coder(Attempt, AttemptCoder)
