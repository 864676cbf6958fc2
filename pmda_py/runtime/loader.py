"""Tables are loaded after the privilege drop, off the event loop, under deadlines.

``pmda-py run`` opens its channel (and, for ``-U``, drops privileges) before
anything of a table runs; then :func:`load_mounts` imports and constructs
each table in a worker thread, so a slow import never stalls the loop (CREDS,
fetches of the tables already serving, signals), and gives up on a table
whose import overruns ``load_timeout`` seconds.  :func:`start_all` runs
the tables' ``startup()`` under their deadlines (:func:`start_all`).

What a table does wrong at load is said in one line, on stderr (``say``) and
in the log, naming the table:

* an import, constructor or other load error -- including ``SystemExit`` and
  ``KeyboardInterrupt`` raised by the module -- is a configuration error:
  :class:`TableLoadError`, the agent exits with status 1 (at start) or keeps
  its running configuration (on SIGHUP);
* an import that overruns ``load_timeout``: at start the agent serves without
  that table (its thread is left to finish on its own; a SIGHUP retries), on
  SIGHUP the reload fails and the running configuration stays;
* ``startup()`` raising anything or overrunning its deadline: the table
  serves what it can, as before.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Callable

import structlog
import trio

from pmda_py.config import Config, TableSpec
from pmda_py.table import Table, TableContext

__all__ = ["LoadTimeout", "TableLoadError", "describe", "load_all", "load_one", "start_all"]

log = structlog.get_logger("pmda_py.daemon")

#: how a line is said to the person who started the agent (or None)
Say = Callable[[str], None]


class TableLoadError(Exception):
    """A table could not be found or constructed."""


class LoadTimeout(TableLoadError):
    """A table's import and construction overran the load deadline."""


async def load_one(
    spec: TableSpec, config: Config, load: Callable[[TableSpec, Config], Table], timeout: float
) -> Table:
    """``load(spec, config)`` in a worker thread, at most ``timeout`` seconds.

    Raises:
        TableLoadError: what ``load`` raised (anything, SystemExit included).
        LoadTimeout: it did not finish in time (the thread is abandoned).
    """
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append(load(spec, config))
        except TableLoadError as err:
            outcome.append(err)
        except BaseException as err:  # SystemExit/KeyboardInterrupt at import must not end the agent
            outcome.append(TableLoadError(f"table {spec.name} ({spec.table}): {describe(err)}"))

    with trio.move_on_after(timeout):
        await trio.to_thread.run_sync(work, abandon_on_cancel=True)
    if not outcome:
        raise LoadTimeout(f"table {spec.name} ({spec.table}): import did not finish within {timeout:g} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    table: Table = outcome[0]
    return table


async def load_all(
    config: Config,
    load: Callable[[TableSpec, Config], Table],
    *,
    timeout: float,
    skip_slow: bool,
    say: Say | None = None,
) -> list[tuple[TableSpec, Table]]:
    """The config's tables, loaded one after the other (see :func:`load_one`).

    ``skip_slow``: a table that overruns ``timeout`` is left out (one line
    said and logged); otherwise :class:`LoadTimeout` is raised."""
    loaded: list[tuple[TableSpec, Table]] = []
    for spec in config.tables:
        try:
            table = await load_one(spec, config, load, timeout)
        except LoadTimeout as err:
            if not skip_slow:
                raise
            log.error("table_load_timeout", table=spec.name, error=str(err), action="serving without it")
            _say(say, f"{err}; serving without it (a SIGHUP tries again)")
            continue
        loaded.append((spec, table))
    return loaded


async def start_all(tables: Sequence[tuple[str, Table, TableContext]], *, say: Say | None = None) -> None:
    """Run each ``(name, table, context)``'s ``startup(context)`` under the
    table's deadline (at least 2 s); whatever it raises (SystemExit too) or
    an overrun is one line, logged and said, and the table serves what it
    can."""
    for name, table, context in tables:
        t0 = time.monotonic()
        deadline = max(table.deadline, 2.0)
        with trio.move_on_after(deadline) as scope:
            try:
                await table.startup(context)
            except trio.Cancelled:
                raise
            except BaseException as exc:  # SystemExit in a startup() must not end the agent
                log.error("table_startup_failed", table=name, error=describe(exc))
                _say(say, f"table {name}: startup() failed: {describe(exc)}")
                continue
        if scope.cancelled_caught:
            log.error("table_startup_timeout", table=name, seconds=round(time.monotonic() - t0, 3))
            _say(say, f"table {name}: startup() overran {deadline:g} s; serving what it can")


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line (``Type`` alone without a message),
    at most :data:`MAX_DESCRIBED` characters: what a table raised, as said
    and logged."""
    text = " ".join(str(exc).split())
    if len(text) > MAX_DESCRIBED:
        text = text[:MAX_DESCRIBED] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: characters of a table's exception message said or logged at most
MAX_DESCRIBED = 300


def _say(say: Say | None, line: str) -> None:
    if say is not None:
        say(f"pmda-py run: {line}")
