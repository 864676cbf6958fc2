"""Scraping OpenMetrics sources: fetch (HTTP, ``file://``, script), digest
(:mod:`pmda_py.harvest.openmetrics.digest`) and save the name tables.

A :class:`Scraper` owns its sources' models.  The OpenMetrics table runs
one in each of a few worker processes (``python -m
pmda_py.tables.openmetrics_scrape``, a source always on the same one) so
that HTTP, parsing and id assignment never hold the daemon's GIL or its
trio loop; the daemon gets a compact :data:`Reply` per scrape.  With
``workers=0`` the table runs a Scraper in its own process instead (the
digest in a worker thread).

The pipe protocol is frames of a 4-byte big-endian length and a
``marshal`` image of builtins: ``("scrape", id, name, cluster, path,
scripted)`` and ``("forget", 0, name)`` in, ``(id, reply)`` out.  A worker
ends at EOF on its stdin.
"""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import stat
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from pmda_py import safefile
from pmda_py.harvest.openmetrics.digest import Digest, digest
from pmda_py.harvest.openmetrics.exposition import Limits
from pmda_py.harvest.openmetrics.model import (
    MAX_METRIC,
    NameTable,
    SourceConfig,
    SourceModel,
    parse_url_config,
)

__all__ = ["Reply", "Scraper", "read_frames", "worker_main", "write_state"]

#: ``("ok", code, fetch_ms, parse_ms, url or None, logs, digest)`` or
#: ``("fail", status text, code, 0, url or None, logs, None)``; ``url`` is
#: the config's URL when the config was (re)read; ``logs`` are
#: ``(event, fields)`` the daemon logs for the source
Reply = tuple[str, Any, int, int, Any, list[tuple[str, dict[str, Any]]], Any]

_LEN = struct.Struct(">I")
#: the directory holding the pmda_py package (a worker process imports it from there)
_HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class TooBig(Exception):
    pass


