"""Fixtures of the compat tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory the pcp user can reach (the PMDAs drop to it): pytest's
    tmp_path lives under a 0700 directory of root's."""
    d = Path(tempfile.mkdtemp(prefix="pmda_py-compat-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
