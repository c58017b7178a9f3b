"""JSON output (``--json``)."""

from __future__ import annotations

import json
import os

from ..fileio import atomic_write_text
from .result import Result


def result_json(result: Result) -> str:
    """The JSON text of a result (fields documented in docs/outputs.md)."""
    return json.dumps(result.to_dict(), indent=1, default=str)


def write_json(result: Result, path: str | os.PathLike[str]) -> None:
    """Write the JSON document atomically."""
    atomic_write_text(path, result_json(result) + "\n")


def write_document(doc: dict, path: str | os.PathLike[str]) -> None:
    """Write a result's JSON document (a dict, indented by one) atomically."""
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
