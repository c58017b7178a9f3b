"""Helpers shared by the ASTRA-sim config readers: loading, key checks, typed fields."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import yaml

from ...errors import InputError, closest, unknown_key_error, yaml_error
from ...fileio import load_json as _load_json_text
from ...fileio import load_yaml as _load_yaml_text


def _load(path: str | os.PathLike[str], kind: str) -> dict:
    """Load a JSON object or YAML mapping, with errors naming the file and the line."""
    path = str(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = _load_json_text(f.read(), path) if kind == "json" else _load_yaml_text(f)
    except FileNotFoundError:
        raise InputError("file not found", path) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not a UTF-8 text file (byte {e.start})", path) from None
    except yaml.YAMLError as e:
        raise yaml_error(e, path, "invalid YAML") from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path) from None
    if not isinstance(data, dict):
        what = "a JSON object" if kind == "json" else "a YAML mapping of keys to values"
        raise InputError(f"expected {what}, got {type(data).__name__}", path)
    return data


def load_json(path: str | os.PathLike[str]) -> dict:
    """Load a JSON object from ``path``."""
    return _load(path, "json")


def load_yaml(path: str | os.PathLike[str]) -> dict:
    """Load a YAML mapping from ``path``."""
    return _load(path, "yaml")


def check_keys(data: Mapping[str, object], valid: Iterable[str], source: str) -> None:
    """Raise on the first key not in ``valid``, suggesting the closest valid one."""
    valid = set(valid)
    for key in data:
        if key not in valid:
            raise unknown_key_error(str(key), valid, source)


def get_int(
    data: Mapping[str, object], key: str, default: int | None, source: str, lo: int | None = None, hi: int | None = None
) -> int | None:
    """An integer field (also accepts integral floats and numeric strings)."""
    if key not in data:
        return default
    v = data[key]
    if isinstance(v, bool):
        raise InputError(f"expected an integer, got {v!r}", source, key)
    try:
        if isinstance(v, str):
            v = float(v)
        if isinstance(v, float):
            if not v.is_integer():
                raise ValueError
            v = int(v)
        if not isinstance(v, int):
            raise ValueError
    except ValueError:
        raise InputError(f"expected an integer, got {data[key]!r}", source, key) from None
    if lo is not None and v < lo:
        raise InputError(f"must be >= {lo}, got {v}", source, key)
    if hi is not None and v > hi:
        raise InputError(f"must be <= {hi}, got {v}", source, key)
    return v


def get_float(
    data: Mapping[str, object],
    key: str,
    default: float | None,
    source: str,
    lo: float | None = None,
    positive: bool = False,
    hi: float | None = None,
) -> float | None:
    """A number field (finite; ``hi`` bounds it where a larger value is absurd)."""
    if key not in data:
        return default
    v = data[key]
    if isinstance(v, bool):
        raise InputError(f"expected a number, got {v!r}", source, key)
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"expected a number, got {v!r}", source, key) from None
    if f != f or f in (float("inf"), float("-inf")):
        raise InputError(f"expected a finite number, got {v!r}", source, key)
    if positive and not f > 0:
        raise InputError(f"must be > 0, got {v!r}", source, key)
    if lo is not None and f < lo:
        raise InputError(f"must be >= {lo}, got {v!r}", source, key)
    if hi is not None and f > hi:
        raise InputError(f"must be <= {hi:.3g}, got {v!r}", source, key)
    return f


def get_bool01(data: Mapping[str, object], key: str, default: bool, source: str) -> bool:
    """A 0/1 (or true/false) flag."""
    if key not in data:
        return default
    v = data[key]
    if isinstance(v, bool):
        return v
    if v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("0", "1", "true", "false"):
        return v.lower() in ("1", "true")
    raise InputError(f"expected 0 or 1, got {v!r}", source, key)


def get_choice(
    data: Mapping[str, object], key: str, default: str | None, choices: Iterable[str], source: str
) -> str | None:
    """A string from a fixed set (matched case-insensitively, returned canonical)."""
    if key not in data:
        return default
    v = data[key]
    choices = list(choices)
    if isinstance(v, str):
        for c in choices:
            if c.lower() == v.lower():
                return c
    hint = closest(str(v), choices)
    msg = f"unknown value {v!r}; " + (f"did you mean {hint!r}?" if hint else f"expected one of {', '.join(choices)}")
    raise InputError(msg, source, key)
