"""Registries: the extension points of podsim, each a table of named implementations.

A registry maps a name (and its aliases) to one implementation: a GPU, a serving scheduler,
a collective algorithm, a trace format.  Looking up a name it does not hold raises an
:class:`~podsim.errors.InputError` that lists what it holds and suggests the closest name, so
every "unknown X" message in podsim reads the same.  Adding an implementation is one
``register`` call (or one decorator) in the implementation's own module.

Example::

    SCHEDULERS: Registry[type[Scheduler]] = Registry("scheduler", flag="--scheduler")

    @SCHEDULERS.register("fcfs", aliases=("fifo",))
    class FirstComeFirstServed(Scheduler): ...

    SCHEDULERS.get("fifo")        # -> FirstComeFirstServed
    SCHEDULERS.get("fcsf")        # InputError: --scheduler: unknown scheduler 'fcsf'; did you mean 'fcfs'?
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from .errors import InputError, closest

T = TypeVar("T")


class Registry(Generic[T]):
    """Named implementations of one kind.

    Args:
        kind: what the entries are, for messages ("scheduler", "trace format").
        flag: the command-line flag that names one (for messages), if any.
    """

    def __init__(self, kind: str, flag: str | None = None) -> None:
        self.kind = kind
        self.flag = flag
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, obj: T | None = None, aliases: tuple[str, ...] = ()) -> Callable[[T], T] | T:
        """Register ``obj`` under ``name`` and ``aliases``; without ``obj``, a decorator that does.

        A name or alias that is already taken is a programming error (ValueError)."""

        def add(o: T) -> T:
            for n in (name, *aliases):
                if n in self._entries or n in self._aliases:
                    raise ValueError(f"{self.kind} {n!r} registered twice")
            self._entries[name] = o
            for a in aliases:
                self._aliases[a] = name
            return o

        return add if obj is None else add(obj)

    def alias(self, alias: str, name: str) -> None:
        """Let ``alias`` name the registered ``name`` too (ValueError if taken or unknown)."""
        if name not in self._entries:
            raise ValueError(f"{self.kind} {name!r} is not registered")
        if alias in self._entries or alias in self._aliases:
            raise ValueError(f"{self.kind} {alias!r} registered twice")
        self._aliases[alias] = name

    def canonical(self, name: str) -> str:
        """The registered name of ``name`` (itself or the name it is an alias of)."""
        if name in self._entries:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise self.unknown(name)

    def get(self, name: str) -> T:
        """The implementation named ``name`` (or an alias of it); InputError if none."""
        return self._entries[self.canonical(name)]

    def unknown(self, name: str, source: str | None = None) -> InputError:
        """The error for a name this registry does not hold, in podsim's one style: the closest
        name if one is close, else every name (placed at the registry's flag, if any)."""
        hint = closest(name, self.spellings())
        if hint:
            msg = f"unknown {self.kind} {name!r}; did you mean {hint!r}?"
        else:
            msg = f"unknown {self.kind} {name!r}; expected one of: {', '.join(self.names())}"
        return InputError(msg, source, self.flag)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order (aliases not included)."""
        return tuple(self._entries)

    def aliases(self, name: str) -> tuple[str, ...]:
        """The aliases of the registered name ``name``."""
        return tuple(a for a, n in self._aliases.items() if n == name)

    def spellings(self) -> tuple[str, ...]:
        """Every name and alias this registry accepts."""
        return (*self._entries, *self._aliases)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(self._entries.items())

    def __iter__(self) -> Iterator[str]:
        """The registered names (so a registry serves as a list of choices)."""
        return iter(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