class HttpStatus(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


def read_regular(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file (a FIFO or device would block)."""
    with open(path, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return f.read(limit)


def write_state(path: str, data: bytes) -> str | None:
    """Write a name table file atomically, never through a link; the error
    text if it failed (the old file is then unchanged, no temporary left)."""
    try:
        safefile.atomic_write(path, data, makedirs=True)
    except OSError as err:
        return str(err)
    return None


def read_state(path: str, maxnum: int) -> tuple[NameTable, str | None]:
    """The name table saved at ``path`` (empty if none); the problem if unreadable."""
    try:
        data = safefile.read_regular(path, 64 * 1024 * 1024)  # never blocks, regular files only
    except FileNotFoundError:
        return NameTable(maxnum), None
    except OSError as err:
        return NameTable(maxnum), str(err)
    try:
        table = NameTable.loads(data, maxnum)
    except ValueError as err:
        return NameTable(maxnum), str(err)
    table.dirty = False
    return table, None


@attrs.define(eq=False)
class _Src:
    model: SourceModel
    config: SourceConfig = attrs.field(factory=SourceConfig)
    ctime: float = -1.0
    client: Any = None
    sent_meta: bool = False
    logs: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)  #: the current scrape's


class Scraper:
    """The scraping side of the OpenMetrics table for some sources.

    ``run_cpu(fn)`` runs the CPU part (parse, ingest, save) and returns its
    result: in a worker process, at once; in the daemon, in a thread.
    """

    def __init__(
        self,
        state_dir: str,
        domain: int,
        limits: Limits,
        timeout: float,
        keepalive: float = 60.0,
        run_cpu: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.domain = domain
        self.limits = limits
        self.timeout = timeout
        self.keepalive = keepalive
        self.run_cpu = run_cpu or _inline
        self.sources: dict[str, _Src] = {}
        #: a worker process saves changed name tables when it is idle (a file costs ~0.2 ms of kernel
        #: time: 20 000 of them would slow the first round down), else at once
        self.defer_saves = False
        self.dirty: dict[int, NameTable] = {}
        self.dirty_since = 0.0
        self._httpx: Any = None
        self._ssl: Any = None

    def state_path(self, serial: int) -> str:
        return os.path.join(self.state_dir, f"{self.domain}.{serial}.py")

    def load_table(self, serial: int, maxnum: int, logs: list[tuple[str, dict[str, Any]]]) -> NameTable:
        unsaved = self.dirty.get(serial)
        if unsaved is not None:  # (a source forgotten and back before its tables were saved)
            return unsaved
        path = self.state_path(serial)
        table, problem = read_state(path, maxnum)
        if problem is not None:
            logs.append(("openmetrics_state_unreadable", {"file": path, "error": problem}))
        return table

    def _source(self, name: str, cluster: int) -> _Src:
        src = self.sources.get(name)
        if src is None or src.model.cluster != cluster:
            logs: list[tuple[str, dict[str, Any]]] = []
            items = self.load_table(cluster, MAX_METRIC, logs)

            def load(serial: int, maxnum: int) -> NameTable:
                return self.load_table(serial, maxnum, logs)

            src = self.sources[name] = _Src(SourceModel(name, cluster, items, load, self.limits), logs=logs)
        return src

    async def forget(self, name: str) -> None:
        src = self.sources.pop(name, None)
        if src is not None:
            await _close(src)

    async def aclose(self) -> None:
        for src in self.sources.values():
            await _close(src)

    async def scrape(self, name: str, cluster: int, path: str, scripted: bool) -> Reply:
        """One scrape of a source: fetch under the deadline, digest, save."""
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
                src.config = parse_url_config(read_regular(path, 1024 * 1024).decode("utf-8", "replace"))
                src.ctime = st.st_ctime
                url = src.config.url
                for p in src.config.problems:
                    logs.append(("openmetrics_config", {"problem": p}))
        except OSError as err:
            return ("fail", f"cannot read {path}: {err}", 0, 0, url, logs, None)
        code = 0
        try:
            with trio.fail_after(self.timeout):
                body, code = await self._get(src, path, scripted)
        except trio.TooSlowError:
            status = f"failed to fetch URL or execute script {path}: timed out after {self.timeout:g} s"
            return ("fail", status, code, 0, url, logs, None)
        except Exception as err:
            code = err.code if isinstance(err, HttpStatus) else code
            return ("fail", f"failed to fetch URL or execute script {path}: {err}", code, 0, url, logs, None)
        fetch_ms = int(1000 * (time.monotonic() - t0))
        t1 = time.monotonic()
        with_meta = not src.sent_meta
        result: Digest = await self.run_cpu(lambda: self._digest(src, body, with_meta))
        src.sent_meta = True
        logs += src.logs
        src.logs.clear()
        return ("ok", code, fetch_ms, int(1000 * (time.monotonic() - t1)), url, logs, result)

    def _digest(self, src: _Src, body: bytes, with_meta: bool) -> Digest:
        out, dirty = digest(src.model, src.config, body.decode("utf-8", "replace"), self.limits, with_meta)
        if self.defer_saves:
            if dirty and not self.dirty:
                self.dirty_since = time.monotonic()
            self.dirty.update(dirty)
        else:
            src.logs += self._save(dirty)
        return out

    def _save(self, tables: Any) -> list[tuple[str, dict[str, Any]]]:
        logs = []
        for serial, table in tables:
            if table.dirty:
                path = self.state_path(serial)
                problem = write_state(path, table.dumps())
                if problem is None:
                    table.dirty = False
                else:
                    logs.append(("openmetrics_state_unsaved", {"file": path, "error": problem}))
        return logs

    def flush(self, most: int | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Save the name tables changed since the last flush (deferred
        saves), or at most ``most`` of them."""
        if most is None or most >= len(self.dirty):
            tables, self.dirty = list(self.dirty.items()), {}
        else:
            tables = [(k, self.dirty.pop(k)) for k in list(self.dirty)[:most]]
        return self._save(tables)

    async def _get(self, src: _Src, path: str, scripted: bool) -> tuple[bytes, int]:
        limit = self.limits.max_bytes
        if scripted:
            return await _run_script(path, limit), 0
        url = src.config.url
        if url.startswith("file://"):
            data = read_regular(url[7:], limit + 1)
            if len(data) > limit:
                raise TooBig(f"document larger than {limit} bytes")
            return data, 0
        if src.client is None:
            if self._httpx is None:
                import ssl

                import httpx

                self._httpx = httpx
                self._ssl = ssl.create_default_context()  # one for every source's client
            # a client per source: keep-alive to its host (kept over the interval between scrapes), and no
            # shared pool to search (httpcore's pool scans every connection for every request); the global
            # cap is the table's CapacityLimiter
            one = self._httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=self.keepalive)
            src.client = self._httpx.AsyncClient(verify=self._ssl, follow_redirects=True, trust_env=False, limits=one)
        async with src.client.stream("GET", url, headers=src.config.headers, timeout=self.timeout) as r:
            code = int(r.status_code)
            if code >= 400:
                kind = "Client" if code < 500 else "Server"  # requests' raise_for_status() text
                raise HttpStatus(code, f"{code} {kind} Error: {r.reason_phrase} for url: {url}")
            size = int(r.headers.get("content-length") or 0)
            if size > limit:
                raise TooBig(f"document larger than {limit} bytes (Content-Length {size})")
            chunks = bytearray()
            async for chunk in r.aiter_bytes():
                chunks += chunk
                if len(chunks) > limit:
                    raise TooBig(f"document larger than {limit} bytes")
            return bytes(chunks), code


async def _inline(fn: Callable[[], Any]) -> Any:
    return fn()


async def _close(src: _Src) -> None:
    client, src.client = src.client, None
    if client is not None:
        try:
            await client.aclose()
        except Exception:
            pass


async def _run_script(path: str, limit: int) -> bytes:
    proc = await trio.lowlevel.open_process([path], stdin=None, stdout=-1, stderr=None)
    out = bytearray()
    try:
        assert proc.stdout is not None
        while True:
            chunk = await proc.stdout.receive_some(65536)
            if not chunk:
                break
            out += chunk
            if len(out) > limit:
                raise TooBig(f"script output larger than {limit} bytes")
        rc = await proc.wait()
        if rc:
            raise RuntimeError(f"script exited with status {rc}")
        return bytes(out)
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()


def frame(obj: Any) -> bytes:
    data = marshal.dumps(obj)
    return _LEN.pack(len(data)) + data


def read_frames(buf: bytearray) -> list[Any]:
    """The whole frames at the start of ``buf`` (removed from it)."""
    out = []
    pos = 0
    while len(buf) - pos >= 4:
        (n,) = _LEN.unpack_from(buf, pos)
        if len(buf) - pos - 4 < n:
            break
        out.append(marshal.loads(bytes(buf[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    del buf[:pos]
    return out


class WorkerFailed(Exception):
    """The worker process scraping a source died or stopped answering."""


@attrs.define(eq=False)
class _Worker:
    index: int
    proc: Any
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    pending: dict[int, list[Any]] = attrs.field(factory=dict)  #: id -> [event, reply]
    gone: str = ""  #: why it is no longer usable ("" while it is)
    uid: int = -1  #: the daemon's effective uid when it was started (it runs as that user)


_GONE = object()


class WorkerPool:
    """Worker processes running :class:`Scraper` (main side, trio).

    A dead worker (EOF on its pipe) fails its pending scrapes and is
    replaced at the next call; one that does not answer a scrape within its
    deadline is killed (and so replaced) the same way.  ``log(event, **kw)``
    reports both.
    """

    def __init__(self, size: int, options: dict[str, Any], log: Callable[..., Any]) -> None:
        self.size = size
        self.options = options
        self.log = log
        self.workers: list[_Worker | None] = [None] * size
        self.started = 0  #: processes started (replacements included)
        self._ids = 0
        self._nursery: trio.Nursery | None = None
        self._starting = [trio.Lock() for _ in range(size)]
        self._retired: list[_Worker] = []

    @staticmethod
    def _uid() -> int:
        return os.geteuid()

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Own the workers' reader tasks until cancelled (then end the workers)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for k in range(self.size):
                    await self._start(k)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                alive = [w for w in [*self.workers, *self._retired] if w is not None and w.proc.returncode is None]
                for w in alive:  # EOF: a worker saves its name tables and ends
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        await w.proc.stdin.aclose()
                with trio.move_on_after(3):
                    for w in alive:
                        await w.proc.wait()
                for w in alive:
                    if w.proc.returncode is None:
                        w.proc.kill()

    async def _start(self, k: int) -> _Worker:
        assert self._nursery is not None
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_HERE, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pmda_py.tables.openmetrics_scrape", json.dumps(self.options)],
            stdin=-1,
            stdout=-1,
            env=env,
        )
        w = _Worker(k, proc, uid=self._uid())
        self.workers[k] = w
        self.started += 1
        self._nursery.start_soon(self._reader, w)
        return w

    async def _reader(self, w: _Worker) -> None:
        buf = bytearray()
        why = "exited"
        # (cancelled: the table is stopping, and the pool's run() ends the worker gracefully)
        try:
            while True:
                data = await w.proc.stdout.receive_some(1 << 20)
                if not data:
                    break
                buf += data
                for rid, reply in read_frames(buf):
                    if rid == 0:  # news of its own (a name table it could not save)
                        for event, fields in reply[5]:
                            self.log(event, **fields)
                        continue
                    slot = w.pending.pop(rid, None)
                    if slot is not None:
                        slot[1] = reply
                        slot[0].set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ValueError, EOFError) as err:
            why = f"unreadable: {err}"
        self._fail(w, why)
        with trio.CancelScope(shield=True):
            if w.proc.returncode is None:
                w.proc.kill()
            rc = await w.proc.wait()
        if w.gone == why:  # (a hung one was logged when it was killed)
            self.log("openmetrics_worker_died", worker=w.index, pid=w.proc.pid, returncode=rc, why=why)

    def _fail(self, w: _Worker, why: str) -> None:
        if not w.gone:
            w.gone = why
        if self.workers[w.index] is w:
            self.workers[w.index] = None
        for slot in w.pending.values():
            slot[1] = _GONE
            slot[0].set()
        w.pending.clear()

    async def flush(self, deadline: float = 10.0) -> None:
        """Every worker's changed name tables saved now."""
        for k, w in enumerate(self.workers):
            if w is not None and not w.gone:
                try:
                    await self._call(w, ("flush",), deadline)
                except WorkerFailed as err:
                    self.log("openmetrics_worker_flush_failed", worker=k, error=str(err))

    async def scrape(self, cluster: int, deadline: float, *job: Any) -> Reply:
        """``job`` (name, cluster, path, scripted) scraped by its worker.

        Raises:
            WorkerFailed: the worker died, or gave no answer within ``deadline``
                seconds (it is then killed).
        """
        k = cluster % self.size
        w = self.workers[k]
        if w is None or w.uid != self._uid():
            async with self._starting[k]:
                w = self.workers[k]
                if w is not None and w.uid != self._uid():
                    # the daemon dropped its privileges since (pmcd.conf without 'notready' starts the
                    # tables first): a worker must not go on scraping (running scripts) as root
                    self._retire(w)
                    w = None
                if w is None:
                    if self._nursery is None:
                        raise WorkerFailed("no worker processes running")
                    try:
                        w = await self._start(k)
                    except OSError as err:
                        raise WorkerFailed(f"cannot start a worker process: {err}") from err
        return await self._call(w, ("scrape", *job), deadline)

    def _retire(self, w: _Worker) -> None:
        """No new work for ``w``; it ends (EOF) once its scrapes in flight are answered."""
        w.gone = "retired"
        self.workers[w.index] = None
        self._retired.append(w)
        assert self._nursery is not None

        async def close() -> None:
            while w.pending:  # noqa: ASYNC110
                await trio.sleep(0.05)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                async with w.lock:
                    await w.proc.stdin.aclose()

        self._nursery.start_soon(close)

    async def _call(self, w: _Worker, msg: tuple[Any, ...], deadline: float) -> Reply:
        self._ids += 1
        rid = self._ids
        slot: list[Any] = [trio.Event(), None]
        w.pending[rid] = slot
        try:
            async with w.lock:
                assert w.proc.stdin is not None
                await w.proc.stdin.send_all(frame((msg[0], rid, *msg[1:])))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
            w.pending.pop(rid, None)
            raise WorkerFailed(f"worker process {w.proc.pid} gone: {err}") from err
        with trio.move_on_after(deadline) as scope:
            await slot[0].wait()
        if scope.cancelled_caught:
            w.pending.pop(rid, None)
            if not w.gone:
                self.log("openmetrics_worker_hung", worker=w.index, pid=w.proc.pid, seconds=deadline)
                self._fail(w, f"no answer in {deadline:g} s")
                w.proc.kill()
            raise WorkerFailed(f"worker process {w.proc.pid} gave no answer in {deadline:g} s (killed)")
        if slot[1] is _GONE:
            raise WorkerFailed(f"worker process {w.proc.pid} {w.gone}")
        reply: Reply = slot[1]
        return reply

    async def forget(self, cluster: int, name: str) -> None:
        w = self.workers[cluster % self.size]
        if w is not None and not w.gone:
            try:
                async with w.lock:
                    assert w.proc.stdin is not None
                    await w.proc.stdin.send_all(frame(("forget", 0, name)))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass


#: a worker saves its changed name tables when no scrape has been in flight for this long
#: (after the burst of a round) ...
_IDLE_FLUSH = 1.0
#: ... or when the oldest change is this old; FLUSH_CHUNK every _FLUSH_TICK seconds (a file costs
#: 0.2-0.5 ms of kernel time: a start-up's 20 000 new ones at once would slow the first round down)
_MAX_FLUSH_DELAY = 30.0
_FLUSH_TICK = 0.1
FLUSH_CHUNK = 50


async def _serve(options: dict[str, Any]) -> None:
    limits = Limits(**options.get("limits", {}))
    scraper = Scraper(
        options["state_dir"], int(options["domain"]), limits, float(options["timeout"]), float(options["keepalive"])
    )
    scraper.defer_saves = True
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    lock = trio.Lock()
    busy = {"n": 0, "since": time.monotonic()}  # scrapes in flight, and since when there were none

    async def send(rid: int, reply: Any) -> None:
        try:
            data = frame((rid, reply))
        except ValueError as exc:
            data = frame((rid, ("fail", f"scraper failed: unsendable reply: {exc}", 0, 0, None, [], None)))
        async with lock:
            await stdout.send_all(data)

    async def one(rid: int, name: str, cluster: int, path: str, scripted: bool) -> None:
        busy["n"] += 1
        try:
            reply: Any = await scraper.scrape(name, cluster, path, scripted)
        except Exception as exc:  # a bug for one source stays with that source
            reply = ("fail", f"scraper failed: {type(exc).__name__}: {exc}", 0, 0, None, [], None)
        finally:
            busy["n"] -= 1
            if not busy["n"]:
                busy["since"] = time.monotonic()
        await send(rid, reply)

    async def flush(rid: int) -> None:
        await send(rid, ("ok", 0, 0, 0, None, scraper.flush(), None))

    async def flusher() -> None:
        while True:
            await trio.sleep(_FLUSH_TICK)
            now = time.monotonic()
            if scraper.dirty and (
                (not busy["n"] and now - busy["since"] >= _IDLE_FLUSH) or now - scraper.dirty_since > _MAX_FLUSH_DELAY
            ):
                logs = scraper.flush(FLUSH_CHUNK)
                if logs:
                    await send(0, ("ok", 0, 0, 0, None, logs, None))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flusher)
            buf = bytearray()
            while True:
                data = await stdin.receive_some(1 << 20)
                if not data:
                    break
                buf += data
                for msg in read_frames(buf):
                    if msg[0] == "scrape":
                        nursery.start_soon(one, *msg[1:6])
                    elif msg[0] == "forget":
                        await scraper.forget(msg[2])
                    elif msg[0] == "flush":
                        await flush(msg[1])
            nursery.cancel_scope.cancel()
    finally:
        scraper.flush()  # the daemon is stopping (EOF): keep every id
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await scraper.aclose()


def worker_main(argv: list[str] | None = None) -> int:
    """A worker process: ``python -m pmda_py.tables.openmetrics_scrape OPTIONS_JSON``."""
    args = sys.argv[1:] if argv is None else argv
    options = json.loads(args[0])
    with contextlib.suppress(OSError):  # background work: the daemon answering pmcd comes first
        os.nice(int(options.get("nice", 0)))
    try:
        trio.run(_serve, options)
    except KeyboardInterrupt:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
