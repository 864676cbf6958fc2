"""pmdaopenmetrics' names, numbers and metadata, sans-IO.

Numbering (PCP 6.0.3 pmdaopenmetrics.python):

* a source (``config.d/NAME.url`` or an executable ``config.d/NAME``) is a
  cluster; ``NAME`` -> cluster is the persisted name table of indom 0
  (cluster 0 is ``control``, the agent's own statistics);
* a metric of cluster ``c`` is an item, from the persisted name table of
  indom ``c`` (at most 1024 per source);
* metric ``m`` of cluster ``c`` has indom serial ``4096 + c*1024 + m``
  (unless it is singular), whose instance names are persisted too.

A name table file (``$PCP_VAR_DIR/config/pmda/144.N.py``) is two pickles
(protocol 0): the list of names, then the "prefix mode" flag (instance names
shown as ``"N name"``).  They are read by :mod:`.names`, which understands
only that form (no ``pickle`` involved), so a planted file cannot run code
or unfold into more than its size.

A source's series are bounded (:class:`~.exposition.Limits`): distinct
instances (label sets) and their label characters per source, instances per
metric.  A *new* series past a bound is refused (its sample skipped, the
rest of the document kept) and reported once per scrape as a problem whose
text does not change while the state lasts; a series unseen for
``series_ttl`` seconds is reclaimed (:meth:`NameTable.reclaim`).
"""

from __future__ import annotations

import math
import re
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from pmda_py.openmetrics.exposition import Limits, Sample
from pmda_py.openmetrics.labels import (
    MAX_SET_JSON,
    MAX_SET_LABELS,
    interned,
    label_cost,
    label_items,
    label_pairs,
    pairs_dict,
    set_fits,
)
from pmda_py.openmetrics.metadata import (
    metric_metadata,
    parse_units,
    split_help,
    valid_metric_name,
    valid_unicode_name,
)
from pmda_py.openmetrics.names import NameTable
from pmda_py.openmetrics.records import Value
from pmda_py.pmapi import PM_IN_NULL, PmType, PmUnits

if TYPE_CHECKING:
    from pmda_py.openmetrics.answers import Cached

__all__ = [
    "MAX_CLUSTER",
    "MAX_INDOM",
    "MAX_METRIC",
    "Ingest",
    "MetricState",
    "NameTable",
    "SourceConfig",
    "SourceModel",
    "check_filter",
    "indom_serial",
    "interned",
    "label_items",
    "label_pairs",
    "metric_metadata",
    "pairs_dict",
    "parse_units",
    "parse_url_config",
]

MAX_CLUSTER = 0xFFF
MAX_METRIC = 0x3FF
MAX_INDOM = 0x7FFFFFFF


def indom_serial(cluster: int, item: int) -> int:
    """The indom serial pmdaopenmetrics gives metric ``item`` of ``cluster``."""
    return MAX_CLUSTER + 1 + cluster * (MAX_METRIC + 1) + item


# --------------------------------------------------------------- config


@attrs.define
class SourceConfig:
    """A ``.url`` file: the URL, HEADER:, FILTER: and METADATA: lines."""

    url: str = ""
    headers: dict[str, str] = attrs.field(factory=dict)
    filters: list[tuple[str, str, re.Pattern[str]]] = attrs.field(factory=list)
    metadata: list[tuple[re.Pattern[str], list[str]]] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)
    #: why the headers cannot be sent (a ``HEADER:`` line HTTP refuses): an HTTP source fails with it
    unsendable: str = ""


#: what HTTP can send as a header's name (a token) and value (visible ASCII, blanks between words)
_HEADER_NAME = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")


