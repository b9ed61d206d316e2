"""Shared test fixtures: the repository root, and real programs the tests use as oracles."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def require_tool(name: str) -> str:
    """Return the path of program `name`; fail under CI, skip (saying why) on a laptop."""
    path = shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d, name)).exists()), None
    )
    if path:
        return path
    why = f"{name} is not installed (tests/install-tools installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="session")
def repo() -> Path:
    """The checkout under test (read it, never write into it)."""
    return REPO
