"""Tables are loaded after the privilege drop, off the event loop, under deadlines.

``pmda-py run`` opens its channel (and, for ``-U``, drops privileges) before
anything of a table runs; then :func:`load_dispatcher` imports and constructs
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

import importlib
import sys
import time
from collections.abc import Sequence
from typing import Callable

import attrs
import structlog
import trio

from pmda_py.config import Config, TableSpec, _line_of, read_config_text
from pmda_py.dispatch import Dispatcher, HelpSource, Mount
from pmda_py.runtime.pump import TrioRunner
from pmda_py.stats import PmdaStats
from pmda_py.table import Table, TableContext

__all__ = [
    "BUILTIN_TABLES",
    "LoadTimeout",
    "LoadedTable",
    "Startup",
    "TableFactory",
    "TableLoadError",
    "build_dispatcher",
    "describe",
    "load_all",
    "load_dispatcher",
    "load_one",
    "load_table",
    "make_dispatcher",
    "shutdown_tables",
    "start_all",
    "start_tables",
]

log = structlog.get_logger("pmda_py.runtime")

#: how a line is said to the person who started the agent (or None)
Say = Callable[[str], None]


class TableLoadError(Exception):
    """A table could not be found or constructed."""


class LoadTimeout(TableLoadError):
    """A table's import and construction overran the load deadline."""


@attrs.frozen
class LoadedTable:
    """A table of the config, constructed."""

    spec: TableSpec
    table: Table


@attrs.frozen
class Startup:
    """A table to start: its name (as said and logged), itself and the context of its mount."""

    name: str
    table: Table
    context: TableContext


#: what constructs a table: its class, or a factory function
TableFactory = Callable[..., object]


async def load_one(
    spec: TableSpec, config: Config, load: Callable[[TableSpec, Config], Table], timeout: float
) -> Table:
    """``load(spec, config)`` in a worker thread, at most ``timeout`` seconds.

    Raises:
        TableLoadError: what ``load`` raised (anything, SystemExit included).
        LoadTimeout: it did not finish in time (the thread is abandoned).
    """
    outcome: list[Table | BaseException] = []

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
    return outcome[0]


async def load_all(
    config: Config,
    load: Callable[[TableSpec, Config], Table],
    *,
    timeout: float,
    skip_slow: bool,
    say: Say | None = None,
) -> list[LoadedTable]:
    """The config's tables, loaded one after the other (see :func:`load_one`).

    ``skip_slow``: a table that overruns ``timeout`` is left out (one line
    said and logged); otherwise :class:`LoadTimeout` is raised."""
    loaded: list[LoadedTable] = []
    for spec in config.tables:
        try:
            table = await load_one(spec, config, load, timeout)
        except LoadTimeout as err:
            if not skip_slow:
                raise
            log.error("table_load_timeout", table=spec.name, error=str(err), action="serving without it")
            _say(say, f"{err}; serving without it (a SIGHUP tries again)")
            continue
        loaded.append(LoadedTable(spec, table))
    return loaded


async def start_all(tables: Sequence[Startup], *, say: Say | None = None) -> None:
    """Run each table's ``startup(context)`` under the
    table's deadline (at least 2 s); whatever it raises (SystemExit too) or
    an overrun is one line, logged and said, and the table serves what it
    can."""
    for start in tables:
        name, table, context = start.name, start.table, start.context
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


# ---------------------------------------------------------- finding a table


#: Built-in tables by name.
BUILTIN_TABLES: dict[str, str] = {
    "simple": "pmda_py.tables.simple:SimpleTable",
    "control": "pmda_py.tables.control:ControlTable",
    "mmv": "pmda_py.mmv.table:MmvTable",
    "openmetrics": "pmda_py.openmetrics.table:OpenMetricsTable",
}


def _entry_point(name: str) -> TableFactory | None:
    try:
        from importlib.metadata import entry_points
    except ImportError:  # pragma: no cover
        return None
    if sys.version_info >= (3, 10):
        eps = entry_points(group="pmda_py.tables")
    else:  # Python 3.9: a dict of groups
        eps = entry_points().get("pmda_py.tables", [])
    for ep in eps:
        if ep.name == name:
            factory: TableFactory = ep.load()
            return factory
    return None


