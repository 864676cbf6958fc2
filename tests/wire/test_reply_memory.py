"""Reply memory (pmda_py/wire/buffers.py): large fast-path replies of a
pipe agent in memfd pages, within limits on their number and bytes, each
descriptor closed with its buffer; everything else a bytearray."""

from __future__ import annotations

import gc
import os
import sys

import pytest

from pmda_py.pmapi import PmType
from pmda_py.wire import buffers
from pmda_py.wire.buffers import MIN_SHARED, ReplyMemory, SharedReply
from pmda_py.wire.result import FixedLayout, ResultBuilder

needs_splice = pytest.mark.skipif(not ReplyMemory.available(), reason="no memfd_create/splice (Linux, Python 3.10+)")


def _file(fd: int) -> tuple[int, int] | None:
    """The file ``fd`` is open on (device, inode), or None."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def test_until_enabled_every_reply_is_a_bytearray() -> None:
    mem = ReplyMemory()
    big = bytes(range(256)) * (MIN_SHARED // 256 + 1)
    out = mem.new(big)
    assert type(out) is bytearray and out == big and mem.count == 0


@needs_splice
def test_a_large_reply_gets_shared_memory_and_a_small_one_does_not(reply_memory: ReplyMemory) -> None:
    big = bytes(range(256)) * (MIN_SHARED // 256)
    shared = reply_memory.new(big)
    assert type(shared) is SharedReply and bytes(shared) == big
    assert os.fstat(shared.fd).st_size == len(big)
    small = reply_memory.new(big[:-1])
    assert type(small) is bytearray and small == big[:-1]
    assert (reply_memory.count, reply_memory.bytes, reply_memory.refused) == (1, len(big), 0)


@needs_splice
def test_shared_buffers_are_bounded_in_number_and_bytes(
    reply_memory: ReplyMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(buffers, "MAX_SHARED", 2)
    template = bytes(MIN_SHARED)
    kept = [reply_memory.new(template) for _ in range(3)]
    assert [type(b) for b in kept] == [SharedReply, SharedReply, bytearray]
    assert reply_memory.refused == 1
    monkeypatch.setattr(buffers, "MAX_SHARED", 10)
    monkeypatch.setattr(buffers, "MAX_SHARED_BYTES", 3 * MIN_SHARED)
    kept.append(reply_memory.new(template))  # the third: 3 * MIN_SHARED in all
    kept.append(reply_memory.new(template))
    assert [type(b) for b in kept[3:]] == [SharedReply, bytearray] and reply_memory.refused == 2


@needs_splice
def test_a_dropped_buffer_closes_its_descriptor(reply_memory: ReplyMemory) -> None:
    shared = reply_memory.new(bytes(MIN_SHARED))
    assert isinstance(shared, SharedReply)
    fd = shared.fd
    memfd = _file(fd)
    assert memfd is not None
    del shared
    gc.collect()
    assert _file(fd) != memfd  # closed (or the number since taken by another thread's file)
    assert (reply_memory.count, reply_memory.bytes) == (0, 0)


def _reply(insts: list[int], vals: list[int]) -> bytes:
    b = ResultBuilder()
    b.add_values(1000, PmType.U64, insts, vals)
    return b.encode()


@needs_splice
@pytest.mark.skipif(not hasattr(sys, "getrefcount"), reason="reference counts are CPython's")
def test_a_layout_writes_large_replies_in_shared_memory(reply_memory: ReplyMemory) -> None:
    """The same bytes as the general encoder's, in a SharedReply, and the
    two buffers taking turns as with bytearrays."""
    insts = list(range(MIN_SHARED // 20 + 1))  # 20 bytes a value: over MIN_SHARED
    layout = FixedLayout(_reply(insts, [0] * len(insts)), [0], [PmType.U64], 1)
    ids = set()
    for k in range(4):
        vals = [k * 7 + i for i in insts]
        out = layout.encode([vals])
        assert type(out) is SharedReply
        assert bytes(out) == _reply(insts, vals)
        ids.add(id(out))
    assert len(ids) == 2 and reply_memory.count == 2
