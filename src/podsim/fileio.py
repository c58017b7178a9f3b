"""Output files are written whole or not at all: to a temporary file, then renamed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
    except (FileExistsError, NotADirectoryError, PermissionError) as e:
        from .errors import InputError
        raise InputError(f"cannot write here: {e.strerror or e}", str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs follow the umask
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_output_file(path: Path | str, flag: str) -> None:
    """Refuse, before any work, an output path that cannot become a file: an existing folder, or
    one below an existing file.

    Raises:
        InputError: naming ``flag`` and the path.
    """
    from .errors import InputError
    p = Path(path)
    if str(path) == "" or p.is_dir():
        raise InputError(f"{str(path) or '(empty)'} is a folder; expected a file path", flag)
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{path}: {parent} is a file, not a folder", flag)
            break


def read_text(path: Path | str, what: str = "file") -> str:
    """The text of a UTF-8 file (for the readers of input files).

    Raises:
        InputError: naming the file when it is missing, unreadable or not UTF-8 text.
    """
    from .errors import InputError
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
