"""Every PDU captured from real PCP decodes completely and re-encodes to the
identical bytes, fed whole, byte by byte, split at every boundary and
concatenated with its neighbours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pmda_py.wire import (
    DECODERS,
    LabelPdu,
    PduReader,
    PduType,
    ResultPdu,
    TextPdu,
    UnknownPdu,
    ValFmt,
    decode_pdu,
)
from tests.conftest import PDUS

CAPTURES = sorted(PDUS.glob("*.jsonl"))


def _load(path: Path) -> list[bytes]:
    return [bytes.fromhex(json.loads(line)["hex"]) for line in path.read_text().splitlines() if line.strip()]


def test_corpus_present() -> None:
    assert len(CAPTURES) >= 7, f"golden captures missing under {PDUS}"
    assert sum(len(_load(p)) for p in CAPTURES) >= 1000


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_decode_reencode_identical(path: Path) -> None:
    for n, raw in enumerate(_load(path), 1):
        pdu = decode_pdu(raw)
        assert not isinstance(pdu, UnknownPdu), f"{path.name}#{n}: undecoded type"
        assert pdu.encode() == raw, f"{path.name}#{n}: {type(pdu).__name__} re-encodes differently"
        # Value-level round trip: decode(encode(obj)) == obj
        assert decode_pdu(pdu.encode()) == pdu


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_framer_whole_stream_and_byte_by_byte(path: Path) -> None:
    frames = _load(path)
    stream = b"".join(frames)
    reader = PduReader()
    reader.receive_data(stream)
    got = []
    while (pdu := reader.next_pdu()) is not None:
        got.append(pdu.encode())
    assert got == frames
    reader = PduReader()
    got = []
    for k in range(len(stream)):
        reader.receive_data(stream[k : k + 1])
        while (pdu := reader.next_pdu()) is not None:
            got.append(pdu.encode())
    assert got == frames
    assert reader.pending == 0


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_framer_split_at_every_boundary(path: Path) -> None:
    frames = _load(path)[:40]
    for raw in frames:
        for cut in range(1, len(raw)):
            reader = PduReader()
            reader.receive_data(raw[:cut])
            assert reader.next_frame() is None
            reader.receive_data(raw[cut:])
            assert reader.next_frame() == raw


def test_every_pdu_type_has_a_decoder() -> None:
    missing = {t for t in PduType if t not in DECODERS and t != PduType.CONTROL_REQ}
    assert not missing


def _first(path: str, want: type, pred=lambda p: True):  # type: ignore[no-untyped-def]
    for raw in _load(PDUS / path):
        pdu = decode_pdu(raw)
        if isinstance(pdu, want) and pred(pdu):
            return pdu
    raise AssertionError(f"no {want.__name__} in {path}")


def test_decoded_values_match_dbpmda_transcript() -> None:
    # dbpmda_simple.dbpmda.out: simple.time.user double 0, colour INSITU 1/101/201
    res = _first("dbpmda_simple.jsonl", ResultPdu, lambda p: len(p.vsets) == 5)
    color = res.vsets[1]
    assert color.valfmt == ValFmt.INSITU
    assert [v.value for v in color.values] == [1, 101, 201]
    user = res.vsets[2]
    assert user.valfmt == ValFmt.DPTR
    assert user.values[0].value.value() == 0.0


def test_text_ident_little_endian_quirk() -> None:
    text = _first("dbpmda_simple.jsonl", TextPdu)
    assert TextPdu.swapped_ident(text.ident) == 0x3F400000  # simple.numfetch


def test_label_json_and_index() -> None:
    lab = _first("dbpmda_simple.jsonl", LabelPdu, lambda p: p.type == 2 and p.sets)
    assert lab.sets[0].json == b'{"role":"testing"}'
    assert lab.sets[0].as_dict() == {"role": '"testing"'}


def test_event_arrays_decode() -> None:
    found = 0
    for raw in _load(PDUS / "dbpmda_sample.jsonl"):
        pdu = decode_pdu(raw)
        if isinstance(pdu, ResultPdu):
            for vs in pdu.vsets:
                for v in vs.values:
                    blk = v.value
                    if not isinstance(blk, int) and blk.vtype in (9, 10):
                        arr = blk.event_array()
                        assert arr.highres == (blk.vtype == 10)
                        # structural re-encode matches apart from event-parameter padding
                        assert len(arr.encode()) == len(blk.payload)
                        found += 1
    assert found > 5
