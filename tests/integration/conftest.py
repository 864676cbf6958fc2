"""Fixtures for the real-PCP integration tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.pcpbed import private_pmdas, private_var, require_pcp


@pytest.fixture(scope="session")
def pmdas_dir() -> Iterator[Path]:
    """World-readable: PCP's agents drop to the pcp user (pytest's tmp is 0700)."""
    require_pcp()
    root = Path(tempfile.mkdtemp(prefix="pmda_py-pcp-"))
    root.chmod(0o755)
    try:
        yield private_pmdas(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pcp_env(pmdas_dir: Path) -> Iterator[dict[str, str]]:
    """Environment for PMDAs: a private PCP_PMDAS_DIR (help, simple.conf) and
    a fresh private PCP_VAR_DIR, so PCP's agents keep their pmdaCache state
    (``config/pmda/<domain>.<serial>``) there and never in the system's
    /var/lib/pcp."""
    var = Path(tempfile.mkdtemp(prefix="pmda_py-var-"))
    try:
        yield {"PCP_PMDAS_DIR": str(pmdas_dir), "PCP_VAR_DIR": str(private_var(var))}
    finally:
        shutil.rmtree(var, ignore_errors=True)
