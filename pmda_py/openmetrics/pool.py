"""The OpenMetrics table's worker processes, seen from the daemon (trio).

Each runs :func:`pmda_py.openmetrics.scrape.worker_main`; a source
always goes to the same one while the pool keeps its size.  The pool may
grow (:meth:`WorkerPool.grow`, up to its ``limit``): a source that then
belongs to another worker is moved there, the name tables the one it leaves
had not saved yet going along with its next scrape (its numbers are kept).
Nothing here raises out of the pool because a process cannot be signalled (a worker of another user after the privilege
drop, one gone already): such a worker is told to end (EOF on its requests),
left behind, and replaced; the reason is logged and given to the scrapes it
fails.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from pmda_py.openmetrics.procs import kill_quietly
from pmda_py.openmetrics.records import (
    Flush,
    Forget,
    LogValue,
    Reply,
    ScrapeJob,
    decode_answer,
    encode_request,
    frame_limit,
    read_frames,
)
from pmda_py.openmetrics.scrape import WorkerOptions

__all__ = ["WorkerFailed", "WorkerPool"]

#: seconds a new worker process has to say it is up
WORKER_START_TIMEOUT = 30.0
#: the directory holding the pmda_py package (a worker process imports it from there)
_HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WorkerFailed(Exception):
    """The worker process scraping a source died or stopped answering."""


class PoolLog(Protocol):
    def __call__(self, event: str, **fields: LogValue) -> None: ...


@attrs.define(eq=False)
class _Pending:
    """A request in flight: set when its answer came (``reply`` None: the worker is gone)."""

    done: trio.Event = attrs.field(factory=trio.Event)
    reply: Reply | None = None


@attrs.define(eq=False)
class _Worker:
    index: int
    proc: trio.Process
    stdin: trio.abc.SendStream  #: its requests
    stdout: trio.abc.ReceiveStream  #: its answers
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    pending: dict[int, _Pending] = attrs.field(factory=dict)  #: request id -> its answer
    gone: str = ""  #: why it is no longer usable ("" while it is)
    uid: int = -1  #: the daemon's effective uid when it was started (it runs as that user)
    up: trio.Event = attrs.field(factory=trio.Event)  #: it said it is up (its first frame)


class WorkerPool:
    """Worker processes running :class:`Scraper` (main side, trio).

    A dead worker (EOF on its pipe) fails its pending scrapes and is
    replaced at the next call; one that does not answer a scrape within its
    deadline is killed (and so replaced) the same way.  ``log(event, **kw)``
    reports both.
    """

    def __init__(self, size: int, options: WorkerOptions, log: PoolLog, limit: int | None = None) -> None:
        self.size = size
        self.limit = max(size, limit or size)  #: how many workers it may grow to
        self.options = options
        #: the longest answer frame a worker may send (a longer one: the worker is broken)
        self.frame_limit = frame_limit(options.limits.max_bytes, options.limits.max_label_bytes)
        self.log = log
        self.workers: list[_Worker | None] = [None] * size
        self.started = 0  #: processes started (replacements included)
        self._ids = 0
        self._nursery: trio.Nursery | None = None
        self._starting = [trio.Lock() for _ in range(size)]
        self._retired: list[_Worker] = []
        self.home: dict[str, int] = {}  #: source -> the worker that scraped it last
        self._cpu: dict[int, tuple[float, float]] = {}  #: pid -> (when, its CPU seconds then)

    def grow(self) -> bool:
        """One more worker (started at its first scrape), if under the
        limit: the sources it takes over move to it.  False at the limit."""
        if self.size >= self.limit:
            return False
        self.size += 1
        self.workers.append(None)
        self._starting.append(trio.Lock())
        return True

    def busy_share(self) -> float:
        """The share of its time the busiest worker spent on the CPU since
        the last call, 0.0 to 1.0 (a worker new since: not counted; 1.0
        where that cannot be read: counted as busy).  The readings are in
        clock ticks, so over a span of a few ticks one tick more or less
        moves the ratio far past 1: it is capped there."""
        now = time.monotonic()
        share = 0.0
        seen, self._cpu = self._cpu, {}  # only the live workers' (a replaced worker's pid is dropped)
        for w in self.workers:
            if w is None or w.gone:
                continue
            used = _cpu_seconds(w.proc.pid)
            if used is None:
                share = 1.0
                continue
            then = seen.get(w.proc.pid)
            self._cpu[w.proc.pid] = (now, used)
            if then is not None and now > then[0]:
                share = max(share, (used - then[1]) / (now - then[0]))
        return min(share, 1.0)

    @staticmethod
    def _uid() -> int:
        return os.geteuid()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
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
                        await w.stdin.aclose()
                with trio.move_on_after(3):
                    for w in alive:
                        await w.proc.wait()
                for w in alive:
                    why = kill_quietly(w.proc)
                    if why is not None:
                        self.log("openmetrics_worker_unkillable", worker=w.index, pid=w.proc.pid, error=why)

    def _running(self) -> trio.Nursery | None:
        """The readers' nursery while the pool runs (None once it stopped)."""
        return self._nursery

    async def _start(self, k: int) -> _Worker:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_HERE, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pmda_py.openmetrics.scrape", self.options.to_json()],
            stdin=-1,
            stdout=-1,
            env=env,
        )
        nursery = self._running()
        if nursery is None:  # (the pool stopped while it was starting)
            kill_quietly(proc)
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await proc.wait()
            raise WorkerFailed("the worker processes are stopping")
        assert proc.stdin is not None and proc.stdout is not None
        w = _Worker(k, proc, proc.stdin, proc.stdout, uid=self._uid())
        self.workers[k] = w
        self.started += 1
        nursery.start_soon(self._reader, w)
        return w

    async def _reader(self, w: _Worker) -> None:
        buf = bytearray()
        why = "exited"
        # (cancelled: the table is stopping, and the pool's run() ends the worker gracefully)
        try:
            while True:
                data = await w.stdout.receive_some(1 << 20)
                if not data:
                    break
                buf += data
                for msg in read_frames(buf, self.frame_limit):
                    answer = decode_answer(msg)
                    if answer.rid == 0:  # news of its own (up; a name table it could not save)
                        w.up.set()
                        for entry in answer.reply.logs:
                            self.log(entry.event, **entry.fields)
                        continue
                    slot = w.pending.pop(answer.rid, None)
                    if slot is not None:
                        slot.reply = answer.reply
                        slot.done.set()
        except (
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            OSError,
            ValueError,
            EOFError,
            KeyError,
            TypeError,
        ) as err:
            why = f"unreadable: {err}"
        self._fail(w, why)
        rc = None
        with trio.CancelScope(shield=True):
            await self._end(w)
            with trio.move_on_after(5):
                rc = await w.proc.wait()
        if w.gone == why:  # (a hung one was logged when it was killed)
            self.log("openmetrics_worker_died", worker=w.index, pid=w.proc.pid, returncode=rc, why=why)

    async def _end(self, w: _Worker) -> str | None:
        """Kill ``w``; if it cannot be signalled, tell it to end (EOF) and
        log why (never raises).  The reason it could not be killed."""
        why = kill_quietly(w.proc)
        if why is not None:
            self.log("openmetrics_worker_unkillable", worker=w.index, pid=w.proc.pid, error=why)
            with contextlib.suppress(
                trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError, OSError
            ):
                await w.stdin.aclose()
        return why

    def _fail(self, w: _Worker, why: str) -> None:
        if not w.gone:
            w.gone = why
        w.up.set()  # (nobody waits for it any more)
        if self.workers[w.index] is w:
            self.workers[w.index] = None
        for slot in w.pending.values():
            slot.done.set()  # (no reply: gone)
        w.pending.clear()

    async def flush(self, deadline: float = 10.0) -> None:
        """Every worker's changed name tables saved now."""
        for k, w in enumerate(self.workers):
            if w is not None and not w.gone:
                try:
                    await self._call(w, Flush, deadline)
                except WorkerFailed as err:
                    self.log("openmetrics_worker_flush_failed", worker=k, error=str(err))

    async def scrape(
        self,
        name: str,
        cluster: int,
        path: str,
        scripted: bool,
        deadline: float,
        handed: dict[int, bytes] | None = None,
    ) -> Reply:
        """Source ``name`` scraped by its worker (``handed``: its name tables
        not saved yet, from the scraper it left).

        Raises:
            WorkerFailed: the worker died, or gave no answer within ``deadline``
                seconds (it is then killed).
        """
        k = cluster % self.size
        moved_from = self.home.get(name, k)
        tables: dict[int, bytes] = dict(handed or {})
        if moved_from != k:  # (the pool grew): its old worker forgets it, its unsaved tables come along
            tables = await self._move(name, moved_from, deadline)
        self.home[name] = k
        w = self.workers[k]
        if w is None or w.uid != self._uid():
            async with self._starting[k]:
                if self._nursery is None:  # (the pool stopped, maybe while this waited for the lock)
                    raise WorkerFailed("no worker processes running")
                w = self.workers[k]
                if w is not None and w.uid != self._uid():
                    # the daemon dropped its privileges since (pmcd.conf without 'notready' starts the
                    # tables first): a worker must not go on scraping (running scripts) as root
                    self._retire(w)
                    w = None
                if w is None:
                    try:
                        w = await self._start(k)
                    except OSError as err:
                        raise WorkerFailed(f"cannot start a worker process: {err}") from err
        return await self._call(
            w,
            lambda rid: ScrapeJob(rid=rid, name=name, cluster=cluster, path=path, scripted=scripted, tables=tables),
            deadline,
        )

    async def _move(self, name: str, k: int, deadline: float) -> dict[int, bytes]:
        """Source ``name`` leaves worker ``k``: it forgets it and answers
        with the images of its name tables not saved yet (a worker saves
        them late, in batches), for the worker taking it over, which reads
        the saved ones from their files: the numbers given so far are kept
        without writing a file on the way."""
        w = self.workers[k] if k < len(self.workers) else None
        if w is None or w.gone:
            return {}  # (a worker gone saved what it could as it ended, or was killed: as after a restart)
        try:
            reply = await self._call(w, lambda rid: Flush(rid, source=name), deadline)
        except WorkerFailed as err:
            self.log("openmetrics_worker_flush_failed", worker=k, error=str(err))
            return {}
        for entry in reply.logs:
            self.log(entry.event, **entry.fields)
        return reply.tables

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
                    await w.stdin.aclose()

        self._nursery.start_soon(close)

    async def _call(self, w: _Worker, request: Callable[[int], ScrapeJob | Flush], deadline: float) -> Reply:
        if not w.up.is_set():  # a deadline counts from a worker that is up (a start may be slow on a busy host)
            with trio.move_on_after(WORKER_START_TIMEOUT):
                await w.up.wait()
            if not w.up.is_set():
                self.log("openmetrics_worker_hung", worker=w.index, pid=w.proc.pid, seconds=WORKER_START_TIMEOUT)
                self._fail(w, f"not up in {WORKER_START_TIMEOUT:g} s")
                with trio.CancelScope(shield=True):
                    await self._end(w)
            if w.gone:
                raise WorkerFailed(f"worker process {w.proc.pid} {w.gone}")
        self._ids += 1
        rid = self._ids
        slot = w.pending[rid] = _Pending()
        try:
            async with w.lock:
                await w.stdin.send_all(encode_request(request(rid)))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
            w.pending.pop(rid, None)
            raise WorkerFailed(f"worker process {w.proc.pid} gone: {err}") from err
        with trio.move_on_after(deadline) as scope:
            await slot.done.wait()
        if scope.cancelled_caught:
            w.pending.pop(rid, None)
            outcome = "killed"
            if not w.gone:
                self.log("openmetrics_worker_hung", worker=w.index, pid=w.proc.pid, seconds=deadline)
                self._fail(w, f"no answer in {deadline:g} s")
                with trio.CancelScope(shield=True):
                    why = await self._end(w)
                if why is not None:
                    outcome = f"could not be killed: {why}; replaced"
            raise WorkerFailed(f"worker process {w.proc.pid} gave no answer in {deadline:g} s ({outcome})")
        if slot.reply is None:
            raise WorkerFailed(f"worker process {w.proc.pid} {w.gone}")
        return slot.reply

    async def forget(self, cluster: int, name: str) -> None:
        w = self.workers[self.home.pop(name, cluster % self.size)]
        if w is not None and not w.gone:
            try:
                async with w.lock:
                    await w.stdin.send_all(encode_request(Forget(name)))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time (user and system) process ``pid`` has used, from
    ``/proc/PID/stat`` (None where that cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(4096)
        fields = stat[stat.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
