"""Property tests: every PDU round-trips; arbitrary bytes raise only our error."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmda_py.errors import PmErr, WireFormatError
from pmda_py.wire import DECODERS, FetchPdu, PduReader, PduType, decode_pdu
from tests.strategies import pdus


@given(pdus)
def test_encode_decode_roundtrip(pdu: object) -> None:
    raw = pdu.encode()  # type: ignore[attr-defined]
    assert struct.unpack_from("!i", raw)[0] == len(raw)
    back = decode_pdu(raw)
    assert back == pdu
    assert back.encode() == raw


@given(st.lists(pdus, min_size=1, max_size=6), st.data())
def test_framer_splits_concatenated_stream(items: list[object], data: st.DataObject) -> None:
    stream = b"".join(p.encode() for p in items)  # type: ignore[attr-defined]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    reader = PduReader()
    got = []
    prev = 0
    for c in [*cuts, len(stream)]:
        reader.receive_data(stream[prev:c])
        prev = c
        while (p := reader.next_pdu()) is not None:
            got.append(p)
    assert got == items


def test_a_pdu_read_whole_is_its_own_frame() -> None:
    # pmcd's requests usually arrive one per read: such bytes are the frame
    # itself, not copied into the buffer and out again; anything else goes
    # through the buffer
    one = FetchPdu((1, 2, 3)).encode()
    reader = PduReader()
    reader.receive_data(one)
    assert reader.next_frame() is one
    assert reader.pending == 0 and reader.next_frame() is None
    reader.receive_data(one + one[:5])  # one and a bit: framed from the buffer
    assert reader.next_frame() == one and reader.pending == 5
    reader.receive_data(one[5:])
    assert reader.next_frame() == one and reader.pending == 0
    reader.receive_data(bytearray(one))  # not bytes: copied
    frame = reader.next_frame()
    assert frame == one and type(frame) is bytes
    reader.receive_data(one[:7])  # a header cut short, then the rest
    assert reader.next_frame() is None and reader.pending == 7
    reader.receive_data(one[7:])
    assert reader.next_frame() == one


@given(st.binary(max_size=300))
def test_arbitrary_bytes_into_framer(data: bytes) -> None:
    reader = PduReader(max_length=1 << 16)
    reader.receive_data(data)
    for _ in range(len(data) + 1):
        try:
            if reader.next_pdu() is None:
                break
        except WireFormatError as err:
            assert err.pm_code in (PmErr.IPC, PmErr.TOOBIG)
            if reader.pending and err.pm_code == PmErr.IPC and "PDU length" not in str(err):
                continue  # a decode error consumes only that PDU
            break


@pytest.mark.parametrize("pdu_type", sorted(DECODERS), ids=lambda t: PduType(t).name)
@given(body=st.binary(max_size=200), from_=st.integers(-5, 5))
def test_arbitrary_bodies_into_each_decoder(pdu_type: int, body: bytes, from_: int) -> None:
    raw = struct.pack("!iii", 12 + len(body), pdu_type, from_) + body
    try:
        pdu = decode_pdu(raw)
    except WireFormatError as err:
        assert err.pm_code == PmErr.IPC
    else:
        # whatever was accepted re-encodes to a PDU that decodes to the same
        # value, with a header that states its true length
        again = pdu.encode()
        assert struct.unpack_from("!ii", again) == (len(again), pdu_type)
        assert decode_pdu(again) == pdu


@given(pdus, st.data())
def test_mutated_pdus_decode_or_raise_ipc(pdu: object, data: st.DataObject) -> None:
    raw = bytearray(pdu.encode())  # type: ignore[attr-defined]
    for _ in range(data.draw(st.integers(1, 4))):
        k = data.draw(st.integers(12, max(12, len(raw) - 1)))
        if k < len(raw):
            raw[k] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(12, len(raw)))
    mutated = bytes(raw[:cut])
    mutated = struct.pack("!i", len(mutated)) + mutated[4:]
    try:
        decode_pdu(mutated)
    except WireFormatError as err:
        assert err.pm_code == PmErr.IPC


def test_oversized_length_refused_before_allocation() -> None:
    reader = PduReader(max_length=4096)
    reader.receive_data(struct.pack("!iii", 0x7FFFFFF0, 0x7003, 0))
    with pytest.raises(WireFormatError) as info:
        reader.next_frame()
    assert info.value.pm_code == PmErr.TOOBIG
    assert reader.pending == 12  # nothing was read or allocated for the body
    with pytest.raises(WireFormatError):  # stays broken
        reader.next_frame()


@pytest.mark.parametrize("length", [-1, 0, 4, 11])
def test_impossible_length_is_ipc(length: int) -> None:
    reader = PduReader()
    reader.receive_data(struct.pack("!iii", length, 0x7003, 0))
    with pytest.raises(WireFormatError) as info:
        reader.next_frame()
    assert info.value.pm_code == PmErr.IPC


def test_truncated_stream_is_reported() -> None:
    reader = PduReader()
    reader.receive_data(struct.pack("!iii", 16, 0x7000, 0) + b"\0\0")
    assert reader.next_frame() is None
    reader.receive_data(b"")
    assert reader.truncated
    assert reader.needed() == 2


def test_negative_type_is_ipc() -> None:
    with pytest.raises(WireFormatError):
        decode_pdu(struct.pack("!iii", 12, -5, 0))
