"""Scraping OpenMetrics sources: fetch (HTTP, ``file://``, script), digest
(:mod:`pmda_py.openmetrics.digest`) and save the name tables.

A :class:`Scraper` owns its sources' models.  The OpenMetrics table runs
one in each of a few worker processes (``python -m
pmda_py.openmetrics.scrape``, a source always on the same one) so
that HTTP, parsing and id assignment never hold the daemon's GIL or its
trio loop; the daemon gets a :class:`~.records.Reply` per scrape.  With
``workers=0`` the table runs a Scraper in its own process instead (the
digest in a worker thread).

The pipe protocol is :mod:`pmda_py.openmetrics.records`: requests
(scrape, forget, flush) in, answers out; answer 0 is news of the worker's
own (its logs), the first one when it is up.  A worker ends at EOF on its
stdin.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import attrs
import trio

from pmda_py.malloc import trim_malloc
from pmda_py.openmetrics.decode import ACCEPT_ENCODING, BodyDecoder
from pmda_py.openmetrics.digest import digest
from pmda_py.openmetrics.exposition import Limits, Parsed, parse_document
from pmda_py.openmetrics.model import (
    MAX_METRIC,
    NameTable,
    SourceConfig,
    SourceModel,
    parse_url_config,
)
from pmda_py.openmetrics.procs import run_script
from pmda_py.openmetrics.records import (
    Answer,
    Digest,
    Flush,
    Forget,
    LogEntry,
    Reply,
    ScrapeJob,
    decode_request,
    encode_answer,
    frame_limit,
    read_frames,
)
from pmda_py.openmetrics.state import StateFiles
from pmda_py.safefile import read_regular

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = ["Scraper", "worker_main"]

#: runs the parse of a large document (pure: it touches no model) and returns it
RunCpu = Callable[[Callable[[], Parsed]], Awaitable[Parsed]]


class TooBig(Exception):
    pass


def redacted(url: str) -> str:
    """``url`` with its credentials (``user:password@``) replaced by
    ``***@``: what a status metric (readable by every PCP client) and the
    log may show of it."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return url
    return f"{scheme}://***@{authority.rpartition('@')[2]}{slash}{path}"


