"""Scraping OpenMetrics sources: fetch (HTTP, ``file://``, script), digest
(:mod:`pmda_py.openmetrics.digest`) and save the name tables.

A :class:`Scraper` owns its sources' models.  The OpenMetrics table runs
one in each of a few worker processes (``python -m
pmda_py.openmetrics.scrape``, a source always on the same one) so
that HTTP, parsing and id assignment never hold the daemon's GIL or its
trio loop; the daemon gets a compact :data:`Reply` per scrape.  With
``workers=0`` the table runs a Scraper in its own process instead (the
digest in a worker thread).

The pipe protocol is frames of a 4-byte big-endian length and a
``marshal`` image of builtins: ``("scrape", id, name, cluster, path,
scripted)`` and ``("forget", 0, name)`` in, ``(id, reply)`` out; id 0 out
is news of the worker's own (its logs), the first one when it is up.  A
worker ends at EOF on its stdin.
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
from pmda_py.openmetrics.decode import ACCEPT_ENCODING, BodyDecoder
from pmda_py.openmetrics.digest import Digest, digest
from pmda_py.openmetrics.exposition import Limits
from pmda_py.openmetrics.model import (
    MAX_METRIC,
    NameTable,
    SourceConfig,
    SourceModel,
    parse_url_config,
)
from pmda_py.openmetrics.procs import run_script
from pmda_py.safefile import FileRefused, move_aside
from pmda_py.safefile import read_regular as _read_regular

__all__ = ["Reply", "Scraper", "frame", "read_frames", "read_state", "worker_main", "write_state"]

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


_SCHEMES = ("http://", "https://", "file://")

#: the largest name table file read (a larger one is moved aside)
STATE_READ_CAP = 64 * 1024 * 1024


def read_regular(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file (never blocks on a FIFO or device)."""
    return _read_regular(path, limit)


def write_state(path: str, data: bytes) -> str | None:
    """Write a name table file atomically, never through a link; the error
    text if it failed (the old file is then unchanged, no temporary left)."""
    try:
        safefile.atomic_write(path, data, makedirs=True)
    except OSError as err:
        return str(err)
    return None


def read_state(path: str, maxnum: int) -> tuple[NameTable, str | None]:
    """The name table saved at ``path`` (empty if none); the problem if unreadable.

    A file that cannot be read whole (over :data:`STATE_READ_CAP`, truncated,
    corrupt, not a regular file) is moved aside (``PATH.bad``, never over
    another file) and the table starts empty; if it cannot be moved, the
    table is never saved (the file is not overwritten)."""
    try:
        data = _read_regular(path, STATE_READ_CAP, whole=True)
        table = NameTable.loads(data, maxnum)
    except FileNotFoundError:
        return NameTable(maxnum), None
    except (FileRefused, ValueError) as err:
        problem = err.strerror if isinstance(err, FileRefused) and err.strerror else str(err)
        table = NameTable(maxnum)
        try:
            aside = move_aside(path)
        except OSError as merr:
            table.frozen = True
            return table, f"{problem}; cannot move it aside ({merr.strerror or merr}): ids not saved"
        return table, f"{problem}; moved aside to {aside}, ids start afresh"
    except OSError as err:
        table = NameTable(maxnum)
        table.frozen = True  # (unreadable now: never written over)
        return table, f"cannot read: {err.strerror or err}; ids not saved"
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
                for p in src.config.problems:
                    logs.append(("openmetrics_config", {"problem": p}))
                if not src.config.url.startswith(_SCHEMES):  # (never quoted: the file may hold anything)
                    src.config.url = ""
                    logs.append(("openmetrics_config", {"problem": "line 1: not an http, https or file URL"}))
                url = src.config.url
            if not scripted and not src.config.url:
                return ("fail", f"{path}: no http, https or file URL on its first line", 0, 0, url, logs, None)
        except OSError as err:
            return ("fail", f"cannot read {path}: {err.strerror or type(err).__name__}", 0, 0, url, logs, None)
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
            if table.dirty and not table.frozen:
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

    def warm_up(self) -> None:
        """The HTTP side's one-time set-up: imports and the TLS context,
        ~0.1 s of CPU, which a niced worker on a busy host may take over a
        second to get.  A worker does it before it says it is up, and a
        scrape before its deadline starts: it is nobody's time-out."""
        if self._httpx is None:
            import ssl

            import httpx

            self._ssl = ssl.create_default_context()  # one for every source's client
            httpx.AsyncClient(verify=self._ssl, trust_env=False)  # (what a client imports; it opens nothing)
            self._httpx = httpx

    def _client(self, src: _Src) -> Any:
        if src.client is None:
            self.warm_up()
            # a client per source: keep-alive to its host (kept over the interval between scrapes), and no
            # shared pool to search (httpcore's pool scans every connection for every request); the global
            # cap is the table's CapacityLimiter
            one = self._httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=self.keepalive)
            src.client = self._httpx.AsyncClient(verify=self._ssl, follow_redirects=True, trust_env=False, limits=one)
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
                raise HttpStatus(code, f"{code} {kind} Error: {r.reason_phrase} for url: {url}")
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


async def _inline(fn: Callable[[], Any]) -> Any:
    return fn()


async def _close(src: _Src) -> None:
    client, src.client = src.client, None
    if client is not None:
        try:
            await client.aclose()
        except Exception:
            pass


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
            scraper.warm_up()  # (before the deadlines count)
            await send(0, ("ok", 0, 0, 0, None, [], None))  # up: the daemon's deadlines count from here
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
    """A worker process: ``python -m pmda_py.openmetrics.scrape OPTIONS_JSON``."""
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