def parse_url_config(text: str) -> SourceConfig:
    """pmdaopenmetrics' ``parse_url_config``: the first line is the URL;
    ``HEADER: name: value``, ``FILTER: {INCLUDE|EXCLUDE|OPTIONAL} {METRIC|LABEL} regex``,
    ``METADATA: regex type indom semantics units...`` and ``#`` comments follow.
    Lines end as a text file's read by Python do (``\\n``, ``\\r\\n`` or ``\\r``:
    a file edited on Windows reads as one written on Linux)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")
    cfg = SourceConfig(url=lines[0].strip())
    for n, line in enumerate(lines[1:], 2):
        if not line or line.startswith("#"):
            continue
        if line.startswith("HEADER:"):
            parts = line.split(":", 2)
            key = "".join(parts[1].split())
            value = " ".join(parts[2:]).strip(" \t")
            # (never quoted: a header may hold a token or a password; the HTTP client's own error would)
            if not _HEADER_NAME.fullmatch(key):
                why = f"line {n}: HEADER name HTTP cannot send ({len(key)} characters)"
            elif not _HEADER_VALUE.fullmatch(value):
                why = f"line {n}: HEADER value HTTP cannot send ({len(value)} characters)"
            else:
                cfg.headers[key] = value
                continue
            cfg.problems.append(why)
            cfg.unsendable = cfg.unsendable or why
        elif line.startswith("FILTER:"):
            fs = line[len("FILTER:") :].split()
            if len(fs) < 3 or fs[0] not in ("INCLUDE", "EXCLUDE", "OPTIONAL") or fs[1] not in ("METRIC", "LABEL"):
                cfg.problems.append(f"line {n}: bad FILTER line")
                continue
            try:
                rx = re.compile(" ".join(fs[2:]))
            except re.error as err:
                cfg.problems.append(f"line {n}: bad FILTER regex ({err.msg})")
                continue
            cfg.filters.append((fs[0], fs[1], rx))
        elif line.startswith("METADATA:"):
            md = line.split(" ")[1:]
            if len(md) < 5:
                cfg.problems.append(f"line {n}: bad METADATA line")
                continue
            try:
                cfg.metadata.append((re.compile(md[0]), md[1:]))
            except re.error as err:
                cfg.problems.append(f"line {n}: bad METADATA regex ({err.msg})")
        else:
            cfg.problems.append(f"line {n}: unrecognised config entry ignored ({len(line)} characters)")
    return cfg


def check_filter(filters: Sequence[tuple[str, str, re.Pattern[str]]], name: str, kind: str) -> str:
    """INCLUDE, EXCLUDE or OPTIONAL for ``name`` (first match wins)."""
    for action, what, rx in filters:
        if what == kind and rx.match(name):
            return action
    return "INCLUDE"


# --------------------------------------------------------------- metrics


@attrs.define(eq=False)
class MetricState:
    """One metric of a source, as pmdaopenmetrics' ``Metric``."""

    name: str  #: the exposition name
    item: int
    leaf: str  #: the name under ``openmetrics.SOURCE.``
    type: int
    sem: int
    units: PmUnits
    singular: bool
    pcp: bool  #: described by a PCP/PCP5/METADATA line (instance names verbatim)
    oneline: str
    help: str
    indom_serial: int | None
    table: NameTable | None  #: the instance names (None: singular)
    labels: dict[str, str] = attrs.field(factory=dict)  #: item labels (accumulated as pmdaopenmetrics does)
    optional: dict[str, str] | None = None
    #: by instance: its labels as :func:`label_pairs` (a dict each cost ~100 bytes more)
    inst_labels: dict[int, tuple[str, ...]] = attrs.field(factory=dict)
    #: this scrape's values, inst -> value (emptied once the scrape is digested)
    values: dict[int, Value] = attrs.field(factory=dict)
    #: the daemon's mirror: ``inst_labels`` as a ``marshal`` image, read when a LABEL request asks
    #: (a dict per instance costs ~250 bytes; the image ~30)
    packed_labels: bytes = b""
    cache: Cached | None = None  #: the daemon's prepared answer (see :mod:`.answers`)
    #: by instance number: when it was last in a document (NaN: never, or reclaimed); None for a
    #: singular metric and in the daemon's mirror (which keeps no such state)
    seen: array[float] | None = None
    #: by instance number: the characters it counts against the source's bound (-1: not known,
    #: an instance read from the saved table counts its name's length)
    cost: array[int] | None = None
    #: the labels, and bytes of JSON (:func:`~.labels.label_cost`), of its item label set
    #: (``labels``): kept within what PCP takes in one label set
    label_count: int = 0
    label_json: int = 0

    def item_labels(self) -> dict[str, str]:
        opt = self.optional or {}
        return {k: v for k, v in self.labels.items() if k not in opt}


