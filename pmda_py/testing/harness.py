"""Test your tables in-process: no subprocess, no pmcd, no root.

:func:`open_table_pmda` mounts tables in a real :class:`~pmda_py.dispatch.Dispatcher`
and serves it over an in-memory stream pair with the daemon's own loop; you
get the same :class:`~pmda_py.testing.client.PmdaClient` that drives a
subprocess PMDA::

    async with open_table_pmda(MyTable(), mount="my", domain=250) as pmda:
        values = await pmda.fetch_values(["my.hits"])
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing

from pmda_py.dispatch import Dispatcher, HelpSource, Mount
from pmda_py.runtime.loader import shutdown_tables
from pmda_py.runtime.pump import TrioRunner, serve_stream
from pmda_py.session import Session
from pmda_py.table import Table
from pmda_py.testing.client import PmdaClient

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

__all__ = ["open_table_pmda"]


_DISPATCHERS: weakref.WeakKeyDictionary[PmdaClient, Dispatcher] = weakref.WeakKeyDictionary()


def dispatcher_of(client: PmdaClient) -> Dispatcher:
    """The dispatcher serving an in-process client of :func:`open_table_pmda`
    (for tests that look at or poke the daemon's side)."""
    return _DISPATCHERS[client]


@asynccontextmanager
async def open_table_pmda(
    *tables: Table | Mount,
    mount: str | None = None,
    domain: int = 253,
    name: str = "test",
    help_source: HelpSource | None = None,
    startup: bool = True,
    timeout: float | None = 10.0,
    state_dir: str | None = None,
) -> AsyncIterator[PmdaClient]:
    """Serve ``tables`` in-process and yield a connected client.

    A bare :class:`Table` mounts at ``mount`` (one table) or at its own
    ``name``; pass :class:`~pmda_py.dispatch.Mount` objects for more control.
    With ``startup`` (the default) the tables are started before the client
    connects and shut down when the block ends, as the daemon does (their
    threads, descriptors and watches go with them).
    ``state_dir`` keeps the instance ids of persistent indoms, as the
    daemon's ``--state-dir`` does (None: they are not kept).
    """
    mounts: list[Mount] = []
    for t in tables:
        if isinstance(t, Mount):
            mounts.append(t)
        else:
            where = mount if (mount is not None and len(tables) == 1) else (t.name or type(t).__name__.lower())
            mounts.append(Mount(t, where, t.name or type(t).__name__))
    dispatcher = Dispatcher(domain, mounts, TrioRunner(), name=name, help_source=help_source, state_dir=state_dir)
    if startup:
        await dispatcher.start_tables(trio.move_on_after)
    ours, theirs = trio.testing.memory_stream_pair()
    client = PmdaClient(theirs, timeout=timeout)
    _DISPATCHERS[client] = dispatcher
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_stream, ours, Session(pid=os.getpid()), dispatcher)
            await client.handshake()
            try:
                yield client
            finally:
                await theirs.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # show the test's own error, not a group
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        if startup:
            with trio.CancelScope(shield=True):  # (bounded: shutdown_tables gives them 2 s)
                await shutdown_tables(dispatcher)
