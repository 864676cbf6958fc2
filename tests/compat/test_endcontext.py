"""The endcontext callback: under pmcd, a client whose context ends reaches
it as under the binding; and it keeps the one-callback-at-a-time rule: a client
context that ends while a batch of the script's callbacks still runs (its
request answered PM_ERR_AGAIN at the deadline) is not reported to the
script beside that batch, but first thing in the next one."""

from __future__ import annotations

import shlex
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from pmda_py.compat.agent import AGENT
from tests.compat.harness import COMPAT, SYSTEM_PYTHON, ScriptPmda, bed, require_binding
from tests.conftest import require
from tests.integration.pcpbed import PMCD, PrivatePmcd


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


ENDED = ScriptPmda(
    "ec",
    426,
    prelude="ENDED = []",
    init="""
        self.add_metric("ec.ended", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL,
                                               c_api.PM_SEM_DISCRETE, u))
        self.set_fetch_callback(lambda cluster, item, inst: [",".join(ENDED) or "none", 1])
        self.set_endcontext_callback(lambda ctx: ENDED.append(str(ctx)))
    """,
)


def _ended_under_pmcd(argv: list[str], script: Path, root: Path) -> list[str]:
    """``ec.ended`` as three clients of a private pmcd running ``argv
    SCRIPT`` see it, one after the other (each client's context ends as
    it exits, and pmcd tells the agent)."""
    root.mkdir()
    root.chmod(0o777)
    env = bed(root)
    line = f"ec\t426\tpipe\tbinary\t{shlex.join([*argv, str(script)])}"
    pmcd = PrivatePmcd(root, [line], "root {\n\tec\t426:*:*\n}\n", env=env)
    try:
        pmcd.start("ec.ended")
        return [pmcd.tool("pmprobe", "-v", "ec.ended").stdout.strip() for _ in range(3)]
    finally:
        pmcd.stop()


def test_endcontext_under_pmcd(root: Path) -> None:
    """A client that ends its context (pmcd tells the agent with a
    PM_ERR_NOTCONN PDU) reaches the script's endcontext callback with the
    context's number, under compat as under the binding."""
    require(Path(PMCD).exists(), "pmcd is not installed")
    require_binding()
    script, _pmns = ENDED.write(root)
    real = _ended_under_pmcd([SYSTEM_PYTHON], script, root / "real")
    ours = _ended_under_pmcd(COMPAT, script, root / "ours")
    # each client is context 0 of pmcd; the ends of the earlier ones (the
    # start's probe included) are seen by the later ones
    assert real == ['ec.ended 1 "0"', 'ec.ended 1 "0,0"', 'ec.ended 1 "0,0,0"'], real
    assert ours == real