def _grown(column: array[float] | array[int] | None, inst: int, missing: float) -> None:
    """``column`` long enough to hold ``inst`` (grown with ``missing``: the
    numbers are given in order, so it grows by one at a time)."""
    assert column is not None  # (a metric with instances has both columns)
    short = inst + 1 - len(column)
    if short > 0:
        column.frombytes(array(column.typecode, [missing] * short).tobytes())


class _OutOfRange(ValueError):
    """An integer value its type cannot hold."""


#: the range of each integer type (a value outside it is a bad value: the fetch could not send it)
_INT_RANGE: dict[int, tuple[int, int]] = {
    PmType.I32: (-(1 << 31), (1 << 31) - 1),
    PmType.U32: (0, (1 << 32) - 1),
    PmType.I64: (-(1 << 63), (1 << 63) - 1),
    PmType.U64: (0, (1 << 64) - 1),
}


def _convert(mtype: int, text: str) -> Value:
    if mtype in (PmType.DOUBLE, PmType.FLOAT):
        return float(text)
    bounds = _INT_RANGE.get(mtype)
    if bounds is not None:
        value = int(text)
        if not bounds[0] <= value <= bounds[1]:
            raise _OutOfRange
        return value
    return text


@attrs.define
class Ingest:
    """What one document did to a source."""

    new: list[MetricState] = attrs.field(factory=list)
    present: int = 0
    samples: int = 0
    errors: list[str] = attrs.field(factory=list)
    excluded: list[str] = attrs.field(factory=list)
    dirty: list[tuple[int, NameTable]] = attrs.field(factory=list)  #: (serial, table) to save
    new_instances: bool = False
    labels_changed: bool = False  #: some instance's labels differ from the last document's
    refused: dict[str, int] = attrs.field(factory=dict)  #: why new series were refused -> how many
    reclaimed: int = 0  #: instances reclaimed (unseen for ``series_ttl``)


class _Refused(Exception):
    """A new series (or metric) past a bound: its sample is skipped."""


_PCP_SET = f"what PCP takes in one label set ({MAX_SET_LABELS} labels, {MAX_SET_JSON} bytes of JSON)"
#: why a series was refused, or a metric's item labels left as they were (each logged once while it lasts)
_SERIES_PAST_SET = f"a new series with labels past {_PCP_SET} refused"
_ITEM_PAST_SET = f"a metric's item labels reached {_PCP_SET}: further labels left out"


def _set_cost(labels: Mapping[str, str]) -> tuple[int, int]:
    """The labels and the bytes of JSON (:func:`~.labels.label_cost`) of a label set."""
    costs = [c for c in (label_cost(k, v) for k, v in labels.items()) if c]
    return len(costs), sum(costs)