class HttpStatus(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


_SCHEMES = ("http://", "https://", "file://")
#: the largest ``.url`` config file read: a larger one is refused whole (its source fails with the reason)
URL_CONFIG_MAX = 1024 * 1024


#: a worker saves its changed name tables when no scrape has been in flight for this long
#: (after the burst of a round) ...
_IDLE_FLUSH = 1.0
#: ... or when the oldest change is this old; FLUSH_CHUNK every _FLUSH_TICK seconds (a file costs
#: 0.2-0.5 ms of kernel time: a start-up's 20 000 new ones at once would slow the first round down)
_MAX_FLUSH_DELAY = 30.0
_FLUSH_TICK = 0.1
FLUSH_CHUNK = 50
#: documents up to this size are parsed on the trio loop, larger ones by ``run_cpu``
INLINE_BYTES = 64 * 1024


@attrs.define
class _Busy:
    """Scrapes in flight, and since when there were none."""

    n: int = 0
    since: float = attrs.field(factory=time.monotonic)
    untrimmed: bool = False  #: scrapes ran since the heap was last trimmed


@attrs.define(eq=False)
class _Src:
    model: SourceModel
    config: SourceConfig = attrs.field(factory=SourceConfig)
    ctime: float = -1.0
    client: httpx.AsyncClient | None = None
    sent_meta: bool = False
    logs: list[LogEntry] = attrs.field(factory=list)  #: the current scrape's


class Scraper:
    """The scraping side of the OpenMetrics table for some sources.

    ``run_cpu(fn)`` parses a document over ``inline_bytes`` (in the
    daemon: in a thread; parsing touches no model) and returns the parse;
    a smaller one is parsed at once.  Every document is ingested into its
    source's model on the loop, one per turn of it.  ``local``: it runs in the
    daemon, which reads each source's model itself (:meth:`model_of`), so
    no digest describes the metadata.
    """

    def __init__(
        self,
        state_dir: str,
        domain: int,
        limits: Limits,
        timeout: float,
        keepalive: float = 60.0,
        run_cpu: RunCpu | None = None,
        local: bool = False,
    ) -> None:
        self.state = StateFiles(state_dir, domain)
        self.limits = limits
        self.timeout = timeout
        self.keepalive = keepalive
        self.run_cpu = run_cpu or _inline
        self.local = local
        #: documents up to this size are digested on the loop (a few ms: a thread's hand-off,
        #: and its fight for the GIL with the loop, would cost more)
        self.inline_bytes = INLINE_BYTES
        #: one digest on the loop per turn of it: a round's replies arrive together, and
        #: digested in one turn they would hold a pmcd request back behind all of them
        self.turn = trio.Lock()
        self.sources: dict[str, _Src] = {}
        self.busy = _Busy()
        self.saving = trio.CancelScope()  #: :meth:`keep_saved`'s, where its caller wants it ended
        #: a worker process saves changed name tables when it is idle (a file costs ~0.2 ms of kernel
        #: time: 20 000 of them would slow the first round down), else at once
        self.defer_saves = False
        self.dirty: dict[int, NameTable] = {}
        self.dirty_since = 0.0
        #: one :meth:`save` writes at a time (in its order: an older image of a table never lands last)
        self._writing = trio.Lock()
        self._in_flight: set[int] = set()  #: tables being written (their images taken)
        self._ssl: ssl.SSLContext | None = None
        #: name tables handed over with the sources moved here, not read yet (serial -> image)
        self.adopted: dict[int, bytes] = {}

    def load_table(self, serial: int, maxnum: int, logs: list[LogEntry]) -> NameTable:
        unsaved = self.dirty.get(serial)
        if unsaved is not None:  # (a source forgotten and back before its tables were saved)
            return unsaved
        image = self.adopted.pop(serial, None)
        if image is not None:  # (from the worker the source left, which had not saved it: this one will)
            try:
                table = NameTable.loads(image, maxnum)
            except ValueError as err:
                logs.append(LogEntry("openmetrics_state_unreadable", {"file": "(handed over)", "error": str(err)}))
            else:
                table.dirty = True
                self._changed([(serial, table)])
                return table
        table, problem = self.state.load(serial, maxnum)
        if problem is not None:
            logs.append(problem)
        return table

    def _source(self, name: str, cluster: int) -> _Src:
        src = self.sources.get(name)
        if src is None or src.model.cluster != cluster:
            logs: list[LogEntry] = []
            items = self.load_table(cluster, MAX_METRIC, logs)

            def load(serial: int, maxnum: int) -> NameTable:
                return self.load_table(serial, maxnum, logs)

            src = self.sources[name] = _Src(SourceModel(name, cluster, items, load, self.limits), logs=logs)
        return src

    def model_of(self, name: str) -> SourceModel | None:
        """The model of source ``name`` (None: not scraped here)."""
        src = self.sources.get(name)
        return None if src is None else src.model

    async def forget(self, name: str) -> None:
        src = self.sources.pop(name, None)
        if src is not None:
            await _close(src)

    async def hand_over(self, name: str) -> dict[int, bytes]:
        """Forget source ``name`` (another worker takes it over): the images
        of its name tables not saved yet, for the other one, which saves
        them (writing them here first, each file synced to disk, held
        every hand-over up by tens of ms and the moving sources' values
        went stale for rounds)."""
        src = self.sources.pop(name, None)
        if src is None:
            return {}
        serials = [src.model.cluster, *(m.indom_serial for m in src.model.metrics.values())]
        tables = [(k, self.dirty.pop(k)) for k in serials if k is not None and k in self.dirty]
        images = dict(StateFiles.take(tables))
        if self._in_flight.intersection(serials):  # (its files are being written: there before the other reads)
            async with self._writing:
                pass
        await _close(src)
        return images

    def adopt(self, tables: dict[int, bytes]) -> None:
        """Name tables handed over with a source moved here (read before the files)."""
        self.adopted.update(tables)

    def _changed(self, tables: list[tuple[int, NameTable]]) -> None:
        if self.defer_saves:
            if tables and not self.dirty:
                self.dirty_since = time.monotonic()
            self.dirty.update(tables)

    async def save(self, tables: list[tuple[int, NameTable]]) -> list[LogEntry]:
        """Save ``tables`` (their images taken now) in a thread, one save
        at a time: the scrapes go on meanwhile.  Each file is synced to disk,
        milliseconds of waiting each: the 20 000 a first round of 1 000
        sources x 100 metrics leaves, saved on the trio loop, held a
        worker's scrapes up for a minute.  A table that could not be
        written stays changed (as with :meth:`StateFiles.save`)."""
        images = StateFiles.take(tables)
        if not images:
            return []
        try:
            async with self._writing:
                self._in_flight = {serial for serial, _ in images}
                try:
                    logs, failed = await trio.to_thread.run_sync(_write_each, self.state, images)
                finally:
                    self._in_flight = set()
        except BaseException:  # (cancelled before its turn: the worker's last flush saves them)
            for serial, table in tables:
                table.dirty = True
                self.dirty.setdefault(serial, table)
            raise
        by_serial = dict(tables)
        for serial in failed:
            by_serial[serial].dirty = True
        return logs

    async def flush_later(self, most: int | None = None) -> list[LogEntry]:
        """:meth:`flush` by :meth:`save` (in a thread), the tables handed
        over that no metric here has read yet included when ``most`` is None."""
        logs = await self.save(self._take_dirty(most))
        if most is None and self.adopted:
            # (kept in ``adopted`` while written: a scrape reading one meanwhile gets the image, not the old file)
            adopted = list(self.adopted.items())
            written, failed = await trio.to_thread.run_sync(_write_each, self.state, adopted)
            logs += written
            for serial, image in adopted:
                if serial not in failed and self.adopted.get(serial) is image:
                    del self.adopted[serial]
        return logs

    async def aclose(self) -> None:
        for src in self.sources.values():
            await _close(src)

    async def scrape(self, name: str, cluster: int, path: str, scripted: bool) -> Reply:
        """One scrape of a source: fetch under the deadline, digest, save."""
        busy = self.busy
        busy.n += 1
        busy.untrimmed = True
        try:
            return await self._scrape(name, cluster, path, scripted)
        finally:
            busy.n -= 1
            if not busy.n:
                busy.since = time.monotonic()

    async def _scrape(self, name: str, cluster: int, path: str, scripted: bool) -> Reply:
        src = self._source(name, cluster)
        logs = list(src.logs)  # (a table unreadable when the source was set up)
        src.logs.clear()
        url = None
        t0 = time.monotonic()
        try:
            st = os.stat(path)
            if scripted:
                if not st.st_mode & stat.S_IXUSR:
                    raise OSError(f"cannot execute '{path}'")
            elif src.ctime < st.st_ctime:
                src.config = parse_url_config(read_regular(path, URL_CONFIG_MAX, whole=True).decode("utf-8", "replace"))
                src.ctime = st.st_ctime
                for p in src.config.problems:
                    logs.append(LogEntry("openmetrics_config", {"problem": p}))
                if not src.config.url.startswith(_SCHEMES):  # (never quoted: the file may hold anything)
                    src.config.url = ""
                    logs.append(LogEntry("openmetrics_config", {"problem": "line 1: not an http, https or file URL"}))
                url = src.config.url
            if not scripted and not src.config.url:
                return Reply.fail(f"{path}: no http, https or file URL on its first line", url=url, logs=logs)
            if not scripted and src.config.unsendable and src.config.url.startswith(("http://", "https://")):
                return Reply.fail(f"{path}: {src.config.unsendable}", url=url, logs=logs)
        except OSError as err:
            return Reply.fail(f"cannot read {path}: {err.strerror or type(err).__name__}", url=url, logs=logs)
        code = 0
        if not scripted and src.config.url.startswith(("http://", "https://")):
            self._client(src)  # (its one-time set-up is not the source's time)
        try:
            with trio.fail_after(self.timeout):
                body, code = await self._get(src, path, scripted)
        except trio.TooSlowError:
            status = f"failed to fetch URL or execute script {path}: timed out after {self.timeout:g} s"
            if scripted:
                status += " (its process group killed)"
            return Reply.fail(status, code, url, logs)
        except Exception as err:
            code = err.code if isinstance(err, HttpStatus) else code
            why = str(err)
            if url and url in why:  # (an HTTP library's text may quote the URL, credentials and all)
                why = why.replace(url, redacted(url))
            return Reply.fail(f"failed to fetch URL or execute script {path}: {why}", code, url, logs)
        fetch_ms = int(1000 * (time.monotonic() - t0))
        t1 = time.monotonic()
        with_meta = not src.sent_meta
        text: str | Parsed
        if len(body) > self.inline_bytes:  # decoded and parsed by run_cpu (the daemon: in a thread), ingested here
            text = await self.run_cpu(lambda: parse_document(body.decode("utf-8", "replace"), self.limits))
        else:
            text = body.decode("utf-8", "replace")
        async with self.turn:  # (its acquiring yields: the digest starts a turn of the loop)
            result = self._digest(src, text, with_meta)
        src.sent_meta = True
        logs += src.logs
        src.logs.clear()
        return Reply(
            "ok",
            code=code,
            fetch_ms=fetch_ms,
            parse_ms=int(1000 * (time.monotonic() - t1)),
            url=url,
            logs=logs,
            digest=result,
        )

    def _digest(self, src: _Src, text: str | Parsed, with_meta: bool) -> Digest:
        out, dirty = digest(src.model, src.config, text, self.limits, with_meta, describe=not self.local)
        if self.defer_saves:
            self._changed(dirty)
        else:
            src.logs += self.state.save(dirty)
        return out

    def flush(self, most: int | None = None) -> list[LogEntry]:
        """Save the name tables changed since the last flush (deferred
        saves), or at most ``most`` of them."""
        logs = self.state.save(self._take_dirty(most))
        if most is None:  # (tables handed over with a source whose metrics using them are gone)
            adopted, self.adopted = list(self.adopted.items()), {}
            logs += self.state.write(adopted)
        return logs

    def _take_dirty(self, most: int | None) -> list[tuple[int, NameTable]]:
        if most is None or most >= len(self.dirty):
            tables, self.dirty = list(self.dirty.items()), {}
            return tables
        return [(k, self.dirty.pop(k)) for k in list(self.dirty)[:most]]

    async def keep_saved(self, news: Callable[[list[LogEntry]], Awaitable[None]]) -> None:
        """Save the changed name tables in the background (until cancelled):
        FLUSH_CHUNK of them every _FLUSH_TICK seconds once no scrape has been
        in flight for _IDLE_FLUSH seconds (after the burst of a round) or
        the oldest change is _MAX_FLUSH_DELAY seconds old; the C heap's
        free pages go back to the system when it is idle after a burst.
        ``news(logs)``: what could not be saved."""
        busy = self.busy
        while True:
            await trio.sleep(_FLUSH_TICK)
            now = time.monotonic()
            if busy.untrimmed and not busy.n and now - busy.since >= _IDLE_FLUSH:
                busy.untrimmed = False  # idle after a burst of scrapes: its garbage back to the system
                trim_malloc()
            if self.dirty and (
                (not busy.n and now - busy.since >= _IDLE_FLUSH) or now - self.dirty_since > _MAX_FLUSH_DELAY
            ):
                logs = await self.flush_later(FLUSH_CHUNK)
                if logs:
                    await news(logs)

    def warm_up(self) -> None:
        """The HTTP side's one-time set-up: imports and the TLS context,
        ~0.1 s of CPU, which a niced worker on a busy host may take over a
        second to get.  A worker does it before it says it is up, and a
        scrape before its deadline starts: it is nobody's time-out."""
        if self._ssl is None:
            import ssl

            import httpx

            self._ssl = ssl.create_default_context()  # one for every source's client
            httpx.AsyncClient(verify=self._ssl, trust_env=False)  # (what a client imports; it opens nothing)

    def _client(self, src: _Src) -> httpx.AsyncClient:
        if src.client is None:
            self.warm_up()
            import httpx

            # a client per source: keep-alive to its host (kept over the interval between scrapes), and no
            # shared pool to search (httpcore's pool scans every connection for every request); the global
            # cap is the table's CapacityLimiter
            one = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=self.keepalive)
            assert self._ssl is not None
            src.client = httpx.AsyncClient(verify=self._ssl, follow_redirects=True, trust_env=False, limits=one)
        return src.client

    async def _get(self, src: _Src, path: str, scripted: bool) -> tuple[bytes, int]:
        limit = self.limits.max_bytes
        if scripted:
            return await run_script(path, limit), 0
        url = src.config.url
        if url.startswith("file://"):
            data = read_regular(url[7:], limit + 1)
            if len(data) > limit:
                raise TooBig(f"document larger than {limit} bytes")
            return data, 0
        client = self._client(src)
        headers = {"Accept-Encoding": ACCEPT_ENCODING, **src.config.headers}
        async with client.stream("GET", url, headers=headers, timeout=self.timeout) as r:
            code = int(r.status_code)
            if code >= 400:
                kind = "Client" if code < 500 else "Server"  # requests' raise_for_status() text
                raise HttpStatus(code, f"{code} {kind} Error: {r.reason_phrase} for url: {redacted(url)}")
            size = int(r.headers.get("content-length") or 0)
            if size > limit:
                raise TooBig(f"document larger than {limit} bytes (Content-Length {size})")
            # decoded here, under the cap, as it comes (the client would inflate a whole chunk at once)
            decoder = BodyDecoder(r.headers.get("content-encoding"), limit)
            raw = 0
            async for chunk in r.aiter_raw():
                raw += len(chunk)
                if raw > limit:
                    raise TooBig(f"document larger than {limit} bytes")
                decoder.feed(chunk)
                await trio.lowlevel.checkpoint()
            return decoder.finish(), code


