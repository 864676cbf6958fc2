"""pytest fixtures (a pytest plugin: ``pytest -p pmda_py.testing.fixtures``,
or ``pytest_plugins = ["pmda_py.testing.fixtures"]`` in a conftest).

* ``pmda_command`` -- ``async with pmda_command(argv) as pmda`` starts a PMDA
  command over a pipe and yields a :class:`~pmda_py.testing.client.PmdaClient`;
  an ``argv`` starting with ``pmda-py`` runs the pmda_py of the interpreter
  running the tests (no activated virtualenv needed);
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

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Callable

import pytest

from pmda_py.testing.client import PmdaClient, open_pipe_pmda, open_socket_pmda
from pmda_py.testing.harness import open_table_pmda
from pmda_py.testing.support import pmda_py_argv

__all__ = ["PmdaFactory", "pmda_command", "pmda_socket", "table_pmda"]

#: what each fixture gives: called with the fixture's arguments, it returns an
#: async context manager yielding a client of the PMDA
PmdaFactory = Callable[..., AbstractAsyncContextManager[PmdaClient]]


def _resolve(command: Sequence[str]) -> list[str]:
    if command and command[0] == "pmda-py":
        return pmda_py_argv(*command[1:])
    return list(command)


@pytest.fixture
def pmda_command() -> PmdaFactory:
    """Factory: ``pmda_command(argv, **kw)`` -> async CM yielding a client."""

    def start(command: Sequence[str], **kw: Any) -> AbstractAsyncContextManager[PmdaClient]:
        return open_pipe_pmda(_resolve(command), **kw)

    return start


@pytest.fixture
def pmda_socket() -> PmdaFactory:
    """Factory: ``pmda_socket(unix=|inet=|ipv6=, command=argv)`` -> async CM."""

    def start(*, command: Sequence[str] | None = None, **kw: Any) -> AbstractAsyncContextManager[PmdaClient]:
        return open_socket_pmda(command=_resolve(command) if command else None, **kw)

    return start


@pytest.fixture
def table_pmda() -> PmdaFactory:
    """Factory: ``table_pmda(*tables, mount=, domain=)`` -> async CM (in-process)."""
    return open_table_pmda
