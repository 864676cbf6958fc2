"""PCP's "simple" PMDA rebuilt on the table API.

Same metric names (below the mount point), PMIDs relative to the domain,
types, units, help text, labels, instance domains (``colour`` static,
``time`` driven by ``$PCP_PMDAS_DIR/simple/simple.conf``), the same value
sequence and store rules as ``pmdasimple.python`` (PCP 6.0.3):

* every FETCH increments ``numfetch``; each fetched ``color`` instance
  increments modulo 255 (from 0, 100, 200);
* ``time.user``/``time.sys`` are this process's CPU times;
* ``now`` gives seconds, minutes and hours of the local time for the
  instances named in the first line of ``simple.conf`` (ids stable,
  persisted); at most :data:`CONF_LINE` bytes of it are read, as PCP's C
  pmdasimple reads them, and only from a regular file (a FIFO or device put
  at the path cannot stall a FETCH): an unreadable file names no instance,
  said once in the log until it is read again;
* pmstore: ``numfetch`` (negative -> PM_ERR_BADSTORE and 0), ``color``
  (outside 0..255 -> PM_ERR_BADSTORE, clamped); others PM_ERR_PERMISSION.
"""

from __future__ import annotations

import os
import time

import structlog

from pmda_py.errors import PmdaError, PmErr
from pmda_py.pcpversion import pcp_conf
from pmda_py.pmapi import PmSem, PmType
from pmda_py.safefile import read_regular
from pmda_py.table import (
    FetchRequest,
    FetchResult,
    InDom,
    Metric,
    StoreRequest,
    Table,
    TableContext,
    Value,
    Values,
    units,
)

__all__ = ["SimpleTable"]

_HELP_NUMFETCH = """The cumulative number of pmFetch operations directed to the "simple"
PMDA.

This counter may be modified with pmstore(1)."""

_HELP_COLOR = """This metric has 3 instances, designated "red", "green" and "blue".

The value of the metric is monotonic increasing in the range 0 to
255, then back to 0.  The different instances have different starting
values, namely 0 (red), 100 (green) and 200 (blue).

The metric values my be altered using pmstore(1)."""

_HELP_USER = """The time in seconds that the CPU has spent executing user code for the
agent."""

_HELP_SYS = """The time in seconds that the CPU has spent executing system code for
the agent."""

_HELP_NOW = """The value reflects the current time of day through a dynamically
reconfigurable instance domain.  On each metric value fetch request,
the agent checks to see whether the configuration file in
$PCP_PMDAS_DIR/simple/simple.conf has been modified - if it has then
the file is re-parsed and the instance domain for this metric is again
constructed according to its contents.

This configuration file contains a single line of comma-separated time
tokens from this set:
  "sec"  (seconds after the minute),
  "min"  (minutes after the hour),
  "hour" (hour since midnight).

An example configuration file could be:  sec,min,hour
and in this case the simple.now metric would export values
for the three instances "sec", "min" and "hour" corresponding
respectively to the components seconds, minutes and hours of the
current time of day.

The instance domain reflects each token present in the file, and the
values reflect the time at which the PMDA processes the fetch."""


log = structlog.get_logger("pmda_py.tables")

#: bytes of simple.conf's first line read (C pmdasimple's ``fgets`` into 256 bytes)
CONF_LINE = 255


