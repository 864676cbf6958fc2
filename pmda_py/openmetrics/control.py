"""The OpenMetrics table's control metrics (``openmetrics.control.*``,
cluster 0): per-source calls, times and status, and the debug flag a
``pmstore`` sets, as pmdaopenmetrics exports them."""

from __future__ import annotations

from typing import Union

import structlog

from pmda_py import logconfig
from pmda_py.errors import PmdaError, PmErr
from pmda_py.openmetrics.sources import Source
from pmda_py.pmapi import PmSem, PmType, PmUnits
from pmda_py.table import InDom, Metric, StoreRequest, units

__all__ = ["ControlMetrics"]

log = structlog.get_logger("pmda_py.openmetrics")

_DEBUG_ONE = "debug flag to enable verbose log messages, to enable: pmstore openmetrics.control.debug 1"
#: pmdaopenmetrics 7.0 shortened control.debug's one-line text, the rest went to a help text (PCP commit ae1adec444)
_DEBUG_ONE_7 = "debug flag to enable verbose log messages"
_DEBUG_HELP_7 = "Debugging flag to enable verbose log messages, to enable:\n> pmstore openmetrics.control.debug 1"

#: a control metric's value: one per source (instance 0: all of them), or the debug flag
ControlValue = Union[dict[int, int], dict[int, str], int, PmdaError]


class ControlMetrics:
    """The control metrics of :class:`~.table.OpenMetricsTable` (a part of it)."""

    by_cluster: dict[int, Source]
    pcp7: bool
    debug: int = 0
    _level_before_debug: str = "info"

    def _control(self) -> None:
        """The control metrics (cluster 0), as pmdaopenmetrics has them."""
        self.c_sources = InDom(0)
        ms, cnt, ind = units(time=1, scale_time=2), units(count=1), self.c_sources

        def ctl(
            name: str,
            item: int,
            type_: int,
            sem: int,
            text: str,
            help: str = "",
            units: PmUnits | None = None,
            indom: InDom | None = None,
            writable: bool = False,
        ) -> Metric:
            # pmdaopenmetrics gives the one-line text as the help text too, unless it has a help text
            one, full = text, help or text
            return Metric(
                f"control.{name}",
                cluster=0,
                item=item,
                type=type_,
                sem=sem,
                units=units or PmUnits(),
                indom=indom,
                oneline=one,
                help=full,
                writable=writable,
            )

        self.c_calls = ctl(
            "calls", 1, PmType.U64, PmSem.COUNTER, "per-end-point source call counter", units=cnt, indom=ind
        )
        self.c_fetch_time = ctl(
            "fetch_time",
            2,
            PmType.U64,
            PmSem.COUNTER,
            "per-end-point source fetch time counter, excluding parse time",
            units=ms,
            indom=ind,
        )
        self.c_parse_time = ctl(
            "parse_time",
            3,
            PmType.U64,
            PmSem.COUNTER,
            "per-end-point source parse time counter, excluding fetch time",
            units=ms,
            indom=ind,
        )
        self.c_debug = ctl(
            "debug",
            4,
            PmType.U32,
            PmSem.DISCRETE,
            _DEBUG_ONE_7 if self.pcp7 else _DEBUG_ONE,
            _DEBUG_HELP_7 if self.pcp7 else "",
            writable=True,
        )
        self.c_status = ctl(
            "status",
            5,
            PmType.STRING,
            PmSem.INSTANT,
            "per-end-point source URL response status after the most recent fetch",
            indom=ind,
        )
        self.c_status_code = ctl(
            "status_code",
            6,
            PmType.I32,
            PmSem.DISCRETE,
            "per-end-point source URL response status code after the most recent fetch",
            indom=ind,
        )
        self._control_metrics = [
            self.c_calls,
            self.c_fetch_time,
            self.c_parse_time,
            self.c_debug,
            self.c_status,
            self.c_status_code,
        ]

    def _control_value(self, m: Metric) -> ControlValue:
        if m is self.c_debug:
            return self.debug
        srcs = self.by_cluster.values()
        if m is self.c_calls:
            return {0: sum(s.calls for s in srcs), **{s.cluster: s.calls for s in srcs}}
        if m is self.c_fetch_time:
            return {0: sum(s.fetch_ms for s in srcs), **{s.cluster: s.fetch_ms for s in srcs}}
        if m is self.c_parse_time:
            return {0: sum(s.parse_ms for s in srcs), **{s.cluster: s.parse_ms for s in srcs}}
        if m is self.c_status:
            return {0: "none", **{s.cluster: s.status for s in srcs}}
        if m is self.c_status_code:
            return {0: 0, **{s.cluster: s.status_code for s in srcs}}
        return PmdaError(code=PmErr.PMID)

    async def store(self, request: StoreRequest) -> None:
        if request.metric is not self.c_debug:
            raise PmdaError(code=PmErr.PERMISSION)
        value = int(next(iter(request.values.values())))
        if value < 0:
            raise PmdaError(code=PmErr.BADSTORE)
        debug = 1 if value else 0
        if debug and not self.debug:  # as pmdaopenmetrics: verbose logs while it is set
            self._level_before_debug = logconfig.current_level()
            logconfig.set_level("debug")
        elif not debug and self.debug:
            logconfig.set_level(self._level_before_debug)
        self.debug = debug
        log.info("openmetrics_debug", value=self.debug, log_level=logconfig.current_level())