def load_table(spec: TableSpec, config: Config) -> Table:
    """Find and construct the table of ``spec``: built-in name, entry point
    (group ``pmda_py.tables``) or ``module:Class``."""
    target = BUILTIN_TABLES.get(spec.table)
    factory: TableFactory | None = None
    try:
        if target is None:
            factory = _entry_point(spec.table)
            if factory is None:
                target = spec.table
        if factory is None:
            assert target is not None
            if ":" not in target:
                raise TableLoadError(f"table {spec.name}: unknown table {spec.table!r} (not built-in, no entry point)")
            mod, _, attr = target.partition(":")
            for directory in reversed(config.python_path):  # the config's pythonpath, searched first
                if directory not in sys.path:
                    sys.path.insert(0, directory)
            factory = getattr(importlib.import_module(mod), attr)
        table = factory(**spec.options) if _accepts_options(factory) else factory()
    except TableLoadError as err:
        raise TableLoadError(_where(spec, config) + str(err)) from err
    except BaseException as err:  # SystemExit/KeyboardInterrupt at import too: a table that cannot load
        raise TableLoadError(f"{_where(spec, config)}table {spec.name} ({spec.table}): {describe(err)}") from err
    if not isinstance(table, Table):
        raise TableLoadError(f"{_where(spec, config)}table {spec.name}: {spec.table} is not a pmda_py Table")
    if spec.deadline is not None:
        table.deadline = spec.deadline
    return table


def _where(spec: TableSpec, config: Config) -> str:
    """``file:line: [table NAME] table: `` for a table from the config file
    (found when the file was read: after the privilege drop it may be unreadable)."""
    if spec.source or not config.config_path:
        return spec.source
    try:
        text = read_config_text(config.config_path)
    except (OSError, UnicodeDecodeError):
        return ""
    section = f"table {spec.name}"
    line = _line_of(config.config_path, text, section, "table") or _line_of(config.config_path, text, section, None)
    return f"{config.config_path}:{line}: [{section}] table: " if line else ""


def _accepts_options(factory: TableFactory) -> bool:
    return bool(getattr(factory, "accepts_options", False))


# ------------------------------------------------------------ the dispatcher


def _helpfile(config: Config) -> HelpSource | None:
    if not config.helpfile:
        return None
    from pmda_py.helpfile import HelpFile

    try:
        return HelpFile.open(config.helpfile)
    except (OSError, ValueError) as err:
        log.warning("helpfile_unreadable", path=config.helpfile, error=str(err))
        return None


def build_dispatcher(config: Config, stats: PmdaStats | None = None) -> Dispatcher:
    """Load the config's tables here and now (no thread, no deadline: tools
    and tests; the daemon uses :func:`load_dispatcher`) and mount them (no
    table code runs yet but imports and constructors).  Raises ConfigError /
    TableLoadError."""
    mounts = [Mount(load_table(spec, config), spec.mount, spec.name, dict(spec.options)) for spec in config.tables]
    return make_dispatcher(config, mounts, stats)


def make_dispatcher(config: Config, mounts: Sequence[Mount], stats: PmdaStats | None = None) -> Dispatcher:
    """The dispatcher of ``mounts`` under ``config``'s domain, name and labels."""
    return Dispatcher(
        config.domain,
        mounts,
        TrioRunner(),
        name=config.name,
        domain_labels=config.domain_labels,
        help_source=_helpfile(config),
        state_dir=config.state_dir or None,
        stats=stats,
    )


async def load_dispatcher(
    config: Config, *, stats: PmdaStats | None = None, skip_slow: bool = False, say: Say | None = None
) -> Dispatcher:
    """:func:`build_dispatcher` with each table loaded in a worker thread
    under ``config.load_timeout`` (see :mod:`pmda_py.runtime.loader`)."""
    loaded = await load_all(config, load_table, timeout=config.load_timeout, skip_slow=skip_slow, say=say)
    mounts = [Mount(t.table, t.spec.mount, t.spec.name, dict(t.spec.options)) for t in loaded]
    return make_dispatcher(config, mounts, stats)


async def start_tables(dispatcher: Dispatcher, domain: int, *, say: Say | None = None) -> None:
    """Run every table's startup under its deadline; failures are logged
    (and said) and the table serves what it can."""
    started = [Startup(m.label, m.table, dispatcher.context(m)) for m in dispatcher.mounts]
    await start_all(started, say=say)
    dispatcher.reindex()
    log.info(
        "tables_mounted",
        tables=[f"{m.name}@{m.mount or '.'}" for m in dispatcher.mounts],
        metrics=len(dispatcher.all_names),
        domain=domain,
    )


async def shutdown_tables(dispatcher: Dispatcher) -> None:
    with trio.move_on_after(2):
        for m in dispatcher.mounts:
            try:
                await m.table.shutdown()
            except Exception as exc:
                log.error("table_shutdown_failed", table=m.name, error=str(exc))
