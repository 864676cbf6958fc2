"""Waiting for pmcd's next request outside trio's event loop while nothing
else in the process could run.

A PMDA spends most of its life waiting for pmcd.  Waiting through trio
costs a turn of its event loop per request (the wake-up, then its
scheduler's bookkeeping, in Python and, after an idle spell, out of the
CPU's caches): on the development machine about 30 us of CPU and 20-70 us of
a DESC's round trip (``bench/fetch_shapes.py``, the "trio fl." columns).
:class:`IdleWait` blocks in ``poll(2)`` on the channel instead, but only
while trio's own statistics show that no other task is runnable or waits for
I/O, and no longer than until trio's next deadline; it also watches trio's
wake-up socket, which a signal or another thread's ``run_sync_soon``
(``trio.from_thread``, a ``to_thread`` result) writes to, so none of those
waits on pmcd: any of them hands the wait back to trio.

trio does not name its wake-up socket in its public API: :meth:`IdleWait.of`
finds it where trio (0.22 to 0.35 at least) keeps it and answers None --
trio's way every time -- where it is not there, or where the I/O statistics
lack the fields read here (an I/O backend other than epoll).

The look at trio before each block reads the same facts as
``trio.lowlevel.current_statistics()`` straight from where trio keeps them
(:class:`_Loop`): the public call builds two records and takes a dozen
Python calls, about 15 us of CPU per request on the development machine
(a twentieth of a 10 000-value FETCH's).  Where this trio keeps them
elsewhere, the public call is used (tests/runtime/test_idle.py compares
the two in every state the wait tells apart)."""

from __future__ import annotations

import select
from collections import deque
from typing import Any

import trio

__all__ = ["LONGEST", "IdleWait"]

#: the longest single block (s): trio's loop gets a turn at least this often
LONGEST = 5.0


def _wakeup_fd() -> int | None:
    """The read end of trio's wake-up socket (signals, run_sync_soon), or
    None where this trio keeps it elsewhere."""
    try:
        from trio._core import _run

        runner: Any = _run.GLOBAL_RUN_CONTEXT.runner
        fd = runner.entry_queue.wakeup.wakeup_sock.fileno()
    except (ImportError, AttributeError, RuntimeError, OSError):
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


class _Loop:
    """The facts of trio's run loop that :meth:`IdleWait.wait` needs, read
    where trio keeps them: the run queue, the ``run_sync_soon`` queues, the
    epoll waiters, the deadlines and the clock (see the module)."""

    __slots__ = ("_entry", "_io", "_runner")

    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self._entry = runner.entry_queue
        self._io = runner.io_manager

    @classmethod
    def of(cls) -> _Loop | None:
        """The running loop's reader, or None where this trio keeps these
        facts elsewhere (or in other kinds of objects)."""
        try:
            from trio._core import _run

            runner: Any = _run.GLOBAL_RUN_CONTEXT.runner
            loop = cls(runner)
            ok = (
                isinstance(runner.runq, deque)
                and isinstance(loop._entry.queue, deque)
                and isinstance(loop._entry.idempotent_queue, dict)
                and isinstance(loop._io._registered, dict)
                and all(hasattr(w, "read_task") and hasattr(w, "write_task") for w in loop._io._registered.values())
                and callable(runner.deadlines.next_deadline)
                and callable(runner.clock.current_time)
            )
        except (ImportError, AttributeError, RuntimeError):
            return None
        return loop if ok else None

    def idle_for(self) -> float | None:
        """None when a task is runnable, a ``run_sync_soon`` callback waits,
        or a task other than trio's reader of its wake-up socket waits for
        I/O; else the seconds to trio's next deadline."""
        runner, entry = self._runner, self._entry
        if runner.runq or entry.queue or entry.idempotent_queue:
            return None
        reading = 0
        for waiter in self._io._registered.values():
            if waiter.write_task is not None:
                return None
            if waiter.read_task is not None:
                reading += 1
        if reading > 1:
            return None
        return float(runner.deadlines.next_deadline() - runner.clock.current_time())


class _Statistics:
    """:class:`_Loop`'s answer through trio's public statistics (where
    this trio keeps its loop's facts elsewhere)."""

    __slots__ = ()

    def idle_for(self) -> float | None:
        st = trio.lowlevel.current_statistics()
        io: Any = st.io_statistics
        # trio's own reader of its wake-up socket is the one I/O waiter expected
        if st.tasks_runnable or st.run_sync_soon_queue_size or io.tasks_waiting_read > 1 or io.tasks_waiting_write:
            return None
        return float(st.seconds_to_next_deadline)


class IdleWait:
    """Blocks until ``fd`` is readable while nothing else could run (see
    the module).  Made inside ``trio.run``, by :meth:`of`."""

    __slots__ = ("_fd", "_loop", "_poll", "blocked", "declined")

    def __init__(self, fd: int, wakeup: int, loop: _Loop | _Statistics | None = None) -> None:
        self._fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._poll.register(wakeup, select.POLLIN)
        #: what says whether trio is idle, and till when: its loop read directly, else its statistics
        self._loop: _Loop | _Statistics = loop if loop is not None else _Statistics()
        #: waits that blocked here, and waits left to trio at once (something else could run)
        self.blocked = 0
        self.declined = 0

    @classmethod
    def of(cls, fd: int) -> IdleWait | None:
        """The idle wait for ``fd`` in the running trio loop, or None where
        this trio's I/O statistics or wake-up socket cannot be read."""
        io = trio.lowlevel.current_statistics().io_statistics
        if not hasattr(io, "tasks_waiting_read") or not hasattr(io, "tasks_waiting_write"):
            return None
        wakeup = _wakeup_fd()
        if wakeup is None or wakeup == fd:
            return None
        return cls(fd, wakeup, _Loop.of() or _Statistics())

    def wait(self) -> bool:
        """Block until ``fd`` is readable or closed: True.  False at once
        when another task could run or waits for I/O, and False after a
        block that a signal, another thread, trio's next deadline or
        :data:`LONGEST` ended: the caller then waits trio's way."""
        idle = self._loop.idle_for()
        timeout = 0.0 if idle is None else min(idle, LONGEST)
        if timeout <= 0:
            self.declined += 1
            return False
        self.blocked += 1
        for fd, _events in self._poll.poll(timeout * 1000):  # noqa: SIM110 -- no generator: this runs per request
            if fd == self._fd:
                return True
        return False
