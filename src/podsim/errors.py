"""Errors that podsim reports to users.

Every problem with user input is an :class:`InputError` that names the file, the place in it
and what was expected, so the CLI can print one line and exit with status 2.  Failures of a
simulation that cannot finish (deadlocks, unmatched sends) are :class:`SimulationError`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PodsimError(Exception):
    """Base class of every error podsim raises on purpose."""


class InputError(PodsimError):
    """Bad user input: a file, field or value that podsim cannot accept.

    Args:
        message: what is wrong and what was expected.
        source: the file (or other input) the problem is in, if known.
        where: the place inside it (a key, a node id, a line), if known.
    """

    def __init__(self, message: str, source: str | None = None, where: str | None = None) -> None:
        self.message = message
        self.source = source
        self.where = where
        super().__init__(self.__str__())

    def __str__(self) -> str:
        parts = [p for p in (self.source, self.where) if p]
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message

    def with_source(self, source: str) -> "InputError":
        """Return a copy of this error that names ``source`` if it named no file yet."""
        if self.source:
            return self
        return InputError(self.message, source, self.where)


class SimulationError(PodsimError):
    """The simulation cannot finish: ranks wait forever, or a model invariant broke."""


def closest(name: str, valid: Iterable[str]) -> str | None:
    """Return the valid name closest to ``name`` (for 'did you mean' hints), or None.  A valid
    name that starts with ``name`` wins ("dgx-a100" -> "dgx-a100-superpod")."""
    valid = list(valid)
    prefixed = sorted(v for v in valid if name and v.startswith(name))
    if prefixed:
        return prefixed[0]
    matches = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    return matches[0] if matches else None


def yaml_error(e: Exception, source: str | None, what: str = "not valid YAML", column: bool = True) -> InputError:
    """One line for a PyYAML parse error: its problem and the line (and column) it names
    (PyYAML's own messages span several lines)."""
    mark = getattr(e, "problem_mark", None)
    where = None
    if mark is not None:
        where = f"line {mark.line + 1}" + (f" column {mark.column + 1}" if column else "")
    problem = getattr(e, "problem", None)
    if not problem:  # a ReaderError (a control character) has no problem, but a position
        problem = (str(e).splitlines() or [type(e).__name__])[0]
        pos = getattr(e, "position", None)
        where = where or (f"character {pos}" if isinstance(pos, int) else None)
    return InputError(f"{what}: {problem}", source, where)


def unknown_key_error(key: str, valid: Iterable[str], source: str | None, what: str = "key") -> InputError:
    """Build the error for an unknown or misspelled configuration key."""
    valid = sorted(valid)
    hint = closest(key, valid)
    if hint:
        msg = f"unknown {what} {key!r}; did you mean {hint!r}?"
    else:
        msg = f"unknown {what} {key!r}; valid {what}s are: {', '.join(valid)}"
    return InputError(msg, source, key)
