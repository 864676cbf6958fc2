"""Shared replies spliced into pmcd's pipe (pmda_py/runtime/pipe.py,
pmda_py/wire/buffers.py): the bytes arrive as written, a buffer whose
pages are still in the pipe is never written again (however many replies
a client leaves unread), and an output that takes no splices gets writes."""

from __future__ import annotations

import fcntl
import gc
import os
import socket
import struct
import sys
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
import trio

from pmda_py.pmapi import PmType, pmid
from pmda_py.runtime.pipe import PipeStream, _grow_pipe
from pmda_py.testing.client import open_pipe_pmda
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import FetchPdu, ResultPdu, ValueBlock, buffers
from pmda_py.wire.buffers import MIN_SHARED, ReplyMemory, SharedReply
from pmda_py.wire.result import FixedLayout, ResultBuilder
from tests.tables.counting import INSTS, METRICS, value

pytestmark = [
    pytest.mark.skipif(not ReplyMemory.available(), reason="no memfd_create/splice (Linux, Python 3.10+)"),
    pytest.mark.skipif(not hasattr(sys, "getrefcount"), reason="buffer reuse follows CPython's reference counts"),
]

REPO = Path(__file__).resolve().parents[2]
INSTS_BIG = list(range(MIN_SHARED // 20 + 1))  # a U64 value takes 20 bytes of a RESULT


def _reply(vals: list[int]) -> bytes:
    b = ResultBuilder()
    b.add_values(1000, PmType.U64, INSTS_BIG, vals)
    return b.encode()


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe ``fd`` reads."""
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


def _read(fd: int, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        assert chunk, "the pipe ended early"
        out += chunk
    return bytes(out)


@asynccontextmanager
async def _channel() -> AsyncIterator[tuple[PipeStream, int, int]]:
    """pmcd's two pipes around a PipeStream: the stream, the fd pmcd reads
    replies from, and the fd it writes requests to."""
    r, w = os.pipe()
    _grow_pipe(w)
    req_r, req_w = os.pipe()
    stream = PipeStream(req_r, w)
    try:
        yield stream, r, req_w
    finally:
        await stream.aclose()
        os.close(r)
        os.close(req_w)


async def test_replies_left_in_the_pipe_keep_their_bytes(reply_memory: ReplyMemory) -> None:
    """Three replies spliced and none read: each buffer is held by the
    stream, so the layout writes the third into a new buffer rather than
    into the first one's pages, which the pipe still holds; once the reader
    has taken them, the next send lets them go."""
    layout = FixedLayout(_reply([0] * len(INSTS_BIG)), [0], [PmType.U64], 1)
    r, w = os.pipe()
    _grow_pipe(w)
    stream = PipeStream(os.dup(r), w)  # reads nothing here
    try:
        sent = []
        for k in range(3):
            vals = [k * 1000 + i for i in INSTS_BIG]
            out = layout.encode([vals])
            assert type(out) is SharedReply
            await stream.send_all(memoryview(out))
            sent.append(_reply(vals))
            del out
        assert stream.spliced == 3 and stream.held == 3 and reply_memory.count == 3
        for expected in sent:
            assert _read(r, len(expected)) == expected
        await stream.send_all(b"\0\0\0\x0c\0\0\x70\x01\0\0\0\0")  # the next reply lets them go
        assert stream.held == 0
        gc.collect()
        assert reply_memory.count == 2  # the layout's two buffers; the third went with the stream's hold
    finally:
        await stream.aclose()
        os.close(r)


async def test_a_reply_read_before_the_next_request_leaves_one_buffer(reply_memory: ReplyMemory) -> None:
    """The usual case: pmcd reads each reply before it sends its next
    request, so reading that request lets the reply go, and the layout
    writes the same buffer every time (nothing else is made)."""
    layout = FixedLayout(_reply([0] * len(INSTS_BIG)), [0], [PmType.U64], 1)
    request = FetchPdu((1000,)).encode()
    async with _channel() as (stream, r, req_w):
        ids = set()
        for k in range(6):
            os.write(req_w, request)
            assert await stream.receive_some() == request
            assert stream.held == 0
            vals = [k + i for i in INSTS_BIG]
            out = layout.encode([vals])
            ids.add(id(out))
            await stream.send_all(memoryview(out))
            assert stream.held == 1
            del out
            assert _read(r, len(_reply(vals))) == _reply(vals)
        assert len(ids) == 1 and reply_memory.count == 1 and stream.spliced == 6


async def test_a_request_read_before_the_reply_is_keeps_it_held(reply_memory: ReplyMemory) -> None:
    """A client that sends its next request before it has read the last
    reply (pmcd does not, a pipelining test client might): reading that
    request must not let the unread reply go, so the layout writes its
    other buffer."""
    layout = FixedLayout(_reply([0] * len(INSTS_BIG)), [0], [PmType.U64], 1)
    request = FetchPdu((1000,)).encode()
    async with _channel() as (stream, r, req_w):
        first = layout.encode([[1] * len(INSTS_BIG)])
        await stream.send_all(memoryview(first))
        del first
        os.write(req_w, request)
        assert await stream.receive_some() == request
        assert stream.held == 1  # still in the pipe
        second = layout.encode([[2] * len(INSTS_BIG)])
        await stream.send_all(memoryview(second))
        assert _read(r, len(second)) == _reply([1] * len(INSTS_BIG))
        assert _read(r, len(second)) == _reply([2] * len(INSTS_BIG))
        assert reply_memory.count == 2


async def test_an_output_that_takes_no_splices_gets_writes(reply_memory: ReplyMemory) -> None:
    """splice(2) needs a pipe at one end: to a socket it is refused, and
    the stream writes instead, from then on."""
    layout = FixedLayout(_reply([0] * len(INSTS_BIG)), [0], [PmType.U64], 1)
    a, b = socket.socketpair()
    r, _w = os.pipe()
    os.close(_w)
    stream = PipeStream(r, os.dup(a.fileno()))
    try:
        vals = [7 + i for i in INSTS_BIG]
        out = layout.encode([vals])
        expected = _reply(vals)
        async with trio.open_nursery() as nursery:
            got = bytearray()

            async def reader() -> None:
                sock = trio.socket.from_stdlib_socket(b)
                while len(got) < len(expected):
                    got.extend(await sock.recv(1 << 20))

            nursery.start_soon(reader)
            await stream.send_all(memoryview(out))
        assert bytes(got) == expected
        assert not stream.splicing and stream.spliced == 0 and stream.held == 0
    finally:
        await stream.aclose()
        a.close()
        b.close()


@pytest.mark.parametrize("table", ["CountingPacked=counting", "CountingArray=countingarr"])
async def test_a_client_that_reads_late_gets_each_fetch_s_own_values(table: str, tmp_path: Path) -> None:
    """A pipe agent answering large fast-path FETCHes: the client sends
    three requests and reads no reply until all three wait in the pipe
    together; each must show its own fetch's values."""
    log = tmp_path / "pmda.log"
    argv = pmda_py_argv("run", "-d", "250", "-l", str(log), "--table", f"tests.tables.counting:{table}")
    pmids = [pmid(250, 4090, k) for k in range(METRICS)]
    async with open_pipe_pmda(argv, cwd=str(REPO)) as pmda:
        request = FetchPdu(tuple(pmids)).encode()
        for _ in range(2):  # the first is the general path's; the layout is learnt from it
            size = len(await pmda.request_raw(request))
        for _ in range(3):
            await pmda.send_raw(request)
        fd = pmda.stream.receive_stream.fileno()  # type: ignore[attr-defined]
        with trio.fail_after(30):
            while _unread(fd) < 3 * size:  # noqa: ASYNC110 -- a pipe's fill, no event to wait for
                await trio.sleep(0.01)
        replies = [await pmda.receive() for _ in range(3)]
    for n, reply in enumerate(replies, start=3):
        assert isinstance(reply, ResultPdu)
        assert [vs.pmid for vs in reply.vsets] == pmids
        for k, vs in enumerate(reply.vsets):
            got = [(v.inst, v.value.value() if isinstance(v.value, ValueBlock) else None) for v in vs.values]
            assert got == [(i, value(n, k, i)) for i in range(INSTS)], f"fetch {n}, metric {k}"
    text = log.read_text()
    spliced = [int(w.split("=")[1]) for w in text.split() if w.startswith("replies_spliced=")]
    assert spliced and spliced[0] >= 4, text  # the second fetch's reply on: the fast path's, spliced


async def test_a_reply_larger_than_the_pipe_is_spliced_as_the_reader_drains_it(reply_memory: ReplyMemory) -> None:
    """A 64 KiB pipe and a reply three times that: the stream waits for
    room between splices while a reader takes the bytes."""
    insts = list(range(3 * MIN_SHARED // 20))
    b = ResultBuilder()
    b.add_values(1000, PmType.U64, insts, [0] * len(insts))
    layout = FixedLayout(b.encode(), [0], [PmType.U64], 1)
    b = ResultBuilder()
    b.add_values(1000, PmType.U64, insts, [i * 3 for i in insts])
    expected = b.encode()
    r, w = os.pipe()  # the default size: 64 KiB on Linux
    stream = PipeStream(os.dup(r), w)
    got = bytearray()
    try:
        async with trio.open_nursery() as nursery:

            async def reader() -> None:
                while len(got) < len(expected):
                    await trio.lowlevel.wait_readable(r)
                    got.extend(os.read(r, 1 << 16))

            os.set_blocking(r, False)
            nursery.start_soon(reader)
            await stream.send_all(memoryview(layout.encode([[i * 3 for i in insts]])))
        assert bytes(got) == expected and stream.spliced == 1
    finally:
        await stream.aclose()
        os.close(r)


async def test_reaching_the_shared_memory_limit_is_logged_once(
    reply_memory: ReplyMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the limit a large reply is a bytearray, written: the pipe end
    says so once, however many follow."""
    monkeypatch.setattr(buffers, "MAX_SHARED", 0)
    layout = FixedLayout(_reply([0] * len(INSTS_BIG)), [0], [PmType.U64], 1)
    r, w = os.pipe()
    _grow_pipe(w)
    stream = PipeStream(os.dup(r), w)
    try:
        with structlog.testing.capture_logs() as logs:
            for k in range(3):
                vals = [k + i for i in INSTS_BIG]
                out = layout.encode([vals])
                assert type(out) is bytearray
                await stream.send_all(out)
                assert _read(r, len(out)) == _reply(vals)
        assert [e["event"] for e in logs] == ["reply_memory_limit"], logs
        assert reply_memory.refused >= 2 and stream.spliced == 0
    finally:
        await stream.aclose()
        os.close(r)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_a_pipe_agent_answering_in_turn_writes_one_buffer(tmp_path: Path) -> None:
    """A real ``pmda-py run`` answering large FETCHes that the client reads
    before asking again (as pmcd does): each reply is let go when the next
    request is read, so the agent keeps one shared reply buffer, not two,
    and every reply still has its own fetch's values."""
    log = tmp_path / "pmda.log"
    argv = pmda_py_argv("run", "-d", "250", "-l", str(log), "--table", "tests.tables.counting:CountingPacked=counting")
    pmids = [pmid(250, 4090, k) for k in range(METRICS)]
    async with open_pipe_pmda(argv, cwd=str(REPO)) as pmda:
        for n in range(1, 9):
            reply = await pmda.request(FetchPdu(tuple(pmids)), ResultPdu)
            got = [v.value.value() for v in reply.vsets[-1].values if isinstance(v.value, ValueBlock)]
            assert got == [value(n, METRICS - 1, i) for i in range(INSTS)], f"fetch {n}"
        memfds = _reply_files(pmda.pid)
        assert len(memfds) == 1, memfds


def _reply_files(pid: int) -> dict[int, list[str]]:
    """The shared reply buffers process ``pid`` holds, by memfd inode (each
    is open twice, ours and the mapping's), with their descriptors."""
    fds = Path(f"/proc/{pid}/fd")
    found: dict[int, list[str]] = {}
    for p in fds.iterdir():
        if "memfd:pmda_py-reply" in os.readlink(p):
            found.setdefault(p.stat().st_ino, []).append(p.name)
    return found
