"""Shared fixtures.  Conformance tests read the peers' real inputs from
``PODSIM_REFERENCE_DATA`` (default ``../shared/data`` next to the repository) and skip with a
message saying what is missing when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def reference_dir() -> Path:
    return Path(os.environ.get("PODSIM_REFERENCE_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def refdata() -> Path:
    d = reference_dir()
    if not (d / "astra-sim").is_dir():
        if os.environ.get("PODSIM_REQUIRE_REFERENCE") == "1":
            pytest.fail(f"reference data required but not found at {d}")
        pytest.skip(f"reference data not found at {d} (set PODSIM_REFERENCE_DATA to shared/data)")
    return d
