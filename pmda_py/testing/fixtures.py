"""pytest fixtures (a pytest plugin: ``pytest -p pmda_py.testing.fixtures``,
or ``pytest_plugins = ["pmda_py.testing.fixtures"]`` in a conftest).

* ``pmda_command`` -- ``async with pmda_command(argv) as pmda`` starts a PMDA
  command over a pipe and yields a :class:`~pmda_py.testing.client.PmdaClient`;
* ``pmda_socket`` -- the same for a PMDA listening on a socket;
* ``table_pmda`` -- ``async with table_pmda(MyTable()) as pmda`` serves
  tables in-process.

Example::

    async def test_numfetch(pmda_command):
        async with pmda_command(["pmda-py", "run", "-d", "253", "--table", "simple"]) as pmda:
            values = await pmda.fetch_values(["simple.numfetch", "simple.color"])
            assert values["simple.numfetch"] == 1
"""

from __future__ import annotations

from typing import Any

import pytest

from pmda_py.testing.client import open_pipe_pmda, open_socket_pmda
from pmda_py.testing.harness import open_table_pmda

__all__ = ["pmda_command", "pmda_socket", "table_pmda"]


@pytest.fixture
def pmda_command(tmp_path: Any) -> Any:
    """Factory: ``pmda_command(argv, **kw)`` -> async CM yielding a client."""
    return open_pipe_pmda


@pytest.fixture
def pmda_socket() -> Any:
    """Factory: ``pmda_socket(unix=|inet=|ipv6=, command=argv)`` -> async CM."""
    return open_socket_pmda


@pytest.fixture
def table_pmda() -> Any:
    """Factory: ``table_pmda(*tables, mount=, domain=)`` -> async CM (in-process)."""
    return open_table_pmda
