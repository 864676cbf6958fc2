"""The callback thread (pmda_py.compat.worker): one thread, calls in order,
results and exceptions handed back, and a cancelled call abandoned (left
running, its result dropped) without stopping the thread."""

from __future__ import annotations

import threading

import pytest
import trio

from pmda_py.compat.worker import CallbackThread


def test_results_exceptions_and_one_thread() -> None:
    worker = CallbackThread()

    def boom() -> None:
        raise ValueError("from the script")

    async def main() -> list[threading.Thread]:
        seen = [await worker.run(threading.current_thread) for _ in range(3)]
        assert await worker.run(lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(ValueError, match="from the script"):
            await worker.run(boom)
        return seen

    seen = trio.run(main)
    assert len(set(seen)) == 1 and seen[0] is not threading.main_thread()


def test_a_cancelled_call_is_abandoned_and_the_thread_goes_on() -> None:
    worker = CallbackThread()
    release, finished = threading.Event(), threading.Event()
    order: list[str] = []

    def slow() -> str:
        release.wait()
        order.append("slow")
        finished.set()
        return "dropped"

    async def first() -> object:
        with trio.move_on_after(0.05) as scope:
            await worker.run(slow)
        return scope.cancelled_caught

    assert trio.run(first) is True  # returned while slow() still waits
    assert order == []
    release.set()  # slow() ends after its event loop did: its result has nowhere to go
    assert finished.wait(10)

    async def second() -> str:
        with trio.fail_after(10):  # a dead thread would never answer
            return await worker.run(lambda: "next")

    assert trio.run(second) == "next"
    assert order == ["slow"]