class SourceModel:
    """The metrics of one source, fed one parsed document per scrape.

    ``load_table(serial, maxnum)`` returns the saved name table of indom
    ``serial`` (an empty one if there is none): the I/O is the caller's.
    """

    def __init__(
        self,
        name: str,
        cluster: int,
        items: NameTable,
        load_table: Callable[[int, int], NameTable],
        limits: Limits | None = None,
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.items = items
        self.load_table = load_table
        self.limits = limits or Limits()
        self.metrics: dict[str, MetricState] = {}
        self.by_item: dict[int, MetricState] = {}
        self.series = 0  #: live instances of every metric
        self.label_bytes = 0  #: their cost (instance name and label characters)
        self.clock: Callable[[], float] = time.monotonic
        self._now = self._swept = self.clock()

    def _labels(
        self, labels: Mapping[str, str] | None, filters: Sequence[tuple[str, str, re.Pattern[str]]]
    ) -> tuple[dict[str, str] | None, dict[str, str] | None]:
        if labels is None:
            return None, None
        inc: dict[str, str] = {}
        opt: dict[str, str] = {}
        for k, v in labels.items():
            d = check_filter(filters, k, "LABEL") if filters else "INCLUDE"
            if d == "INCLUDE":
                inc[k] = v
            elif d == "OPTIONAL":
                inc[k] = opt[k] = v
        if not inc:
            return None, None
        return inc, (opt or None)

    def ingest(self, samples: Iterable[Sample], config: SourceConfig | None = None) -> Ingest:
        """Replace the values with those of ``samples`` (pmdaopenmetrics'
        ``parse_metric_line`` for each; the first bad sample ends it)."""
        cfg = config or SourceConfig()
        res = Ingest()
        for m in self.metrics.values():
            m.values = {}
        dirty: dict[int, NameTable] = {}
        self._now = self.clock()
        for s in samples:
            res.samples += 1
            try:
                inc, opt = self._labels(s.labels, cfg.filters)
                found = self.metrics.get(s.name)
                if found is not None:
                    m = found
                else:
                    if cfg.filters and check_filter(cfg.filters, s.name, "METRIC") != "INCLUDE":
                        res.excluded.append(s.name)
                        continue
                    if not valid_metric_name(s.name):
                        if valid_unicode_name(s.name):  # (pmdaopenmetrics takes it, and reads on)
                            if self.items.get(s.name) is None and len(self.items.names) <= self.items.maxnum:
                                self.items.lookup(s.name)  # (its item taken as there: the next metrics' PMIDs alike)
                                dirty[self.cluster] = self.items
                            raise _Refused("non-ASCII metric names refused")
                        raise ValueError(f"invalid metric name ({len(s.name)} characters)")
                    if len(self.items.names) > self.items.maxnum and self.items.get(s.name) is None:
                        raise _Refused(f"more than {self.items.maxnum + 1} metrics: new metrics refused")
                    dirty[self.cluster] = self.items  # (its item is taken: kept even if its metadata fails)
                    m = self._new_metric(s, inc, opt, cfg, res)
                    if m.table is not None and m.indom_serial is not None:
                        dirty[m.indom_serial] = m.table
                self._store(m, inc, opt, s.value, res)
                if m.table is not None and m.table.dirty and m.indom_serial is not None:
                    dirty[m.indom_serial] = m.table
            except _Refused as why:
                reason = str(why)
                res.refused[reason] = res.refused.get(reason, 0) + 1
            except ValueError as err:
                res.errors.append(f"sample {res.samples}: cannot parse/store: {err}")
                break
        if self._now - self._swept >= min(self.limits.series_ttl / 4, 60.0):
            self._swept = self._now
            self._reclaim(res, dirty)
        res.dirty = list(dirty.items())
        res.present = sum(1 for m in self.metrics.values() if m.values)
        return res

    def _new_metric(
        self,
        s: Sample,
        inc: dict[str, str] | None,
        opt: dict[str, str] | None,
        cfg: SourceConfig,
        res: Ingest,
    ) -> MetricState:
        item = self.items.lookup(s.name)
        pcpline = s.pcpline
        for rx, md in cfg.metadata:
            if rx.match(s.name):
                pcpline = f"METADATA {s.name} {' '.join(md)}"
                break
        leaf, mtype, sem, units, null_indom = metric_metadata(s.name, pcpline, s.typeline, res.errors)
        singular = inc is None or null_indom
        serial = None if singular else indom_serial(self.cluster, item)
        table = None if serial is None else self.load_table(serial, MAX_INDOM)
        seen = cost = None
        if table is not None:
            self.series += table.live
            self.label_bytes += table.nbytes
            # a saved instance counts as seen now
            seen = array("d", [self._now if table.is_live(i) else math.nan for i in range(len(table.names))])
            cost = array("q", [-1]) * len(table.names)
        oneline, help_text = split_help(s.helpline)
        labels, optional = dict(inc or {}), dict(opt) if opt else None
        count, size = _set_cost(labels)  # (the optional labels are among them)
        if count > MAX_SET_LABELS or 1 + size > MAX_SET_JSON:
            res.refused[_ITEM_PAST_SET] = res.refused.get(_ITEM_PAST_SET, 0) + 1
            labels, optional, count, size = {}, None, 0, 0
        m = MetricState(
            s.name,
            item,
            leaf,
            mtype,
            sem,
            units,
            singular,
            bool(pcpline),
            oneline,
            help_text,
            serial,
            table,
            labels,
            optional,
            seen=seen,
            cost=cost,
            label_count=count,
            label_json=size,
        )
        self.metrics[s.name] = m
        self.by_item[item] = m
        res.new.append(m)
        return m

    def _store(
        self, m: MetricState, inc: dict[str, str] | None, opt: dict[str, str] | None, value: str, res: Ingest
    ) -> None:
        if m.singular or m.table is None:
            inst = PM_IN_NULL
            labels = inc or {}
        else:
            if inc is None:
                raise ValueError("a sample without labels for a metric with instances")
            naming = inc if opt is None else {k: v for k, v in inc.items() if k not in opt}
            instname = None
            if m.pcp:
                instname = naming.get("instname", naming.get("instance"))
            if instname is None:
                if not m.table.prefix_mode:
                    m.table.prefix_mode = True
                    m.table.dirty = True
                instname = " ".join(f"{k}:{v}" for k, v in sorted(naming.items()))
                if not naming.items() <= m.labels.items():
                    self._item_labels(m, naming, res)
            inst_known = m.table.get(instname)
            if inst_known is None:
                inst = self._new_series(m, instname, naming)
                res.new_instances = True
            else:
                inst = inst_known
            _grown(m.seen, inst, math.nan)
            assert m.seen is not None
            m.seen[inst] = self._now
            labels = naming
        try:
            m.values[inst] = _convert(m.type, value)
        except _OutOfRange:
            res.errors.append(f"sample {res.samples}: bad value (out of range for its type)")
        except ValueError:
            res.errors.append(f"sample {res.samples}: bad value ({len(value)} characters)")
        pairs = label_pairs(labels)
        if m.inst_labels.get(inst) != pairs:
            res.labels_changed = True
            m.inst_labels[inst] = tuple([sys.intern(x) for x in pairs])

    @staticmethod
    def _item_labels(m: MetricState, naming: Mapping[str, str], res: Ingest) -> None:
        """pmdaopenmetrics' item labels: every instance's, the last value of
        each name kept, while they make a label set PCP takes."""
        count, size = m.label_count, m.label_json
        for k, v in naming.items():
            old = m.labels.get(k)
            if old != v:
                cost = label_cost(k, v)
                if old is None:
                    count += 1 if cost else 0
                else:
                    cost -= label_cost(k, old)
                size += cost
        if count > MAX_SET_LABELS or 1 + size > MAX_SET_JSON:
            res.refused[_ITEM_PAST_SET] = res.refused.get(_ITEM_PAST_SET, 0) + 1
            return
        m.labels.update(interned(naming))
        m.label_count, m.label_json = count, size

    def _new_series(self, m: MetricState, instname: str, labels: Mapping[str, str]) -> int:
        """The number of a new instance of ``m``, within the bounds."""
        assert m.table is not None
        lim = self.limits
        if m.table.live >= lim.max_instances:
            raise _Refused(f"a metric reached {lim.max_instances} instances: its new instances refused")
        if self.series >= lim.max_series:
            raise _Refused(f"the source reached {lim.max_series} instances: new instances refused")
        # (its instance's label set: its labels and, before PCP 6.1, "instname" ("N NAME"))
        if not set_fits(labels, {"instname": f"{MAX_INDOM} {instname}"}):
            raise _Refused(_SERIES_PAST_SET)
        cost = len(instname) + sum(len(k) + len(v) for k, v in labels.items())
        if self.label_bytes + cost > lim.max_label_bytes:
            raise _Refused(f"the source reached {lim.max_label_bytes} characters of labels: new instances refused")
        inst = m.table.lookup(instname)
        self.series += 1
        self.label_bytes += cost
        _grown(m.cost, inst, -1)
        assert m.cost is not None
        m.cost[inst] = cost
        return inst

    def _reclaim(self, res: Ingest, dirty: dict[int, NameTable]) -> None:
        """Instances unseen for ``series_ttl`` seconds are forgotten."""
        oldest = self._now - self.limits.series_ttl
        for m in self.metrics.values():
            seen, cost = m.seen, m.cost
            if m.table is None or seen is None or cost is None:
                continue
            stale = [i for i, t in enumerate(seen) if t < oldest]  # (NaN: never less)
            for i in stale:
                seen[i] = math.nan
                m.inst_labels.pop(i, None)
                size = m.table.reclaim(i)
                self.series -= 1
                known = cost[i] if i < len(cost) else -1
                self.label_bytes -= size if known < 0 else known
            if stale:
                res.reclaimed += len(stale)
                res.new_instances = True
                if m.indom_serial is not None:
                    dirty[m.indom_serial] = m.table
