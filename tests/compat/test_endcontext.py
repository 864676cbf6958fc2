"""The endcontext callback keeps the one-callback-at-a-time rule: a client
context that ends while a batch of the script's callbacks still runs (its
request answered PM_ERR_AGAIN at the deadline) is not reported to the
script beside that batch, but first thing in the next one."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import trio

from pmda_py.compat.agent import AGENT


@pytest.fixture
def script_callbacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process-wide agent state a test changes, put back after it (and
    no log opened: the Install-time mode)."""
    monkeypatch.setenv("PCP_PYTHON_DOMAIN", "1")
    callbacks = dict(AGENT.callbacks)
    fields = ("pmda", "domain", "name", "pmdaname", "logfile", "helpfile")
    saved = {f: getattr(AGENT, f) for f in fields}
    try:
        yield
    finally:
        AGENT.callbacks.clear()
        AGENT.callbacks.update(callbacks)
        for f, v in saved.items():
            setattr(AGENT, f, v)


def test_endcontext_waits_for_a_running_batch(script_callbacks: None) -> None:
    from pmda_py.compat.pmda import MetricDispatch
    from pmda_py.compat.table import CompatTable

    table = CompatTable(MetricDispatch(417, "pmdaend", "end.log", "/nonexistent/help"))
    ended: list[tuple[int, str]] = []
    AGENT.callbacks["endcontext_callback"] = lambda ctx: ended.append((ctx, threading.current_thread().name))
    assert AGENT.lock.acquire(blocking=False)  # a batch still running in the worker thread
    try:
        table.end_context(7)
        assert ended == []  # not beside the batch
    finally:
        AGENT.lock.release()

    async def next_batch() -> None:
        await table.in_worker(lambda: ended.append((-1, "batch")))

    trio.run(next_batch)
    assert [c for c, _ in ended] == [7, -1]  # first thing in the next batch
    assert ended[0][1] != threading.main_thread().name
    table.end_context(8)  # no batch running: at once
    assert ended[-1] == (8, threading.current_thread().name)