class SimpleTable(Table):
    """The simple PMDA's metrics (mount it at ``simple`` to stand in for pmdasimple)."""

    name = "simple"
    accepts_options = True

    def __init__(self, config: str | None = None, **_options: str) -> None:
        self.domain_labels = {"role": "testing"}
        self.configfile = config or os.path.join(pcp_conf()["PCP_PMDAS_DIR"], "simple", "simple.conf")
        self._conf_error = ""  # why simple.conf could not be read last time (logged once)
        self.colour = InDom(
            0,
            {0: "red", 1: "green", 2: "blue"},
            oneline='Instance domain "colour" for simple PMDA',
            help='Universally 3 instances, "red" (0), "green" (1) and "blue" (3).',
            labels={"indom_name": "color", "model": "RGB"},
        )
        self.time = InDom(
            1,
            oneline='Dynamic instance domain "time" for simple PMDA',
            help="An instance domain which is computed on-the-fly for exporting current time\n"
            "information.  Refer to the help text for simple.now for a more complete\n"
            "explanation.",
            labels={"indom_name": "time", "unitsystem": "SI"},
            instance_labels=lambda inst, name: {"units": name} if name else {},
            persistent=True,
        )
        self.numfetch_m = Metric(
            "numfetch",
            cluster=0,
            item=0,
            type=PmType.U32,
            oneline="Number of pmFetch operations.",
            help=_HELP_NUMFETCH,
            writable=True,
        )
        self.color_m = Metric(
            "color",
            cluster=0,
            item=1,
            type=PmType.I32,
            indom=self.colour,
            oneline="Metrics which increment with each fetch",
            help=_HELP_COLOR,
            writable=True,
        )
        sec = units(time=1, scale_time=3)
        self.user_m = Metric(
            "time.user",
            cluster=1,
            item=2,
            type=PmType.DOUBLE,
            sem=PmSem.COUNTER,
            units=sec,
            oneline="Time agent has spent executing user code",
            help=_HELP_USER,
        )
        self.sys_m = Metric(
            "time.sys",
            cluster=1,
            item=3,
            type=PmType.DOUBLE,
            sem=PmSem.COUNTER,
            units=sec,
            oneline="Time agent has spent executing system code",
            help=_HELP_SYS,
        )
        self.now_m = Metric(
            "now",
            cluster=2,
            item=4,
            type=PmType.U32,
            indom=self.time,
            oneline="Time of day with a configurable instance domain",
            help=_HELP_NOW,
        )
        self.numfetch = 0
        self.colours = {0: 0, 1: 100, 2: 200}
        self.times = os.times()
        self.oldfetch = -1

    async def startup(self, context: TableContext) -> None:
        self._timenow_check()

    def _timenow_check(self) -> None:
        try:
            head = read_regular(self.configfile, CONF_LINE)
        except OSError as err:
            line = ""
            why = err.strerror or str(err)
            if why != self._conf_error:
                self._conf_error = why
                log.warning("simple_conf_unreadable", path=self.configfile, error=why)
        else:
            self._conf_error = ""
            line = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        keys = [k for k in line.split(",") if k in ("sec", "min", "hour")]
        self.time.set_names(dict.fromkeys(keys))

    def _now_values(self) -> dict[int, int]:
        lt = time.localtime()
        fields = {"sec": lt.tm_sec, "min": lt.tm_min, "hour": lt.tm_hour}
        return {inst: fields[name] for inst, name in self.time.instances.items()}

    async def refresh_instances(self, indom: InDom) -> None:
        if indom is self.time:
            self._timenow_check()

    async def fetch(self, request: FetchRequest) -> FetchResult:
        self.numfetch += 1
        self._timenow_check()
        out: dict[Metric, Values] = {}
        for m in request.metrics:
            if m is self.numfetch_m:
                out[m] = self.numfetch
            elif m is self.color_m:
                vals: dict[int, Value] = {}
                for inst, _name in request.instances(self.colour):
                    self.colours[inst] = (self.colours[inst] + 1) % 255
                    vals[inst] = self.colours[inst]
                out[m] = vals
            elif m in (self.user_m, self.sys_m):
                if self.oldfetch < self.numfetch:
                    self.times = os.times()
                    self.oldfetch = self.numfetch
                out[m] = self.times[0] if m is self.user_m else self.times[1]
            elif m is self.now_m:
                out[m] = self._now_values()
        return out

    async def store(self, request: StoreRequest) -> None:
        # value by value, stopping at the first refused one, as libpcp_pmda's
        # pmdaStore does with pmdasimple's callback (the refused value is
        # still clamped and kept)
        m = request.metric
        if m is self.numfetch_m:
            for val in request.values.values():
                v = int(val)
                self.numfetch = max(v, 0)
                if v < 0:
                    raise PmdaError(code=PmErr.BADSTORE)
        elif m is self.color_m:
            for inst, val in request.values.items():
                v = int(val)
                self.colours[inst] = min(max(v, 0), 255)
                if not 0 <= v <= 255:
                    raise PmdaError(code=PmErr.BADSTORE)
        else:
            raise PmdaError(code=PmErr.PERMISSION)
