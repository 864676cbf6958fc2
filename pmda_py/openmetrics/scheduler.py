"""The OpenMetrics table's scraping: every source on its own timer, a
deadline per scrape, a cap on scrapes at once, the work done by a
:class:`~.scrape.Scraper` in the daemon (whose models are the daemon's own)
or by worker processes (:class:`~.pool.WorkerPool`): with no workers at
first, the pool starts when a round overruns the interval while the daemon
was busy, and the sources move to it one by one, at their next scrape; a
scraper that fails is restarted; rounds are timed and logged."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
import trio

from pmda_py.openmetrics.decode import printable
from pmda_py.openmetrics.digest import as_mirror
from pmda_py.openmetrics.exposition import Limits, Parsed
from pmda_py.openmetrics.model import SourceConfig, SourceModel
from pmda_py.openmetrics.pool import WorkerFailed, WorkerPool
from pmda_py.openmetrics.records import Digest, LogEntry, LogValue
from pmda_py.openmetrics.scrape import Scraper, WorkerOptions
from pmda_py.openmetrics.sources import Source

__all__ = ["BUSY_SHARE", "WORKER_NICE", "Scheduling", "should_grow", "without_details"]

#: a status's or a problem's details in brackets, left out of what says whether its state changed
_DETAILS = re.compile(r" \([^()]*\)")
#: where in the document a problem is (``line N: ``, ``sample N: ``): left out the same way
_POSITION = re.compile(r"^(?:line|sample) \d+: ")


def without_details(text: str) -> str:
    """``text`` (a status, a problem) without its details in brackets (a
    count, a size) and its position in the document (a line or sample
    number), which may change every scrape without being news: an exporter
    whose bad line moves down as its document grows is logged once."""
    return _POSITION.sub("", _DETAILS.sub("", text))


log = structlog.get_logger("pmda_py.openmetrics")

WORKER_NICE = 5  #: the workers' nice(2) increment: on a busy machine the daemon's fetches go first
#: a round slower than the interval adds a worker (up to the limit) when the busiest worker was
#: on the CPU this share of the last interval: more workers help where the CPU is what is short,
#: not where sources are slow to answer
BUSY_SHARE = 0.5


def should_grow(round_began: float, grown_at: float, busy: float, size: int, limit: int) -> bool:
    """Whether a round that overran its interval adds a worker: one more
    is allowed, the workers were busy, and the round began after the last
    growth (a round that began before it says nothing of the bigger pool)."""
    return size < limit and busy >= BUSY_SHARE and round_began >= grown_at


def _describe(exc: BaseException) -> str:
    """``Type: text`` of the first leaf of an exception (group), bounded."""
    while True:
        leaves: list[BaseException] | None = getattr(exc, "exceptions", None)
        if not leaves:
            break
        exc = leaves[0]
    return f"{type(exc).__name__}: {str(exc)[:200]}"


class Scheduling:
    """The scraping part of :class:`~.table.OpenMetricsTable` (the table
    holds the state; this is what runs in its system task)."""

    dir: str
    sources: dict[str, Source]
    interval: float
    timeout: float
    workers: int
    max_workers: int
    worker_grace: float
    state_dir: str
    domain: int
    limits: Limits
    concurrency: int
    rounds: int
    restarts: int
    _scope: trio.CancelScope | None
    _pool: WorkerPool | None
    _scraper: Scraper | None
    _cpu: trio.CapacityLimiter
    _limiter: trio.CapacityLimiter | None
    _round_start: dict[int, float]
    _round_done_n: dict[int, int]
    _inactive: int
    _first_round: set[str]
    _ready: trio.Event
    _started: float
    _swap_lock: trio.Lock
    _busy: float  #: the busiest scraper's (worker's, or the daemon's) share of the CPU over the last interval
    _grown_at: float  #: when the pool last grew
    _nursery: trio.Nursery | None  #: the scrapers' (where a pool starts)
    _own_cpu: tuple[float, float]  #: (when, the daemon's CPU seconds then)

    if TYPE_CHECKING:  # (the table's own)

        def rescan(self) -> list[Source]: ...
        def flush_state(self) -> None: ...
        def _drop_exports(self, src: Source) -> None: ...
        def _set_ready(self) -> None: ...
        def _swap_in(self, src: Source, result: Digest) -> None: ...
        def _use_model(self, src: Source, model: SourceModel) -> None: ...
        def _log_state(self, logs: list[LogEntry]) -> None: ...
        async def _saver(self) -> None: ...
        async def _names_bumper(self) -> None: ...

    async def _run(self) -> None:
        """Scrape until shut down; a scraper that fails (a bug, a worker
        that cannot be handled) is logged, every source's status says so,
        and it is started again (after 1 s, doubling to 30 s while it keeps failing)."""
        assert self._scope is not None
        backoff = 1.0
        with self._scope:
            while True:
                t0 = time.monotonic()
                error = await self._run_once()
                if error is None:
                    return
                for src in self.sources.values():
                    src.scope = None  # (its loop ended with the scraper's nursery)
                    self._status(src, f"scraper failed ({error}): restarting in {backoff:g} s", 0)
                self._round_start.clear()
                self._round_done_n.clear()
                self._inactive = 0
                self._pool = None
                if time.monotonic() - t0 > 60:  # (it ran a good while: start over quickly)
                    backoff = 1.0
                await trio.sleep(backoff)
                backoff = min(30.0, 2 * backoff)
                self.restarts += 1

    async def _run_once(self) -> str | None:
        """One life of the scraper; what failed, or None when cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.workers:
                    pool = self._new_pool(self.workers)
                    await nursery.start(pool.run)
                    self._pool = pool
                else:
                    scraper = Scraper(
                        self.state_dir,
                        self.domain,
                        self.limits,
                        self.timeout,
                        self._keepalive(),
                        self._in_thread,
                        local=True,
                    )
                    scraper.defer_saves = True
                    self._scraper = scraper
                    nursery.start_soon(self._keep_saved, scraper)
                await self._loop()
        except Exception as exc:  # never take the daemon down
            error = _describe(exc)
            log.exception("openmetrics_scraper_failed", error=error)
            self._set_ready()
            return error
        finally:
            self._nursery = None
            self.flush_state()
            if self._scraper is not None:
                self._log_state(self._scraper.flush())  # (its tables not saved yet: keep every id)
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await self._scraper.aclose()
                self._scraper = None
        return None

    def _new_pool(self, size: int) -> WorkerPool:
        options = WorkerOptions(
            state_dir=self.state_dir,
            domain=self.domain,
            timeout=self.timeout,
            keepalive=self._keepalive(),
            limits=self.limits,
            nice=WORKER_NICE,
        )
        return WorkerPool(size, options, self._pool_log, limit=self.max_workers)

    async def _keep_saved(self, scraper: Scraper) -> None:
        """The daemon's scraper saves its name tables in the background
        while it has sources (:meth:`Scraper.keep_saved`)."""

        async def news(logs: list[LogEntry]) -> None:
            self._log_state(logs)

        with trio.CancelScope() as scraper.saving:
            await scraper.keep_saved(news)

    def _own_share(self) -> float:
        """The share of its time the daemon spent on the CPU since the last call."""
        now, used = time.monotonic(), time.process_time()
        then, self._own_cpu = self._own_cpu, (now, used)
        return (used - then[1]) / (now - then[0]) if now > then[0] else 0.0

    def _keepalive(self) -> float:
        """How long a source's idle connection is kept: over the interval."""
        return self.interval + self.timeout + 5.0

    async def _in_thread(self, fn: Callable[[], Parsed]) -> Parsed:
        return await trio.to_thread.run_sync(fn, limiter=self._cpu)

    @staticmethod
    def _pool_log(event: str, **fields: LogValue) -> None:
        log.error(event, **fields)

    async def _loop(self) -> None:
        self._limiter = trio.CapacityLimiter(self.concurrency)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._saver)
            nursery.start_soon(self._names_bumper)
            first = True
            while True:
                try:
                    current = self.rescan()
                except OSError as err:
                    log.warning("openmetrics_config_unreadable", dir=self.dir, error=str(err))
                    current = list(self.sources.values())
                names = {s.name for s in current}
                for src in list(self.sources.values()):
                    if src.name not in names and src.scope is not None:  # config file gone
                        src.scope.cancel()
                        src.scope = None
                        self._inactive += 1
                        self._drop_exports(src)
                        await self._forget(src)
                        self._first_round_done(src)  # (its first scrape cancelled: the round ends without it)
                for src in current:
                    if src.scope is None:
                        if src.scrapes:  # (a source back after its config file went)
                            self._inactive -= 1
                        if first:
                            self._first_round.add(src.name)
                        src.scope = trio.CancelScope()
                        nursery.start_soon(self._source_loop, src, src.scope)
                if first:
                    first = False
                    if not self._first_round:
                        self._set_ready()
                if self._pool is not None:
                    self._busy = self._pool.busy_share()
                else:
                    self._busy = self._own_share()
                await trio.sleep(self.interval)

    async def _forget(self, src: Source) -> None:
        if self._scraper is not None and src.name in self._scraper.sources:
            await self._scraper.forget(src.name)
        elif self._pool is not None:
            await self._pool.forget(src.cluster, src.name)

    def _first_round_done(self, src: Source) -> None:
        """``src`` is out of the first round (scraped, or gone): the agent is
        ready when no source is left in it."""
        if src.name in self._first_round:
            self._first_round.discard(src.name)
            if not self._first_round and not self._ready.is_set():
                self.rounds += 1
                log.info(
                    "openmetrics_ready",
                    sources=len(self.sources),
                    first_round_s=round(time.monotonic() - self._started, 3),
                )
                self._set_ready()

    def _round_done(self, src: Source) -> None:
        self._first_round_done(src)
        # a round: the n-th scrape of every source, from the first one's start to the last one's end
        k = src.scrapes
        done = self._round_done_n[k] = self._round_done_n.get(k, 0) + 1
        if done >= len(self.sources) - self._inactive and k in self._round_start:
            began = self._round_start.pop(k)
            seconds = round(time.monotonic() - began, 3)
            del self._round_done_n[k]
            for old in [r for r in self._round_start if r < k]:  # rounds a vanished source never finished
                self._round_start.pop(old)
                self._round_done_n.pop(old, None)
            if seconds > self.interval:
                log.warning("openmetrics_round_slow", round=k, sources=done, seconds=seconds, interval=self.interval)
                if k > 1 or self._pool is not None:  # (the daemon's first round makes every name: no measure)
                    self._grow(began)
            elif k <= 3:  # the first rounds are news; later ones only when slow
                log.info("openmetrics_round", round=k, sources=done, seconds=seconds)

    def _grow(self, round_began: float) -> None:
        """A round overran its interval: one more worker if they (or the
        daemon, scraping with none) were busy (see :func:`should_grow`); a
        pool started again keeps the size."""
        pool = self._pool
        if pool is None:
            if self._nursery is None or not should_grow(round_began, self._grown_at, self._busy, 0, self.max_workers):
                return
            self._grown_at = time.monotonic()
            self._nursery.start_soon(self._start_pool)
            return
        if not should_grow(round_began, self._grown_at, self._busy, pool.size, pool.limit):
            return
        pool.grow()
        self.workers = pool.size
        self._grown_at = time.monotonic()
        log.warning("openmetrics_workers_added", workers=pool.size, limit=pool.limit, busy=round(self._busy, 2))

    async def _start_pool(self) -> None:
        """The first worker: the sources scraped in the daemon move to it,
        each at its next scrape (the daemon's scraper goes with the last)."""
        if self._pool is not None or self._nursery is None:
            return
        pool = self._new_pool(1)
        await self._nursery.start(pool.run)
        self._pool = pool
        self.workers = pool.size
        log.warning("openmetrics_workers_added", workers=pool.size, limit=pool.limit, busy=round(self._busy, 2))

    async def _move_to_pool(self, src: Source) -> dict[int, bytes]:
        """Source ``src`` leaves the daemon's scraper (for the pool): its name
        tables not saved yet, for the worker; its model becomes a mirror."""
        scraper = self._scraper
        if scraper is None or src.name not in scraper.sources:
            return {}
        tables = await scraper.hand_over(src.name)
        as_mirror(src.model)
        if not scraper.sources:  # (the last one: the daemon scrapes no more)
            self._scraper = None
            scraper.saving.cancel()
            self._log_state(scraper.flush())
            await scraper.aclose()
        return tables

    async def _source_loop(self, src: Source, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                t0 = trio.current_time()
                src.scrapes += 1
                self._round_start.setdefault(src.scrapes, time.monotonic())
                try:
                    await self.scrape(src)
                except Exception as exc:  # a bug for one source stays with that source
                    log.exception("openmetrics_scrape_bug", source=src.name, error=f"{type(exc).__name__}: {exc}")
                self._round_done(src)
                await trio.sleep_until(t0 + self.interval)

    async def scrape(self, src: Source) -> None:
        """One scrape of ``src`` (by its worker, or here): fetch under the
        deadline, parse, then swap the digest in and publish."""
        assert self._limiter is not None
        async with self._limiter:
            src.calls += 1
            try:
                if self._pool is not None:
                    deadline = self.timeout + self.worker_grace
                    tables = await self._move_to_pool(src)
                    reply = await self._pool.scrape(src.name, src.cluster, src.path, src.scripted, deadline, tables)
                else:
                    scraper = self._scraper
                    assert scraper is not None
                    reply = await scraper.scrape(src.name, src.cluster, src.path, src.scripted)
                    model = scraper.model_of(src.name)
                    if model is not None and model is not src.model:  # (one model: the scraper's)
                        self._use_model(src, model)
            except WorkerFailed as err:
                self._status(src, f"failed to fetch URL or execute script {src.path}: {err}", 0)
                return
        if reply.url is not None:
            src.config = SourceConfig(url=reply.url)
        for entry in reply.logs:
            log.warning(entry.event, source=src.name, **entry.fields)
        result = reply.digest
        if reply.outcome != "ok" or result is None:
            self._status(src, reply.status, reply.code)
            return
        src.fetch_ms += reply.fetch_ms
        src.parse_ms += reply.parse_ms
        # One swap per trip through trio's scheduler: the replies of a round come in bursts, and
        # a hundred swaps run back to back would hold up a fetch that arrived meanwhile.
        async with self._swap_lock:
            self._swap_in(src, result)
            src.last_good = time.monotonic()
            self._status(src, "success", reply.code)
            await trio.lowlevel.checkpoint()  # (holding the lock: the next swap waits for the next batch)

    def _status(self, src: Source, status: str, code: int) -> None:
        src.status, src.status_code = status, code
        # A change of state is logged once, not every scrape; a status's
        # details in brackets (a Content-Length, bytes on stderr) may change
        # every scrape without being one.
        state = without_details(status)
        if state != src.logged_status:
            src.logged_status = state
            if status == "success":
                log.info("openmetrics_source_ok", source=src.name)
            else:
                log.warning("openmetrics_source_failed", source=src.name, status=printable(status, 300), code=code)
