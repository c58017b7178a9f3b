"""JSON output (``--json``)."""

from __future__ import annotations

import json
import os

from ..fileio import atomic_write_text
from .result import Result


def result_json(result: Result, inputs: dict | None = None) -> str:
    """The JSON text of a result (fields documented in docs/outputs.md), with the job's
    ``inputs`` (its parameters as flag values, :func:`podsim.params.echo`) when given."""
    doc = result.to_dict()
    if inputs is not None:
        doc["inputs"] = inputs
    return json.dumps(doc, indent=1, default=str)


def write_json(result: Result, path: str | os.PathLike[str], inputs: dict | None = None) -> None:
    """Write the JSON document atomically (with the job's ``inputs`` when given)."""
    atomic_write_text(path, result_json(result, inputs) + "\n")


def write_document(doc: dict, path: str | os.PathLike[str]) -> None:
    """Write a result's JSON document (a dict, indented by one) atomically."""
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
