"""The only place structlog is configured.

Logs go where pmcd expects a PMDA's log: the ``-l`` file (default
``$PCP_LOG_DIR/pmcd/NAME.log``); stderr is pointed at the same file so
tracebacks land there too.  Never stdout: in pipe mode stdout is the PDU
channel.  If the log file cannot be opened, logging falls back to stderr;
a symlink, FIFO or hard link at the log's name is refused (it is opened as
root, in a directory the PCP user may own), and so is a symlink on the way
to it in a directory others can write.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import IO, Any, TypedDict

import structlog
from structlog.typing import Processor

from pmda_py.safefile import open_append

__all__ = ["configure", "current_level", "set_format", "set_level"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _SafeFile:
    """A log sink that never raises (disk full, closed fd): a lost log line
    must not take the PMDA down."""

    def __init__(self, f: IO[str]) -> None:
        self.f = f
        self.dropped = 0

    def write(self, s: str) -> int:
        try:
            n = self.f.write(s)
            self.f.flush()
            return n
        except (OSError, ValueError):
            self.dropped += 1
            return 0

    def flush(self) -> None:
        try:
            self.f.flush()
        except (OSError, ValueError):
            self.dropped += 1


class _LogState(TypedDict):
    level: str
    format: str
    #: where lines go (None: stderr); typed loosely because structlog's
    #: PrintLoggerFactory asks a TextIO, and _SafeFile is the write/flush it uses
    file: Any


_state: _LogState = {"level": "info", "format": "console", "file": None}


def _processors(fmt: str) -> list[Processor]:
    procs: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=False),
    ]
    if fmt == "json":
        procs += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer(sort_keys=False)]
    else:
        procs += [structlog.processors.format_exc_info, structlog.dev.ConsoleRenderer(colors=False)]
    return procs


def configure(logfile: str | None, fmt: str = "console", level: str = "info", *, redirect_stderr: bool = True) -> str:
    """Configure logging; returns where logs go (a path or ``"<stderr>"``)."""
    target: IO[str] = sys.stderr
    where = "<stderr>"
    if logfile and logfile != "-":
        try:
            # the log's directory (and its parent) may belong to the PCP user while
            # we are root: a symlink, FIFO or hard link planted at the name, or a
            # symlink planted for a directory on the way, is refused, not followed
            fd = open_append(logfile, makedirs=True)
            f = open(fd, "a", encoding="utf-8", errors="backslashreplace", buffering=1)  # noqa: SIM115
        except OSError as err:
            why = err.strerror or str(err)
            print(f"pmda_py: cannot open log {logfile}: {why}; logging to stderr", file=sys.stderr)
        else:
            target = f
            where = logfile
            if redirect_stderr:
                try:
                    os.dup2(f.fileno(), 2)
                except OSError:
                    pass
    _state.update({"level": level, "format": fmt, "file": _SafeFile(target)})
    _apply()
    return where


def _apply() -> None:
    structlog.configure(
        processors=_processors(_state["format"]),
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(_state["level"], logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=_state["file"] or sys.stderr),
        cache_logger_on_first_use=False,
    )


def set_level(level: str) -> None:
    """Change the log level at run time (the control table's pmstore)."""
    if level not in _LEVELS:
        raise ValueError(level)
    _state["level"] = level
    _apply()


def set_format(fmt: str) -> None:
    """Change the log format (``console`` or ``json``) at run time (a reload)."""
    if fmt not in ("console", "json"):
        raise ValueError(fmt)
    _state["format"] = fmt
    _apply()


def current_level() -> str:
    return str(_state["level"])
