"""The OpenMetrics harvester table: pmdaopenmetrics' sources, names and ids,
scraped asynchronously, outside the fetch.

Mounted at ``openmetrics`` in domain 144 (``pmda-py run --openmetrics-compat``)
it stands in for PCP's pmdaopenmetrics: it reads the same
``$PCP_PMDAS_DIR/openmetrics/config.d`` (``*.url`` files with HEADER:,
FILTER: and METADATA: lines, ``file://`` URLs, executable scripts) and the
same persisted name tables (``$PCP_VAR_DIR/config/pmda/144.N.py``), so a
site keeps its PMIDs and instance numbers.

Unlike pmdaopenmetrics, which scrapes every source inside pmcd's fetch,
every source here has its own timer (``interval``), a deadline per scrape
(``timeout``) and a global cap on concurrent scrapes (``concurrency``); a
fetch answers at once from the last good parse, and one scrape serves every
client.  New and vanished metrics change the namespace (NAMES_CHANGE); the
table is not ready until the first round of scrapes has finished.

The scraping itself (HTTP, parsing, ids, saving the name tables) runs in
the daemon at first (:class:`~.scrape.Scraper`, whose models the table
answers from: one model per source), then, once a round overruns the
interval while the daemon was busy, in worker processes
(:mod:`pmda_py.openmetrics.scrape`), a source on one of them, so it never
holds the daemon's GIL or trio loop: the daemon swaps in each scrape's
digest (values already packed for the fetch) into a mirror of the worker's
model.  One more worker (up to ``max_workers``, default the CPUs) each time
a round overruns the interval while the workers were busy; ``workers=N`` is
N and no more (unless ``max_workers`` is given too), ``workers=0`` scrapes
in the daemon for good.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterable, Mapping, Sequence

import structlog
import trio

from pmda_py.config import option_seconds, option_whole
from pmda_py.errors import PmdaError, PmdaNotReady, PmErr
from pmda_py.malloc import trim_malloc
from pmda_py.openmetrics.answers import PackedPlans, swap_values
from pmda_py.openmetrics.control import ControlMetrics, ControlValue
from pmda_py.openmetrics.digest import UNUSED, apply_meta, instance_labels
from pmda_py.openmetrics.exposition import Limits
from pmda_py.openmetrics.model import (
    MAX_CLUSTER,
    MAX_METRIC,
    MetricState,
    NameTable,
    SourceModel,
    label_items,
    pairs_dict,
)
from pmda_py.openmetrics.pool import WorkerPool
from pmda_py.openmetrics.records import Digest, LogEntry, Value
from pmda_py.openmetrics.scheduler import Scheduling, without_details
from pmda_py.openmetrics.scrape import Scraper
from pmda_py.openmetrics.sources import Source, find_sources, valid_source_name
from pmda_py.openmetrics.state import StateFiles
from pmda_py.pcpversion import parse, pcp_conf
from pmda_py.pcpversion import pcp_version as installed_pcp_version
from pmda_py.pmdacache import PmdaCache
from pmda_py.table import (
    Columns,
    FetchRequest,
    FetchResult,
    InDom,
    Metric,
    PackedFetch,
    Table,
    TableContext,
)

__all__ = ["OpenMetricsTable"]

log = structlog.get_logger("pmda_py.openmetrics")

#: pmdaopenmetrics polls a source it never reached every 10 s; with no
#: timer of its own otherwise (it scrapes on every fetch), that is the interval
DEFAULT_INTERVAL = 10.0
DEFAULT_TIMEOUT = 2.0  #: pmdaopenmetrics' -t default
DEFAULT_CONCURRENCY = 100  #: pmdaopenmetrics' thread cap
#: worker processes at first (0: scrape in the daemon): every worker is a Python of its own
#: (~30 MB resident, and a copy of its sources' models); one is started only where the daemon
#: cannot scrape every source within the interval (a round overran it while the daemon was
#: busy), more where the workers cannot, up to ``max_workers``
DEFAULT_WORKERS = 0
NAMES_EVERY = 0.5  #: seconds between namespace changes told to the dispatcher (at most)
DEFAULT_WORKER_GRACE = 30.0  #: a worker silent this long past a scrape's timeout is killed and replaced

#: the instance cache of every source metric's indom: none (they are neither persistent nor
#: given names to number, so the daemon never uses it; one each would cost ~350 bytes a metric)
_NO_CACHE = PmdaCache()

_L_INDOM, _L_CLUSTER, _L_ITEM, _L_INSTANCES, _L_OPTIONAL = 0x04, 0x08, 0x10, 0x20, 0x80


def _flag(value: str) -> bool:
    return value not in ("0", "", "no", "false")


class OpenMetricsTable(Scheduling, ControlMetrics, Table):
    """OpenMetrics/Prometheus endpoints, as PCP's pmdaopenmetrics serves them."""

    name = "openmetrics"
    accepts_options = True
    dynamic_names = True
    deadline = 2.0

    def __init__(
        self,
        dir: str | None = None,
        state_dir: str | None = None,
        interval: str = str(DEFAULT_INTERVAL),
        timeout: str = str(DEFAULT_TIMEOUT),
        concurrency: str = str(DEFAULT_CONCURRENCY),
        max_bytes: str = str(Limits().max_bytes),
        max_series: str = str(Limits().max_series),
        max_label_bytes: str = str(Limits().max_label_bytes),
        series_ttl: str = str(Limits().series_ttl),
        domain: str = "144",
        sort: str = "1",
        workers: str = "",
        max_workers: str = "",
        worker_grace: str = str(DEFAULT_WORKER_GRACE),
        pcp_version: str = "",
        **_options: str,
    ) -> None:
        """``pcp_version``: the pmdaopenmetrics to imitate (default: the
        installed PCP's, from pcp.conf): before 6.1 it gives every instance
        an optional ``instname`` label (``"N NAME"``); 6.1 dropped it.  7.0
        shortened ``control.debug``'s one-line text (the rest is its help text)."""
        conf = pcp_conf()
        self.dir = os.path.normpath(dir or os.path.join(conf["PCP_PMDAS_DIR"], "openmetrics", "config.d"))
        #: pmdaopenmetrics' place; the daemon's --state-dir (Config.state_dir) when not given here
        self.state_dir = state_dir or os.path.join(conf["PCP_VAR_DIR"], "config", "pmda")
        self._state_dir_given = state_dir is not None
        self.interval = option_seconds("interval", interval)
        self.timeout = option_seconds("timeout", timeout)
        self.concurrency = option_whole("concurrency", concurrency, 1)
        self.limits = Limits(
            max_bytes=option_whole("max_bytes", max_bytes, 1),
            max_series=option_whole("max_series", max_series, 1),
            max_label_bytes=option_whole("max_label_bytes", max_label_bytes, 1),
            series_ttl=option_seconds("series_ttl", series_ttl),
        )
        self.domain = option_whole("domain", domain, 1)
        self.sort = _flag(sort)
        #: scraper worker processes now: ``workers`` if given (and no more), else DEFAULT_WORKERS,
        #: growing to ``max_workers`` (default: the number of CPUs) while the daemon or the
        #: workers cannot keep up
        self.workers = option_whole("workers", workers, 0) if workers else DEFAULT_WORKERS
        if workers and not max_workers:
            self.max_workers = self.workers
        else:
            most = option_whole("max_workers", max_workers, 0) if max_workers else (os.cpu_count() or 1)
            self.max_workers = max(self.workers, most)
        self._busy = 0.0
        self._grown_at = 0.0
        self.worker_grace = option_seconds("worker_grace", worker_grace)
        version = parse(pcp_version) if pcp_version else installed_pcp_version()
        #: pmdaopenmetrics < 6.1 labels every instance with an optional "instname" (PCP commit 84be2456fe)
        self.instname_label = version < (6, 1, 0)
        self.pcp7 = version >= (7, 0, 0)
        self.debug = 0
        self._level_before_debug = "info"
        self.generation = 0
        self.sources: dict[str, Source] = {}
        self.by_cluster: dict[int, Source] = {}
        self._by_metric: dict[int, tuple[Source, MetricState]] = {}
        self._indoms: dict[int, InDom] = {}
        self._metrics_cache: list[Metric] | None = None
        self._ready = trio.Event()
        self._first_round: set[str] = set()
        self._scope: trio.CancelScope | None = None
        self._limiter: trio.CapacityLimiter | None = None
        self._dirty: dict[int, NameTable] = {}  #: name tables to save (in a worker thread, once a second)
        #: packed-fetch plans by the request's metrics (a sweep of several fetches keeps one each)
        self._plans = PackedPlans()
        #: with workers=0: one worker thread digests documents (more would only fight for the GIL)
        self._cpu = trio.CapacityLimiter(1)
        self._pool: WorkerPool | None = None
        self._scraper: Scraper | None = None
        self._nursery: trio.Nursery | None = None
        self._own_cpu = (time.monotonic(), time.process_time())
        self._round_start: dict[int, float] = {}  #: round -> when its first scrape began
        self._round_done_n: dict[int, int] = {}  #: round -> scrapes of it finished
        self._names_pending = False  #: names changed since ``generation`` was last bumped
        self._swap_lock = trio.Lock()
        self._metas = 0  #: sources whose metadata changed since the last _settle()
        self._settle_due = False
        self._inactive = 0  #: sources known but not scraped now (their config file went)
        self._shape = 0  #: bumped when any metric's instance list changes
        self.clusters_table = NameTable(MAX_CLUSTER)
        self.rounds = 0
        self.restarts = 0  #: times the scraper failed and was started again
        self._started = time.monotonic()
        self._refused: set[str] = set()
        self._too_many: set[str] = set()  #: sources refused for want of a cluster number
        self._refused_items: dict[int, set[int]] = {}
        #: the last metric's instance labels decoded (its image, the labels)
        self._labels_decoded: tuple[bytes, dict[int, dict[str, str]]] = (b"", {})
        self._control()

    def metrics(self) -> Sequence[Metric]:
        if self._metrics_cache is None:
            out = list(self._control_metrics)
            for src in self.by_cluster.values():
                out.extend(src.exported.values())
            self._metrics_cache = out
        return self._metrics_cache

    def indoms(self) -> Sequence[InDom]:
        return [self.c_sources, *self._indoms.values()]

    def clusters(self) -> set[int]:
        return {0, *self.by_cluster}

    # ------------------------------------------------------------ state files
    def _state(self) -> StateFiles:
        return StateFiles(self.state_dir, self.domain)

    @staticmethod
    def _log_state(logs: Iterable[LogEntry]) -> None:
        for entry in logs:
            log.warning(entry.event, **entry.fields)

    async def sync_state(self) -> None:
        """Every changed name table saved now (the workers' too)."""
        self.flush_state()
        if self._scraper is not None:
            self._log_state(self._scraper.flush())
        if self._pool is not None:
            await self._pool.flush()

    def flush_state(self) -> None:
        """Save every changed name table now."""
        images, self._dirty = StateFiles.take(self._dirty.items()), {}
        self._log_state(self._state().write(images))

    async def _saver(self) -> None:
        while True:
            await trio.sleep(1.0)
            images, self._dirty = StateFiles.take(self._dirty.items()), {}
            if images:
                self._log_state(await trio.to_thread.run_sync(self._state().write, images))

    # ------------------------------------------------------------ sources
    def rescan(self) -> list[Source]:
        """Sources in the config directory now (new ones registered)."""
        found = find_sources(self.dir, self.sort)
        current: list[Source] = []
        too_many: list[str] = []
        for f in found:
            name = f.name
            if not valid_source_name(name):
                if name not in self._refused:
                    self._refused.add(name)
                    log.warning("openmetrics_source_refused", file=f.path, reason="unsuitable for the PCP namespace")
                continue
            src = self.sources.get(name)
            if src is None:
                try:
                    cluster = self.clusters_table.lookup(name)
                except ValueError:
                    too_many.append(name)
                    continue
                self._dirty[0] = self.clusters_table
                # the scraper owns the real model (ids, saved tables); this one mirrors its digests
                mirror = SourceModel(name, cluster, NameTable(MAX_METRIC), lambda _s, m: NameTable(m), self.limits)
                src = Source(name, cluster, f.path, f.scripted, mirror)
                self.sources[name] = src
                self.by_cluster[cluster] = src
                self.c_sources.set(self.clusters_table.instances())
                log.info("openmetrics_source", source=name, cluster=cluster, path=f.path)
            current.append(src)
        if set(too_many) != self._too_many:  # one line when the set changes, not one per source per rescan
            self._too_many = set(too_many)
            if too_many:
                log.warning(
                    "openmetrics_source_refused",
                    reason=f"too many sources (at most {MAX_CLUSTER})",
                    sources=len(too_many),
                    first=too_many[:5],
                )
        self._refused.intersection_update(f.name for f in found)  # (one back later is news again)
        return current

    # ------------------------------------------------------------ scraping
    async def startup(self, context: TableContext) -> None:
        self.domain = context.domain
        if context.state_dir and not self._state_dir_given:
            self.state_dir = context.state_dir
        self._refused = set()
        self.clusters_table, problem = self._state().load(0, MAX_CLUSTER)
        if problem is not None:
            self._log_state([problem])
        if self.clusters_table.lookup("control") != 0:
            log.warning("openmetrics_state_odd", detail="cluster 0 is not 'control' in the saved table")
        self._log_state(self._state().save([(0, self.clusters_table)]))
        self.c_sources.set(self.clusters_table.instances())
        self._scope = trio.CancelScope()
        self._started = time.monotonic()
        trio.lowlevel.spawn_system_task(self._run)
        with trio.move_on_after(max(0.0, min(self.deadline, 2.0) - 0.25)):
            await self._ready.wait()

    async def shutdown(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    def _names_changed(self) -> None:
        """The namespace changed: the dispatcher hears of it (``generation``)
        at most every NAMES_EVERY seconds, and not before the first round
        ended: each bump costs it a rebuild of every name (a round of 1 000
        new sources would otherwise cost 1 000 rebuilds)."""
        self._metrics_cache = None
        self._names_pending = True

    def _set_ready(self) -> None:
        if self._names_pending:
            self._names_pending = False
            self.generation += 1
        self._ready.set()
        self._settle()
        self._settle_due = True  # again once the dispatcher has indexed the names

    def _settle(self) -> None:
        """The objects made so far (names, descriptors, indoms: 100 000s of
        them with many sources) live long: take them out of the cyclic
        collector's full passes (``gc.freeze()``), which otherwise walk them
        all, holding the process up for 100s of ms, every so often."""
        self._metas = 0
        gc.freeze()
        trim_malloc()  # (the burst's garbage: the documents, the digests, the index's old copies)

    async def _names_bumper(self) -> None:
        while True:
            await trio.sleep(NAMES_EVERY)
            if self._settle_due:  # (the dispatcher rebuilt its index since: 100 000s of objects too)
                self._settle_due = False
                self._settle()
            if self._names_pending and self._ready.is_set():
                self._names_pending = False
                self.generation += 1
                self._settle_due = True

    def _swap_in(self, src: Source, result: Digest) -> None:
        """A scrape's digest becomes the source's answers (and names)."""
        problems = result.problems
        # (a document's problems are logged when they change, not every scrape: a count in brackets is no change)
        states = [without_details(p) for p in problems]
        if states != src.logged_problems:
            news = [p for p, state in zip(problems, states) if state not in src.logged_problems]
            src.logged_problems = states
            for p in news[: self.limits.max_errors_logged]:
                log.warning("openmetrics_parse", source=src.name, problem=p)
            if len(news) > self.limits.max_errors_logged:
                log.warning("openmetrics_parse", source=src.name, more=len(news) - self.limits.max_errors_logged)
        model = src.model
        changed = result.changed or result.meta is not None
        if result.meta is not None:
            apply_meta(model, result.meta)
        if changed:
            self._metas += 1
            if self._metas >= 100 and not self._ready.is_set():  # (the first round's new names)
                self._settle()
        shape = swap_values(model, result)
        if shape:
            self._shape += 1
        src.version += 1
        self._publish(src, changed)

    def _use_model(self, src: Source, model: SourceModel) -> None:
        """``model`` (the daemon's scraper's) becomes ``src``'s, in place of
        a mirror or of the model of a scraper since restarted: its exported
        metrics are answered from it (one that it does not have goes)."""
        src.model = model
        for item, metric in list(src.exported.items()):
            ms = model.by_item.get(item)
            if ms is None or ms.name != self._by_metric[id(metric)][1].name:
                self._unexport(src, item)
                self._names_changed()
            else:
                self._by_metric[id(metric)] = (src, ms)
        self._shape += 1  # (the packed plans hold the metrics' old states)

    # ------------------------------------------------------------ publishing
    def _publish(self, src: Source, new_instances: bool) -> None:
        """Make the namespace follow what the last document held."""
        present = {m.item: m for m in src.model.metrics.values() if m.cache is not None}
        changed = False
        for item in list(src.exported):
            if item not in present:
                self._unexport(src, item)
                changed = True
        for item, ms in present.items():
            if item not in src.exported:
                metric = self._export(src, ms)
                if metric is not None:
                    changed = True
            elif new_instances and ms.table is not None and ms.indom_serial is not None:
                ind = self._indoms.get(ms.indom_serial)
                if ind is not None and len(ind.instances) != len(ms.table.names):
                    ind.set(ms.table.instances())
        if new_instances:
            for ms in present.values():
                if ms.table is not None and ms.indom_serial in self._indoms:
                    self._indoms[ms.indom_serial].set(ms.table.instances())
        if changed:
            self._names_changed()

    def _export(self, src: Source, ms: MetricState) -> Metric | None:
        ind = None
        try:
            if ms.indom_serial is not None and ms.table is not None:
                ind = InDom(ms.indom_serial, ms.table.instances(), cache=_NO_CACHE)
            m = Metric(
                f"{src.name}.{ms.leaf}",
                cluster=src.cluster,
                item=ms.item,
                type=ms.type,
                sem=ms.sem,
                units=ms.units,
                indom=ind,
                oneline=ms.oneline,
                help=ms.help or ms.oneline,
            )
        except ValueError as err:
            if ms.item not in self._refused_items.setdefault(src.cluster, set()):
                self._refused_items[src.cluster].add(ms.item)
                log.warning("openmetrics_metric_refused", source=src.name, metric=ms.name[:80], error=str(err))
            return None
        if ind is not None:
            ind.domain = self.domain
            self._indoms[ind.serial] = ind
        src.exported[ms.item] = m
        self._by_metric[id(m)] = (src, ms)
        return m

    def _unexport(self, src: Source, item: int) -> None:
        m = src.exported.pop(item)
        self._by_metric.pop(id(m), None)
        if m.indom is not None:
            self._indoms.pop(m.indom.serial, None)

    def _drop_exports(self, src: Source) -> None:
        if src.exported:
            for item in list(src.exported):
                self._unexport(src, item)
            self._names_changed()

    # ------------------------------------------------------------ answering
    async def fetch(self, request: FetchRequest) -> FetchResult:
        if not self._ready.is_set():
            raise PmdaNotReady()
        if len(request.metrics) > 16:  # worth the one-piece answer
            whole = self._fetch_packed(request.metrics)
            if whole is not None:
                return whole
        out: dict[Metric, ControlValue | PmdaError | Value | Columns] = {}
        stale_after = self._stale_after()
        now = time.monotonic()
        by_metric = self._by_metric
        for m in request.metrics:
            found = by_metric.get(id(m))
            if found is None:
                out[m] = self._control_value(m)
                continue
            src, ms = found
            cached = ms.cache
            if cached is None or now - src.last_good > stale_after:
                out[m] = PmdaError(code=PmErr.AGAIN)
            elif m.indom is None:
                out[m] = cached.values[0]
            else:
                out[m] = Columns(cached.insts, cached.values)
        return out

    def _stale_after(self) -> float:
        """A source's last good parse is served this long (then PM_ERR_AGAIN)."""
        return 2 * self.interval + self.timeout

    def _fetch_packed(self, metrics: tuple[Metric, ...]) -> PackedFetch | None:
        """Every value in one big-endian blob (the dispatcher's fast path), when
        every metric asked for is a source's numeric metric with fresh values.
        The blob is joined again only when one of its sources was scraped since."""
        now, stale_after = time.monotonic(), self._stale_after()
        return self._plans.answer(
            metrics, (self._shape, self.generation), self._by_metric, lambda src: now - src.last_good <= stale_after
        )

    def _instance_labels(self, ms: MetricState, inst: int) -> Mapping[str, str]:
        """The labels of instance ``inst`` of ``ms``: a mirror's decoded once
        for a run of requests about the same metric (as a client asks for
        each of its instances in turn)."""
        if ms.inst_labels is not UNUSED:  # (a model's own: the daemon's scraper's)
            return pairs_dict(ms.inst_labels.get(inst, ()))
        packed, decoded = self._labels_decoded
        if packed is not ms.packed_labels:
            decoded = instance_labels(ms)
            self._labels_decoded = (ms.packed_labels, decoded)
        return decoded.get(inst, {})

    def label_items(self, level: int, subject: object) -> list[tuple[str, str, int]] | None:
        # (no thread writes a model: a large document is parsed in one, ingested on the loop)
        if level == _L_CLUSTER:
            src = self.by_cluster.get(subject) if isinstance(subject, int) else None
            return label_items(src.cluster_labels(), _L_CLUSTER) if src is not None else []
        if level == _L_ITEM:
            found = self._by_metric.get(id(subject))
            if found is None:
                return []
            ms = found[1]
            items = label_items(ms.item_labels(), _L_ITEM)  # a PM_INDOM_NULL metric keeps its labels here
            if ms.optional:
                items += label_items(ms.optional, _L_ITEM | _L_OPTIONAL)
            return items
        if level == _L_INDOM:
            if subject is self.c_sources or not isinstance(subject, InDom):
                return []
            src = self.by_cluster.get((subject.serial - MAX_CLUSTER - 1) // (MAX_METRIC + 1))
            return label_items({"source": src.name}, _L_INDOM) if src is not None else []
        if level == _L_INSTANCES:
            if not isinstance(subject, tuple):
                return []
            ind, inst = subject
            if ind is self.c_sources or not isinstance(ind, InDom) or not isinstance(inst, int):
                return []
            c, item = divmod(ind.serial - MAX_CLUSTER - 1, MAX_METRIC + 1)
            src = self.by_cluster.get(c)
            found_ms = src.model.by_item.get(item) if src is not None else None
            if found_ms is None or found_ms.table is None or not found_ms.table.is_live(inst):
                return []  # (unknown, or reclaimed)
            ms = found_ms
            assert ms.table is not None
            items = label_items(self._instance_labels(ms, inst), _L_INSTANCES, skip="instname")
            if self.instname_label:
                name = label_items({"n": f"{inst} {ms.table.names[inst]}"}, 0)[0][1]
                items.append(("instname", name, _L_INSTANCES | _L_OPTIONAL))
            return items
        return None
