"""FixedLayout (the fast path's reply writer) against ResultBuilder (the
general encoder): the same bytes for new values of the same shape, and the
pack refuses a value outside its type."""

from __future__ import annotations

import struct
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmda_py.pmapi import PM_IN_NULL, PmType
from pmda_py.wire.result import FixedLayout, ResultBuilder

LIMITS = {
    PmType.I32: (-(1 << 31), (1 << 31) - 1),
    PmType.U32: (0, (1 << 32) - 1),
    PmType.I64: (-(1 << 63), (1 << 63) - 1),
    PmType.U64: (0, (1 << 64) - 1),
}
TYPES = [*LIMITS, PmType.FLOAT, PmType.DOUBLE]


def _values(t: int, n: int) -> st.SearchStrategy[list[Any]]:
    if t in LIMITS:
        lo, hi = LIMITS[PmType(t)]
        v: st.SearchStrategy[Any] = st.one_of(st.sampled_from([lo, hi, 0]), st.integers(lo, hi))
    else:
        v = st.one_of(st.floats(width=32 if t == PmType.FLOAT else 64), st.integers(-(2**53), 2**53))
    return st.lists(v, min_size=n, max_size=n)


# value sets: (type, instances or None for singular, or "err" for an error set)
sets_st = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(TYPES), st.none()),
        st.tuples(st.sampled_from(TYPES), st.lists(st.integers(0, 2**31), unique=True, min_size=1, max_size=8)),
        st.tuples(st.just(0), st.just("err")),
    ),
    min_size=1,
    max_size=10,
)


def _reply(sets: list[tuple[int, Any]], vals: list[list[Any]]) -> bytes:
    b = ResultBuilder()
    for k, ((t, insts), v) in enumerate(zip(sets, vals)):
        if insts == "err":
            b.add_error(1000 + k, -12345)
        else:
            b.add_values(1000 + k, t, [PM_IN_NULL] if insts is None else insts, v)
    return b.encode()


@given(data=st.data(), sets=sets_st, flags=st.sampled_from([0, 0x10]))
def test_layout_writes_the_builders_bytes(data: st.DataObject, sets: list[tuple[int, Any]], flags: int) -> None:
    def draw() -> list[list[Any]]:
        return [[] if i == "err" else data.draw(_values(t, 1 if i is None else len(i))) for t, i in sets]

    layout = FixedLayout(_reply(sets, draw()), [-1 if i == "err" else 0 for _t, i in sets], [t for t, _i in sets], 1)
    vals = draw()
    b = ResultBuilder()
    for k, ((t, insts), v) in enumerate(zip(sets, vals)):
        if insts == "err":
            b.add_error(1000 + k, -12345)
        else:
            b.add_values(1000 + k, t, [PM_IN_NULL] if insts is None else insts, v)
    assert bytes(layout.encode([[x for v in vals for x in v]], flags)) == b.encode(flags)


@pytest.mark.parametrize("t", list(LIMITS))
def test_pack_refuses_values_outside_the_type(t: PmType) -> None:
    lo, hi = LIMITS[t]
    layout = FixedLayout(_reply([(t, [1, 2])], [[lo, hi]]), [0], [t], 1)
    assert bytes(layout.encode([[hi, lo]])) == _reply([(t, [1, 2])], [[hi, lo]])
    for bad in ([lo - 1, 0], [0, hi + 1], [0, 1.5]):
        with pytest.raises(struct.error):
            layout.encode([bad])


def test_layout_refuses_a_reply_of_another_shape() -> None:
    data = _reply([(PmType.U64, [1, 2])], [[1, 2]])
    with pytest.raises(ValueError):
        FixedLayout(data, [0], [PmType.U32], 1)  # DPTR blocks, not INSITU words
    with pytest.raises(ValueError):
        FixedLayout(data, [0, 0], [PmType.U64, PmType.U64], 1)  # two sets announced, one in the reply


def _u64_layout() -> FixedLayout:
    return FixedLayout(_reply([(PmType.U64, [1, 2, 3])], [[0, 0, 0]]), [0], [PmType.U64], 1)


@pytest.mark.skipif(not hasattr(sys, "getrefcount"), reason="reference counts are CPython's")
def test_a_reply_still_held_is_never_written_again() -> None:
    """The reply is the layout's own buffer: while a reader holds it (the
    pump until its next request, a test keeping replies, a memoryview being
    written out), later replies go into another buffer and it stays as it was."""
    layout = _u64_layout()
    first = layout.encode([[1, 2, 3]])
    kept = bytes(first)
    second = layout.encode([[4, 5, 6]])  # `first` still held: the spare buffer
    assert second is not first and bytes(first) == kept
    view = memoryview(second)  # held through a view: that counts too
    third = layout.encode([[7, 8, 9]])
    assert third is not first and third is not second and bytes(first) == kept
    assert bytes(view) == _reply([(PmType.U64, [1, 2, 3])], [[4, 5, 6]])
    assert bytes(third) == _reply([(PmType.U64, [1, 2, 3])], [[7, 8, 9]])


@pytest.mark.skipif(not hasattr(sys, "getrefcount"), reason="reference counts are CPython's")
def test_a_reply_dropped_is_written_again_without_a_new_buffer() -> None:
    """A reader that drops each reply before the next request (or holds
    only the last one, as the pump does) costs no new buffer and no copy:
    the layout takes turns between its two buffers."""
    layout = _u64_layout()
    ids = set()
    reply = layout.encode([[1, 2, 3]])
    for k in range(10):
        ids.add(id(reply))
        reply = layout.encode([[k, k + 1, k + 2]])  # the previous reply held until this returns
        assert bytes(reply) == _reply([(PmType.U64, [1, 2, 3])], [[k, k + 1, k + 2]])
    assert len(ids) == 2
    del reply
    again = {id(layout.encode([[9, 9, 9]])) for _ in range(5)}  # each dropped at once
    assert len(again) == 1 and again <= ids
