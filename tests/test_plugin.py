"""The pytest plugin's socket fixture (``pmda_py.testing.fixtures``): its
docstring's ``pmda_socket(unix=|inet=|ipv6=, command=argv)``, an ``argv``
starting with ``pmda-py`` being the pmda_py of the interpreter running the
tests, found with no virtualenv on ``PATH``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pmda_py.testing.fixtures import PmdaFactory

PYTHON_BIN = str(Path(sys.executable).parent)


@pytest.fixture
def no_venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PATH`` without this interpreter's bin (where a ``pmda-py`` script is)."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != PYTHON_BIN)
    monkeypatch.setenv("PATH", path)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


async def test_pmda_socket_starts_pmda_py_on_a_unix_socket(
    pmda_socket: PmdaFactory, tmp_path: Path, no_venv_on_path: None
) -> None:
    sock = str(tmp_path / "simple.socket")
    command = ["pmda-py", "run", "-d", "253", "--table", "simple", "-u", sock]
    async with pmda_socket(unix=sock, command=command) as pmda:
        values = await pmda.fetch_values(["simple.numfetch"])
        assert values["simple.numfetch"] == 1
        assert (await pmda.desc(await pmda.pmid("simple.numfetch"))).pmid >> 22 == 253


async def test_pmda_socket_starts_pmda_py_on_a_port(pmda_socket: PmdaFactory, no_venv_on_path: None) -> None:
    import socket

    with socket.socket() as s:  # a free loopback port (the PMDA binds it next)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = ["pmda-py", "run", "-d", "253", "--table", "simple", "-i", str(port), "--bind", "127.0.0.1"]
    async with pmda_socket(inet=port, command=command) as pmda:
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == 1
