"""How often a table's problems reach the log: :class:`ProblemLog`.

A table that fails at every request (a ``fetch`` that raises, a value of the
wrong type for a hundred metrics) would otherwise write a line per request
and per metric: at pmlogger's pace, hundreds of megabytes a day.  Each
distinct problem of a table (its event, metric, call and error text) is
logged the first time; its repeats are counted, and logged again, with how
many there were, only once :data:`REPEAT_AFTER` seconds have passed.  A
table remembers at most :data:`MAX_PROBLEMS` distinct problems at a time:
past that, its new problems are counted and said once per
:data:`REPEAT_AFTER` in one ``table_problems_not_logged`` line, while every
other table's problems are still logged.  A text of a table's making (an
exception's message) goes into the log cut to :data:`MAX_TEXT` characters.

The counters of :class:`~pmda_py.stats.PmdaStats` (``table_errors``,
``table_timeouts``) still count every occurrence.  Sans-IO: logging only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Callable, Final, Literal, Optional

import attrs
import structlog

__all__ = ["MAX_PROBLEMS", "MAX_TEXT", "REPEAT_AFTER", "Level", "ProblemLog", "cut"]

log = structlog.get_logger("pmda_py.dispatch")

#: the levels a problem is logged at
Level = Literal["error", "warning"]
#: fields of a problem's line that do not make it another problem (e.g. an instance id)
Extra = Optional[Mapping[str, object]]
#: seconds before a problem already logged is logged again (with its repeats)
REPEAT_AFTER: Final = 3600.0
#: distinct problems of one table remembered at a time
MAX_PROBLEMS: Final = 256
#: characters of a text of a table's making put in a log line
MAX_TEXT: Final = 512


def cut(text: str) -> str:
    """``text`` within :data:`MAX_TEXT` characters (a cut one says how long it was)."""
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}... ({len(text)} characters)"


@attrs.define
class _Seen:
    """A problem last logged at ``logged``, and its repeats since."""

    logged: float
    repeats: int = 0


@attrs.define
class _Source:
    """One table's problems: each one seen, and those not logged because
    too many were remembered (and when that was last said)."""

    seen: dict[tuple[str, ...], _Seen] = attrs.field(factory=dict)
    not_logged: int = 0
    said_full: float | None = None


class ProblemLog:
    """Logs tables' problems, each distinct one once per :data:`REPEAT_AFTER`
    (see the module)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sources: dict[str, _Source] = {}

    def error(
        self, table: str, event: str, /, *, extra: Extra = None, exc_info: bool = False, **fields: object
    ) -> bool:
        """:meth:`report` at error level."""
        return self.report("error", table, event, extra=extra, exc_info=exc_info, **fields)

    def warning(
        self, table: str, event: str, /, *, extra: Extra = None, exc_info: bool = False, **fields: object
    ) -> bool:
        """:meth:`report` at warning level."""
        return self.report("warning", table, event, extra=extra, exc_info=exc_info, **fields)

    def report(
        self,
        level: Level,
        table: str,
        event: str,
        /,
        *,
        extra: Extra = None,
        exc_info: bool = False,
        **fields: object,
    ) -> bool:
        """Log ``event`` for ``table`` at ``level`` unless it is a repeat
        (the same ``fields``); whether it was logged.  ``extra`` fields go
        into the line but do not make a problem another (an instance id);
        ``exc_info`` adds the exception being handled, traceback and all."""
        now = self._clock()
        source = self._sources.get(table)
        if source is None:
            source = self._sources[table] = _Source()
        key = (event, *(f"{k}={v}" for k, v in fields.items()))
        seen = source.seen.get(key)
        if seen is not None:
            if now - seen.logged < REPEAT_AFTER:
                seen.repeats += 1
                return False
            repeats, seen.logged, seen.repeats = seen.repeats, now, 0
            self._emit(level, event, exc_info, table=table, **fields, **(extra or {}), repeats=repeats)
            return True
        if len(source.seen) >= MAX_PROBLEMS:
            # forget the problems whose quiet time is over (they would be logged again anyway)
            source.seen = {k: s for k, s in source.seen.items() if now - s.logged < REPEAT_AFTER}
        if len(source.seen) >= MAX_PROBLEMS:
            source.not_logged += 1
            if source.said_full is None or now - source.said_full >= REPEAT_AFTER:
                source.said_full = now
                log.warning(
                    "table_problems_not_logged",
                    table=table,
                    remembered=len(source.seen),
                    not_logged=source.not_logged,
                    detail=f"this table has {MAX_PROBLEMS} distinct problems logged in the last "
                    f"{REPEAT_AFTER:.0f} s: its new ones are counted, not logged, meanwhile",
                )
            return False
        source.seen[key] = _Seen(now)
        self._emit(level, event, exc_info, table=table, **fields, **(extra or {}))
        return True

    @staticmethod
    def _emit(level: Level, event: str, exc_info: bool, **fields: object) -> None:
        if exc_info:
            fields["exc_info"] = True
        if level == "error":
            log.error(event, **fields)
        else:
            log.warning(event, **fields)
