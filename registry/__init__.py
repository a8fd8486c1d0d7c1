"""One rule for every plugin registry in Flywheel: a name maps to one entry, found by importing
the registry's home.

    BACKENDS = Registry("sandbox backend", home="flywheel.sandbox.backends")

    @BACKENDS.register("local")
    class LocalBackend: ...

    BACKENDS.get("local")        # imports the home on a miss, then looks again
    BACKENDS.names()             # every entry, for help texts and errors

Discovery: the `home` is a module or a package, or several; on the first lookup that misses (or
the first listing), it is imported, and for a package every public module in it (names not
starting with `_`), so adding a plugin is one file and no list is kept by hand. A home written
`package.*` stands for each public subpackage of `package` as a home of its own: the task
families (`flywheel.families.*`) register their domains, verifiers and task formats this way,
so adding a family is one folder. Duplicates: registering a name
that another object holds raises ValueError naming both (re-registering the same object, as a
module reload does, is allowed). Standard library only: every folder of Flywheel may import it,
the sandbox included.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> entry, filled by `register` (a decorator) and completed by importing `home`."""

    def __init__(self, kind: str, home: str | tuple[str, ...] | None = None):
        self.kind, self.home = kind, home
        self._entries: dict[str, T] = {}
        self._discovered = home is None

    def register(self, name: str, entry: T | None = None):
        """`@registry.register(name)` on a function or class, or `registry.register(name, entry)`."""
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")

        def add(obj: T) -> T:
            held = self._entries.get(name)
            if held is not None and not _same(held, obj):
                raise ValueError(f"{self.kind} {name!r} is already registered by {_where(held)}; "
                                 f"{_where(obj)} cannot take the name")
            self._entries[name] = obj
            return obj

        return add if entry is None else add(entry)

    def discover(self) -> None:
        """Import each home (and every public module of it, for a package) once."""
        if self._discovered:
            return
        self._discovered = True
        for home in (self.home,) if isinstance(self.home, str) else self.home:
            if home.endswith(".*"):
                for package in _public(importlib.import_module(home[:-2]), packages=True):
                    _import_home(package)
            else:
                _import_home(home)

    def get(self, name: str) -> T:
        """The entry `name`; an unknown name raises KeyError listing the known ones."""
        if name not in self._entries:
            self.discover()
        if name not in self._entries:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self.discover()
        return name in self._entries

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        self.discover()
        return sorted(self._entries.items())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def help(self, what: str = "") -> str:
        """`what` followed by the known names, for argparse help texts."""
        return f"{what} ({', '.join(self.names())})" if what else ", ".join(self.names())


def _public(package, packages: bool = False) -> list[str]:
    """The public modules (or, with `packages`, subpackages) of `package`, by full name."""
    return [f"{package.__name__}.{info.name}" for info in pkgutil.iter_modules(getattr(package, "__path__", []))
            if not info.name.startswith("_") and (info.ispkg or not packages)]


def _import_home(home: str) -> None:
    """Import `home` and, for a package, every public module in it."""
    for name in _public(importlib.import_module(home)):
        importlib.import_module(name)


def _definition(obj) -> tuple[str, str]:
    """Where `obj` is defined: a function or class itself, what it wraps (`__wrapped__`), or the
    class of an instance."""
    obj = getattr(obj, "__wrapped__", obj)
    if not hasattr(obj, "__qualname__"):
        obj = type(obj)
    return obj.__module__, obj.__qualname__


def _same(a, b) -> bool:
    """The same definition, possibly executed twice (a module imported again by another name)."""
    return a is b or _definition(a) == _definition(b)


def _where(obj) -> str:
    return ".".join(_definition(obj))