async def _inline(fn: Callable[[], Parsed]) -> Parsed:
    return fn()


def _write_each(state: StateFiles, images: list[tuple[int, bytes]]) -> tuple[list[LogEntry], list[int]]:
    """Write table images (in a thread): the logs, and the serials not written."""
    logs: list[LogEntry] = []
    failed: list[int] = []
    for serial, image in images:
        problems = state.write([(serial, image)])
        if problems:
            logs += problems
            failed.append(serial)
    return logs, failed


async def _close(src: _Src) -> None:
    client, src.client = src.client, None
    if client is not None:
        try:
            await client.aclose()
        except Exception:
            pass


@attrs.frozen
class WorkerOptions:
    """What a worker process is told on its command line (as JSON)."""

    state_dir: str
    domain: int
    timeout: float
    keepalive: float
    limits: Limits = attrs.field(factory=Limits)
    nice: int = 0

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerOptions:
        d = json.loads(text)
        return cls(
            state_dir=str(d["state_dir"]),
            domain=int(d["domain"]),
            timeout=float(d["timeout"]),
            keepalive=float(d["keepalive"]),
            limits=Limits(**d.get("limits", {})),
            nice=int(d.get("nice", 0)),
        )


async def _serve(
    options: WorkerOptions,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
) -> None:
    """A worker's life: requests from ``stdin`` (default: fd 0), answers
    to ``stdout`` (default: fd 1), until EOF."""
    scraper = Scraper(options.state_dir, options.domain, options.limits, options.timeout, options.keepalive)
    scraper.defer_saves = True
    stdin = stdin or trio.lowlevel.FdStream(os.dup(0))
    stdout = stdout or trio.lowlevel.FdStream(os.dup(1))
    lock = trio.Lock()
    limit = frame_limit(options.limits.max_bytes, options.limits.max_label_bytes)  # the daemon's, both ways

    async def send(rid: int, reply: Reply) -> None:
        try:
            data = encode_answer(Answer(rid, reply))
            if len(data) - 4 > limit:  # the daemon would take the worker for broken: only this source fails
                raise ValueError(f"{len(data) - 4} bytes, over the limit of {limit}")
        except ValueError as exc:
            data = encode_answer(Answer(rid, Reply.fail(f"scraper failed: unsendable reply: {exc}")))
        async with lock:
            await stdout.send_all(data)

    async def news(logs: Iterable[LogEntry]) -> None:
        await send(0, Reply("ok", logs=list(logs)))

    async def one(job: ScrapeJob) -> None:
        try:
            reply = await scraper.scrape(job.name, job.cluster, job.path, job.scripted)
        except Exception as exc:  # a bug for one source stays with that source
            reply = Reply.fail(f"scraper failed: {type(exc).__name__}: {exc}")
        await send(job.rid, reply)

    async def flush(req: Flush) -> None:  # (a task: the scrapes go on while it writes)
        if req.source:
            await send(req.rid, Reply("ok", tables=await scraper.hand_over(req.source)))
        else:
            await send(req.rid, Reply("ok", logs=await scraper.flush_later()))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scraper.keep_saved, news)
            scraper.warm_up()  # (before the deadlines count)
            await news([])  # up: the daemon's deadlines count from here
            buf = bytearray()
            while True:
                data = await stdin.receive_some(1 << 20)
                if not data:
                    break
                buf += data
                for msg in read_frames(buf, limit):
                    req = decode_request(msg)
                    if isinstance(req, ScrapeJob):
                        scraper.adopt(req.tables)
                        nursery.start_soon(one, req)
                    elif isinstance(req, Forget):
                        await scraper.forget(req.name)
                    elif isinstance(req, Flush):
                        nursery.start_soon(flush, req)
            nursery.cancel_scope.cancel()
    finally:
        scraper.flush()  # the daemon is stopping (EOF): keep every id
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await scraper.aclose()


def worker_main(argv: list[str] | None = None) -> int:
    """A worker process: ``python -m pmda_py.openmetrics.scrape OPTIONS_JSON``."""
    args = sys.argv[1:] if argv is None else argv
    options = WorkerOptions.from_json(args[0])
    with contextlib.suppress(OSError):  # background work: the daemon answering pmcd comes first
        os.nice(options.nice)
    try:
        trio.run(_serve, options)
    except KeyboardInterrupt:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
