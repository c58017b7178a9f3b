"""Output files are written whole or not at all: to a temporary file, then renamed."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import IO

import yaml

from .errors import InputError, yaml_error


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; the parent folder is created if missing.

    Raises:
        InputError: when the path cannot be written (a file where a folder should be, no
            permission), naming it.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise InputError(f"cannot write here: {e.strerror or e}", str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs follow the umask
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):  # a full disk, a read-only file system: named by the output's path
            raise InputError(f"cannot write here: {e.strerror or e}", str(path)) from None
        raise


def check_output_file(path: Path | str, flag: str) -> None:
    """Refuse, before any work, an output path that cannot become a file: an existing folder, one
    below an existing file, or one in a folder that takes no new file (no permission, read-only).

    Raises:
        InputError: naming ``flag`` and the path.
    """
    p = Path(path)
    if str(path) == "" or p.is_dir():
        raise InputError(f"{str(path) or '(empty)'} is a folder; expected a file path", flag)
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{path}: {parent} is a file, not a folder", flag)
            try:  # the folder takes a new file (what atomic_write_bytes will make), tried now
                fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=parent)
                os.close(fd)
                os.unlink(tmp)
            except OSError as e:
                raise InputError(f"{path}: cannot write in {parent}: {e.strerror or e}", flag) from None
            break


def read_text(path: Path | str, what: str = "file") -> str:
    """The text of a UTF-8 file (for the readers of input files).

    Raises:
        InputError: naming the file when it is missing, unreadable or not UTF-8 text.
    """
    p = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such {what}", p) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", p) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not a UTF-8 text file (byte {e.start} is {data[e.start]:#04x})", p) from None


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write text (UTF-8) atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    return str(v)


def write_measured_csv(
    path: Path | str, title: str, provenance: dict[str, str], columns: tuple[str, ...], rows: list[dict]
) -> None:
    """A CSV of measurements, atomically: a ``# title`` line, the provenance as ``# key: value``
    lines, the header and the rows (dicts keyed by ``columns``; missing keys empty, NaN empty,
    floats to 6 significant digits).

    Raises:
        ValueError: a row with a key outside ``columns`` (a programming error).
    """

    buf = io.StringIO()
    buf.write(f"# {title}\n")
    for k, v in provenance.items():
        buf.write(f"# {k}: {str(v).replace(chr(10), ' ')}\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        unknown = sorted(set(r) - set(columns))
        if unknown:
            raise ValueError(f"unknown column {unknown[0]!r}")
        w.writerow([_cell(r.get(c)) for c in columns])
    atomic_write_text(path, buf.getvalue())


def read_measured_csv(
    path: Path | str, what: str, required: tuple[str, ...], doc: str
) -> tuple[dict[str, str], list[tuple[int, dict[str, str]]]]:
    """The provenance (``# key: value`` lines; other ``#`` lines are comments) and the rows, each
    with its line number in the table (the header is 1), of a file :func:`write_measured_csv`
    wrote.

    Raises:
        InputError: the file cannot be read, or lacks one of the ``required`` columns (the
            message points at ``doc``, where the columns are described).
    """

    prov: dict[str, str] = {}
    lines = []
    for ln in read_text(path, what).splitlines():
        if ln.lstrip().startswith("#"):
            key, sep, val = ln.lstrip()[1:].partition(":")
            if sep and key.strip() and " " not in key.strip():
                prov[key.strip()] = val.strip()
        elif ln.strip():
            lines.append(ln)
    reader = csv.DictReader(lines)
    check_columns(reader.fieldnames, str(path))
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column {missing[0]!r} (a {what}: {doc})", str(path))
    return prov, list(enumerate(reader, start=2))


def check_columns(header: list[str] | None, source: str) -> None:
    """Refuse a CSV header that names a column twice (a reader would keep only the last).

    Raises:
        InputError: naming ``source`` and the column."""
    seen: set[str] = set()
    for name in header or []:
        key = name.strip()
        if key in seen and key:
            raise InputError(f"column {key!r} appears twice in the header: keep one", source)
        seen.add(key)


def load_yaml(stream: str | IO[str]) -> object:
    """``yaml.safe_load`` that refuses a mapping naming a key twice (PyYAML keeps the last one
    without a word): the error is a ``yaml.YAMLError`` with the duplicate's line, as callers
    already turn parse errors into one-line messages (:func:`~podsim.errors.yaml_error`)."""
    return yaml.load(stream, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


def load_json(text: str | bytes, source: str) -> object:
    """``json.loads`` of a user's file that refuses an object naming a key twice (the standard
    library keeps the last one without a word), the JSON twin of :func:`load_yaml`.

    Args:
        text: the file's text (bytes are decoded as UTF-8, as ``json.loads`` does).
        source: the file, named in errors.

    Raises:
        InputError: naming ``source``: not valid JSON (with the line and column), or the key
            that appears twice in one object.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise InputError(f"the key {e.key!r} appears twice in one JSON object: keep one", source) from None
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg}", source, f"line {e.lineno} column {e.colno}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"not a UTF-8 text file (byte {e.start})", source) from None


class _DuplicateKey(Exception):
    """A JSON object named ``key`` twice (turned into an InputError by :func:`load_json`)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def read_yaml(path: Path | str, what: str = "file") -> object:
    """A user's YAML file (:func:`read_text`, then :func:`load_yaml`).

    Raises:
        InputError: naming the file: missing, unreadable, not UTF-8, or not valid YAML (with its
            line and column)."""
    text = read_text(path, what)
    try:
        return load_yaml(text)
    except yaml.YAMLError as e:
        raise yaml_error(e, str(path)) from None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """The dict of one JSON object's pairs; raises :class:`_DuplicateKey` on a key seen before."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key named twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            try:
                dup = key in seen
            except TypeError:  # an unhashable key: PyYAML's own error follows
                continue
            if dup:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} appears twice in one mapping: keep one", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def package_files(package: str, folder: str, suffix: str = ".csv") -> list[Path]:
    """The files ending in ``suffix`` of a data folder shipped inside ``package`` (``podsim.compute``,
    ``tables/steps``), sorted by name; none when the folder is not there."""

    root = Path(str(resources.files(package) / folder))
    return sorted(root.glob(f"*{suffix}")) if root.is_dir() else []
