"""Where a repeated FETCH's time goes, stage by stage, in-process: the
profile behind the ratios to the floor in fetch_shapes.py.

    .venv/bin/python bench/fetch_breakdown.py [--shapes 1000x0,1000x10,1000x100]

For each shape (bench/shape_table.py), a dispatcher with the table mounted
answers the FETCH once (the general path learns the layout); then each
stage of the fast path is timed on its own, on the same data, with the
same calls the dispatcher makes (``FastFetch.encode`` and
``FixedLayout.encode``), and the whole request through the session as
pmcd's pipe would deliver it; malloc tuned as ``pmda-py run`` tunes it.  The floor (fetch_shapes.py's pre-built
reply) costs only the pipe: one read of the request and one write of the
reply.  Prints microseconds per FETCH (best of 5 runs) and per value; first, the
whole request in-process for each form of the table API (bench/shape_table.py's
BENCH_FORM: dict, Columns list, Columns array, PackedColumns).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import trio  # noqa: E402
from shape_table import FORMS, ShapeTable, parse  # noqa: E402

from pmda_py import logconfig  # noqa: E402
from pmda_py.config import Config, TableSpec  # noqa: E402
from pmda_py.dispatch import Dispatcher  # noqa: E402
from pmda_py.dispatch.mounts import Mount  # noqa: E402
from pmda_py.malloc import tune_malloc  # noqa: E402
from pmda_py.pmapi import pmid  # noqa: E402
from pmda_py.runtime.loader import build_dispatcher, start_tables  # noqa: E402
from pmda_py.runtime.pump import TrioRunner  # noqa: E402
from pmda_py.session import Request, Session  # noqa: E402
from pmda_py.wire import CredsPdu, FetchPdu  # noqa: E402
from pmda_py.wire.buffers import ReplyBuffer  # noqa: E402

_NUMBERS = frozenset((int, float))
_DICTS = frozenset((dict,))


def best(fn: Callable[[], Any], n: int) -> float:
    """Best of 5 runs of ``n`` calls, microseconds per call."""
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) / n)
    return min(out) * 1e6


async def breakdown(shape: str) -> list[tuple[str, float]]:
    os.environ["BENCH_SHAPE"] = shape
    dispatcher = build_dispatcher(Config(domain=254, tables=(TableSpec("bench", "shape_table:ShapeTable", "bench"),)))
    await start_tables(dispatcher, 254)
    singular, multi, n = parse(shape)
    pmids = tuple(pmid(254, 0, k) for k in range(singular)) + tuple(pmid(254, 1, k) for k in range(multi))
    frame = FetchPdu(pmids).encode()
    session = Session()
    session.start()
    session.receive_data(CredsPdu.cversion(0).encode())
    session.next_event()

    async def whole() -> bytes | ReplyBuffer:
        session.receive_data(frame)
        event = session.next_event()
        assert isinstance(event, Request)
        return session.send(await dispatcher.handle(event))

    reply = b""
    for _ in range(3):
        reply = bytes(await whole())
    values = singular + multi * n
    reps = max(3, 200_000 // max(values, 1))
    rows: list[tuple[str, float]] = []

    t0 = time.perf_counter()
    for _ in range(reps):
        await whole()
    rows.append(("whole request, in-process (session + dispatcher)", (time.perf_counter() - t0) / reps * 1e6))

    def decode() -> None:
        session.receive_data(frame)
        event = session.next_event()
        assert isinstance(event, Request)
        session.send(dispatcher_reply)

    dispatcher_reply = await dispatcher.handle(Request(FetchPdu(pmids), 0))
    rows.append(("  session: frame, decode (kept), reply bytes", best(decode, reps)))

    fast = dispatcher.planner.layouts()[pmids]
    table = dispatcher.mounts[0].table
    answer: Any = None

    async def call() -> None:
        nonlocal answer
        answer = (await dispatcher.runner.gather([(table, "fetch", lambda: table.fetch(None))]))[0]  # type: ignore[arg-type]

    t0 = time.perf_counter()
    for _ in range(reps):
        await call()
    rows.append(
        (
            "  the table's fetch via the runner (awaits nothing: no deadline)",
            (time.perf_counter() - t0) / reps * 1e6,
        )
    )
    assert not isinstance(fast, int)
    rows.append(("  fast path in all (FastFetch.encode)", best(lambda: fast.encode([answer], 0), reps)))
    get = answer.get
    single = list(map(get, fast.singles))
    dicts = list(map(get, fast.multis))
    flat = list(chain.from_iterable(map(dict.values, dicts)))
    rows.append(("    singular values out of the dict (map get)", best(lambda: list(map(get, fast.singles)), reps)))
    rows.append(
        ("    their types checked (int/float only)", best(lambda: _NUMBERS.issuperset(map(type, single)), reps))
    )
    if fast.multis:
        rows.append(("    {inst: value} dicts out of the answer", best(lambda: list(map(get, fast.multis)), reps)))
        rows.append(
            (
                "    instance ids compared with the layout's",
                best(lambda: list(map(len, dicts)) != fast.lens or list(chain.from_iterable(dicts)) != fast.keys, reps),
            )
        )
        rows.append(
            (
                "    values chained out of the dicts",
                best(lambda: list(chain.from_iterable(map(dict.values, dicts))), reps),
            )
        )
        rows.append(("    their types checked", best(lambda: _NUMBERS.issuperset(map(type, flat)), reps)))
    layout = fast.layout
    groups: list[Any] = [single, flat if fast.multis else (), (), b"", b"", b""]
    rows.append(("    FixedLayout.encode in all", best(lambda: layout.encode(groups, 0), reps)))

    def pack() -> list[bytearray]:
        src = layout._src
        for s, vals, a in zip(layout.structs, groups, src):
            s.pack_into(a, 0, *vals)
        return src

    rows.append(("      struct pack (and range check) to bytes", best(pack, reps)))
    pack()

    def place() -> ReplyBuffer:
        for dview, sview, _g, _taken, _step, _fmt in layout._reply.moves:
            assert sview is not None
            dview[:] = sview
        return layout._reply.data

    rows.append((f"      strided value moves ({len(layout._reply.moves)})", best(place, reps)))
    out = place()
    rows.append(("      reply buffer to bytes", best(lambda: bytes(out), reps)))
    r, w = os.pipe()
    try:
        big = len(reply) <= 65536
        if big:
            rows.append(
                (
                    "the floor's own work: write the reply to a pipe, read it back",
                    best(lambda: os.read(r, os.write(w, reply)), reps),
                )
            )
    finally:
        os.close(r)
        os.close(w)
    assert struct.unpack_from("!i", reply, 4)[0] != 0x7000
    return rows


async def by_form(shape: str, form: str) -> float:
    """Best-of-5 microseconds of the whole request, in-process, with the
    table answering in ``form`` (no pipe, no other process: steadier than
    fetch_shapes.py's figures on a shared machine)."""
    os.environ["BENCH_SHAPE"], os.environ["BENCH_FORM"] = shape, form
    try:
        dispatcher = build_dispatcher(
            Config(domain=254, tables=(TableSpec("bench", "shape_table:ShapeTable", "bench"),))
        )
        await start_tables(dispatcher, 254)
    finally:
        del os.environ["BENCH_FORM"]
    singular, multi, n = parse(shape)
    pmids = tuple(pmid(254, 0, k) for k in range(singular)) + tuple(pmid(254, 1, k) for k in range(multi))
    return await whole_request(dispatcher, pmids, singular + multi * n)


async def two_tables(shape: str) -> float:
    """Best-of-5 microseconds of the whole request, in-process, across two
    tables of ``shape`` (dict form) mounted side by side, as ``pmda-py run``
    mounts them: what a FETCH spanning tables costs (each table's call
    through the runner)."""
    os.environ["BENCH_SHAPE"] = shape
    tables = []
    try:
        for base in (0, 10):
            os.environ["BENCH_BASE"] = str(base)
            tables.append(ShapeTable())
    finally:
        del os.environ["BENCH_BASE"]
    dispatcher = Dispatcher(254, [Mount(t, f"bench{k}", f"bench{k}") for k, t in enumerate(tables)], TrioRunner())
    await dispatcher.start_tables(trio.move_on_after)
    singular, multi, n = parse(shape)
    pmids = tuple(
        pmid(254, c, k) for base in (0, 10) for c, count in ((base, singular), (base + 1, multi)) for k in range(count)
    )
    return await whole_request(dispatcher, pmids, 2 * (singular + multi * n))


async def whole_request(dispatcher: Dispatcher, pmids: tuple[int, ...], values: int) -> float:
    """Best-of-5 microseconds of a FETCH of ``pmids`` through a session and
    ``dispatcher`` (decode, dispatch, reply bytes), after 3 to warm up."""
    frame = FetchPdu(pmids).encode()
    session = Session()
    session.start()
    session.receive_data(CredsPdu.cversion(0).encode())
    session.next_event()

    async def whole() -> None:
        session.receive_data(frame)
        event = session.next_event()
        assert isinstance(event, Request)
        session.send(await dispatcher.handle(event))

    for _ in range(3):
        await whole()
    reps = max(3, 100_000 // max(values, 1))
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            await whole()
        out.append((time.perf_counter() - t0) / reps)
    return min(out) * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="1000x0,100x10,1000x10,1000x100")
    args = p.parse_args()
    tune_malloc()  # as pmda-py run does
    logconfig.configure(None, level="warning", redirect_stderr=False)  # the tables' mount lines are not figures
    print("the whole request in-process by form of the table API, us/FETCH (best of 5)")
    print(f"{'shape':10} " + " ".join(f"{f:>8}" for f in FORMS) + f" {'2 tables':>9}")
    for shape in args.shapes.split(","):
        if parse(shape)[1]:
            forms = " ".join(f"{trio.run(by_form, shape, f):8.1f}" for f in FORMS)
            print(f"{shape:10} {forms} {trio.run(two_tables, shape):9.1f}", flush=True)
    print("(2 tables: two dict-form tables of the shape side by side, one FETCH of both)")
    for shape in args.shapes.split(","):
        singular, multi, n = parse(shape)
        values = singular + multi * n
        rows = trio.run(breakdown, shape)
        print(f"\n{shape}: {values} values          us/FETCH   ns/value")
        for name, us in rows:
            print(f"{name:62} {us:9.1f} {us * 1000 / values:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
