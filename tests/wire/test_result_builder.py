"""The fast RESULT encoder gives exactly the reference encoder's bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmda_py.pmapi import PmType
from pmda_py.wire import EventArray, EventRecord, ResultPdu, ValueSet, decode_pdu
from pmda_py.wire.result import ResultBuilder

insts = st.lists(st.integers(-(2**31), 2**31 - 1), min_size=0, max_size=6)

typed = st.one_of(
    st.tuples(st.just(PmType.I32), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just(PmType.U32), st.integers(0, 2**32 - 1)),
    st.tuples(st.just(PmType.I64), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just(PmType.U64), st.integers(0, 2**64 - 1)),
    st.tuples(st.just(PmType.FLOAT), st.floats(width=32, allow_nan=False)),
    st.tuples(st.just(PmType.DOUBLE), st.floats(allow_nan=False)),
    st.tuples(st.just(PmType.STRING), st.text(max_size=9)),
    st.tuples(st.just(PmType.AGGREGATE), st.binary(max_size=9)),
)


@st.composite
def value_sets(draw: st.DrawFn) -> tuple[int, int, list[int], list[object]] | tuple[int, int]:
    pm = draw(st.integers(0, 2**32 - 1))
    if draw(st.booleans()) and draw(st.booleans()):
        return (pm, draw(st.integers(-(2**31), 0)))
    type_ = draw(st.sampled_from([t for t in PmType if t in (0, 1, 2, 3, 4, 5, 6, 7)]))
    ins = draw(insts)
    vals = [draw(typed.filter(lambda tv: bool(tv[0] == type_)))[1] for _ in ins]
    return (pm, type_, ins, vals)


@given(st.lists(value_sets(), max_size=6), st.sampled_from([0, 8, 16, 24]))
def test_builder_matches_reference_encoder(items: list, flags: int) -> None:  # type: ignore[type-arg]
    b = ResultBuilder()
    vsets = []
    for it in items:
        if len(it) == 2:
            b.add_error(it[0], it[1])
            vsets.append(ValueSet.failed(it[0], it[1]) if it[1] < 0 else ValueSet(it[0]))
        else:
            pm, type_, ins, vals = it
            b.add_values(pm, type_, ins, vals)
            vsets.append(ValueSet.of(pm, type_, list(zip(ins, vals))) if ins else ValueSet(pm))
    raw = b.encode(flags)
    assert raw == ResultPdu(tuple(vsets), flags, 0).encode()
    assert decode_pdu(raw).encode() == raw


def test_builder_events_and_big_sets() -> None:
    arr = EventArray(False, (EventRecord(1, 2, 0x80000000, (), 7),))
    b = ResultBuilder()
    b.add_values(5, PmType.EVENT, [-1], [arr])
    n = 10000
    b.add_values(6, PmType.U64, list(range(n)), [2**64 - 1 - k for k in range(n)])
    b.add_values(7, PmType.U32, list(range(n)), list(range(n)))
    pdu = decode_pdu(b.encode())
    assert isinstance(pdu, ResultPdu)
    assert pdu.vsets[1].values[-1].value.value() == 2**64 - n  # type: ignore[union-attr]
    assert pdu.vsets[2].values[-1].value == n - 1
    assert pdu.vsets[0].values[0].value.event_array() == arr  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("type_", "value", "exc"),
    [
        (PmType.U32, 2**32, OverflowError),
        (PmType.I32, -(2**31) - 1, OverflowError),
        (PmType.I32, 1.5, TypeError),
        (PmType.U64, -1, struct.error),
        (PmType.DOUBLE, "x", struct.error),
        (PmType.EVENT, b"raw", TypeError),
    ],
)
def test_builder_rejects_bad_values(type_: int, value: object, exc: type[BaseException]) -> None:
    with pytest.raises(exc):
        ResultBuilder().add_values(1, type_, [0], [value])


def test_section_reuse_gives_identical_bytes() -> None:
    """The cached value-set section must give exactly the bytes of a full
    encode, and must not be reused when the shape changes."""
    from array import array

    from pmda_py.wire.result import SectionCache

    insts = array("I", range(5))
    cache = SectionCache()
    for k in range(4):
        b = ResultBuilder()
        b.add_values(1, PmType.U64, insts, [k * 10 + i for i in range(5)])
        b.add_values(2, PmType.DOUBLE, insts, [k + 0.5] * 5)
        b.add_error(3, -12358)
        cached = b.encode(cache=cache)
        assert cached == b.encode()
        assert decode_pdu(cached).vsets[0].values[4].value.value() == k * 10 + 4  # type: ignore[union-attr]
    # the instance array changed in place (same length, other ids): not the old section
    insts[2] = 42
    b = ResultBuilder()
    b.add_values(1, PmType.U64, insts, [1, 2, 3, 4, 5])
    assert b.encode(cache=cache) == b.encode()
    assert decode_pdu(b.encode(cache=cache)).vsets[0].values[2].inst == 42  # type: ignore[union-attr]
    # a different shape: full encode, still right
    b = ResultBuilder()
    b.add_values(1, PmType.U64, array("I", range(3)), [7, 8, 9])
    assert b.encode(cache=cache) == b.encode()
    # INSITU values live in the section: never cached
    b = ResultBuilder()
    b.add_values(1, PmType.U32, insts, [1, 2, 3, 4, 5])
    first = b.encode(cache=cache)
    b2 = ResultBuilder()
    b2.add_values(1, PmType.U32, insts, [6, 7, 8, 9, 10])
    assert b2.encode(cache=cache) != first
    assert b2.encode(cache=cache) == b2.encode()


packed_sets = st.lists(
    st.tuples(
        st.integers(0, 2**32 - 1),
        st.sampled_from([PmType.I64, PmType.U64, PmType.DOUBLE]),
        st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=5),
    ),
    min_size=1,
    max_size=6,
)


@given(packed_sets, st.data(), st.sampled_from([0, 16]))
def test_packed_run_matches_the_builder(
    sets: list[tuple[int, int, list[int]]], data: st.DataObject, flags: int
) -> None:
    """encode_packed_run (a table's whole answer in one piece) gives the
    builder's bytes, from scratch and from its cache (new values, same shape)."""
    from array import array

    from pmda_py.wire.result import PackedColumn, PackedRun, PackedRunCache, encode_packed_run

    token: object = object()
    cache = PackedRunCache()
    for _ in range(2):
        blobs = [data.draw(st.binary(min_size=8 * len(i), max_size=8 * len(i))) for _, _, i in sets]
        ref = ResultBuilder()
        for (pm, t, ins), blob in zip(sets, blobs):
            ref.add_fixed(pm, t, ins, PackedColumn(blob, 8))
        run = PackedRun(
            [s[0] for s in sets], [s[1] for s in sets], [array("I", s[2]) for s in sets], b"".join(blobs), token
        )
        assert encode_packed_run(run, flags) == ref.encode(flags)
        assert encode_packed_run(run, flags, cache=cache) == ref.encode(flags)
        assert cache.layout is not None  # the next fetch of this token moves values only
        decoded = decode_pdu(encode_packed_run(run, flags, cache=cache))
        assert isinstance(decoded, ResultPdu) and [v.pmid for v in decoded.vsets] == [s[0] & 0xFFFFFFFF for s in sets]


def test_packed_run_refuses_a_blob_of_the_wrong_size() -> None:
    from array import array

    from pmda_py.wire.result import PackedRun, encode_packed_run

    run = PackedRun([1, 2], [PmType.U64, PmType.U64], [array("I", [0, 1]), array("I", [5])], bytes(16), object())
    with pytest.raises(ValueError, match="8 bytes per value"):
        encode_packed_run(run)
