"""The thread a compat script's callbacks run in: one, started on first use
and kept for the life of the process, so a request costs a queue put and a
wake-up of the event loop (``trio.to_thread.run_sync`` hands each call to a
thread of its cache through more steps: about twice the time per hop on a
loaded machine, which a FETCH pays once).

:meth:`CallbackThread.run` behaves as ``trio.to_thread.run_sync(fn, *args,
abandon_on_cancel=True)``: cancelled (the table's deadline), it returns at
once and leaves the call running in the thread; what that call returns is
then dropped.  The script's callbacks run one at a time in any case (the
agent's lock, taken by the caller).
"""

from __future__ import annotations

import contextvars
import queue
import threading
from typing import Any, Callable, TypeVar

import attrs
import outcome
import trio

__all__ = ["CallbackThread"]

_T = TypeVar("_T")


@attrs.define
class _Job:
    """One call: what to run, in which context, and where to deliver it."""

    fn: Callable[..., Any]
    args: tuple[object, ...]
    context: contextvars.Context
    token: trio.lowlevel.TrioToken
    task: trio.lowlevel.Task
    abandoned: bool = False

    def deliver(self, result: outcome.Outcome[Any]) -> None:
        """In the event loop's thread: wake the waiting task, unless it gave up."""
        if not self.abandoned:
            trio.lowlevel.reschedule(self.task, result)


class CallbackThread:
    """A daemon thread running one call at a time, in order."""

    def __init__(self, name: str = "pmda_py-compat-callbacks") -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def run(self, fn: Callable[..., _T], *args: object) -> _T:
        """``fn(*args)`` in the thread (see the module docstring)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        await trio.lowlevel.checkpoint_if_cancelled()
        job = _Job(
            fn, args, contextvars.copy_context(), trio.lowlevel.current_trio_token(), trio.lowlevel.current_task()
        )
        self._jobs.put(job)

        def abort(_raise_cancel: object) -> trio.lowlevel.Abort:
            job.abandoned = True
            return trio.lowlevel.Abort.SUCCEEDED

        result: _T = await trio.lowlevel.wait_task_rescheduled(abort)
        return result

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            result = outcome.capture(job.context.run, job.fn, *job.args)
            try:
                job.token.run_sync_soon(job.deliver, result)
            except trio.RunFinishedError:
                pass  # the event loop is gone (an abandoned call outlived it)
