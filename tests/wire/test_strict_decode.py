"""Our replies pass PCP 7's strictest decoders (tests/wire/strict.py, a
transcription of libpcp's p_*.c checks): the real PMDAs' replies in the
golden captures (which validates the transcription), every reply our daemon
gives to a sweep of requests over MMV corpus files and the simple table, and
every reply-type PDU the encoders produce from hypothesis-generated content."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmda_py.mmv.table import MmvTable
from pmda_py.pmapi import LabelType, TextType
from pmda_py.testing.client import PmdaClient
from pmda_py.testing.fixtures import PmdaFactory
from pmda_py.wire import decode_pdu
from pmda_py.wire.pdus import (
    CredsPdu,
    DescPdu,
    DescReqPdu,
    ErrorPdu,
    FetchPdu,
    InstancePdu,
    InstanceReqPdu,
    LabelPdu,
    LabelReqPdu,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    ResultPdu,
    TextPdu,
    TextReqPdu,
)
from tests.conftest import PDUS
from tests.mmv.corpus import MMV
from tests.strategies import pdus
from tests.wire.strict import CHECKED, problems

CAPTURES = sorted(PDUS.glob("*.jsonl"))
#: corpus files with indoms, strings, labels at every level, v1 to v3
FILES = ["qa_v3_labels", "py_v1_alltypes", "qa_v1_instances_dogs", "reg_v3_labels255", "qa_v2_genstats"]


def _replies(path: Path) -> list[bytes]:
    out = []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if item["dir"] == "from_pmda":
            out.append(bytes.fromhex(item["hex"]))
    return out


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_real_pmda_replies_pass(path: Path) -> None:
    """The transcription accepts what real PMDAs send (else it is wrong)."""
    replies = _replies(path)
    if path.stem.startswith("pmcd_client"):
        assert replies == []  # client <-> pmcd traffic: no PMDA replies in it
        return
    assert replies, path
    bad = [(r[:24].hex(), problems(r)) for r in replies if problems(r)]
    assert bad == []


def test_the_checks_can_fail() -> None:
    """Each check refuses what libpcp refuses (bytes patched from good PDUs)."""
    text = TextPdu(1, "abc").encode()
    assert problems(text[:-1] + b"") != []  # length no longer matches the header
    unpadded = bytearray(text[:-1])
    unpadded[0:4] = len(unpadded).to_bytes(4, "big")
    assert any("padded" in p for p in problems(bytes(unpadded)))
    inst = bytearray(InstancePdu(5, ()).encode() + b"\0\0\0\0")
    inst[0:4] = len(inst).to_bytes(4, "big")
    assert any("too long" in p for p in problems(bytes(inst)))
    res = bytearray(ResultPdu((), sec=0x20).encode())
    assert any("state" in p for p in problems(bytes(res)))
    creds = bytearray(CredsPdu((1, 2)).encode())
    creds[12:16] = (3).to_bytes(4, "big")
    assert problems(bytes(creds)) != []
    ids = bytearray(PmnsIdsPdu((1,)).encode())
    ids[16:20] = (0).to_bytes(4, "big")
    assert problems(bytes(ids)) != []


async def _sweep(pmda: PmdaClient, root: str) -> list[bytes]:
    """Every reply to a sweep of requests below ``root``."""
    replies = [pmda.creds.encode()] if pmda.creds is not None else []

    async def ask(pdu: object) -> None:
        replies.append(await pmda.request_raw(pdu.encode()))  # type: ignore[attr-defined]

    names = sorted(await pmda.traverse(root))
    await ask(PmnsTraversePdu(root))
    await ask(PmnsChildPdu(root, 0))
    await ask(PmnsChildPdu(root, 1))
    await ask(PmnsNamesPdu(("no.such.name",)))
    pmids = []
    for name in names:
        await ask(PmnsNamesPdu((name,)))  # one name per request, as pmcd asks
        p = await pmda.pmid(name)
        pmids.append(p)
        await ask(PmnsIdsPdu((p,)))
        await ask(DescReqPdu(p))
        for kind in (TextType.ONELINE, TextType.HELP):
            await ask(TextReqPdu(p, kind | TextType.PMID))
        for level in (LabelType.CLUSTER, LabelType.ITEM, LabelType.DOMAIN):
            await ask(LabelReqPdu(p, level))
        await ask(FetchPdu((p,)))
        d = await pmda.desc(p)
        if d.indom != 0xFFFFFFFF:
            await ask(InstanceReqPdu(d.indom))
            await ask(InstanceReqPdu(d.indom, 0))
            await ask(InstanceReqPdu(d.indom, name="no such instance"))
            for level in (LabelType.INDOM, LabelType.INSTANCES):
                await ask(LabelReqPdu(d.indom, level))
            for kind in (TextType.ONELINE, TextType.HELP):
                await ask(TextReqPdu(d.indom, kind | TextType.INDOM))
    await ask(FetchPdu(tuple(pmids)))
    await ask(FetchPdu((*pmids, 0x7FFFFFFF)))
    await ask(DescReqPdu(0x7FFFFFFF))
    return replies


@pytest.mark.parametrize("version", ["6.0.3", "7.2.2"])
async def test_daemon_replies_pass(tmp_path: Path, version: str, table_pmda: PmdaFactory) -> None:
    """Our daemon's replies (MMV drop-in over corpus files, both pmdammv
    flavours) all pass; the sweep covers every checked reply type."""
    d = tmp_path / "mmv"
    d.mkdir()
    for stem in FILES:
        shutil.copy(MMV / f"{stem}.mmv", d / f"rs_{stem}")
    table = MmvTable(dir=str(d), compat="1", pcp_version=version)
    async with table_pmda(table, mount="mmv", domain=70) as pmda:
        replies = await _sweep(pmda, "mmv")
    seen = {int.from_bytes(r[4:8], "big") for r in replies}
    assert seen >= set(CHECKED), sorted(hex(t) for t in set(CHECKED) - seen)
    bad = [(r[:28].hex(), problems(r)) for r in replies if problems(r)]
    assert bad == []


_REPLY_TYPES = (CredsPdu, DescPdu, ErrorPdu, InstancePdu, LabelPdu, PmnsIdsPdu, PmnsNamesPdu, ResultPdu, TextPdu)


def _as_reply(pdu: object) -> object:
    """A generated PDU as a PMDA would send it: RESULT state flags only,
    PMNS_IDS and CREDS never empty (a PMDA answers at least one)."""
    if isinstance(pdu, ResultPdu):
        return attrs.evolve(pdu, sec=pdu.sec & 0x18, usec=0)
    if isinstance(pdu, PmnsIdsPdu) and not pdu.pmids:
        return attrs.evolve(pdu, pmids=(1,))
    if isinstance(pdu, CredsPdu) and not pdu.creds:
        return attrs.evolve(pdu, creds=(0x01020000,))
    return pdu


@given(pdus.filter(lambda p: isinstance(p, _REPLY_TYPES)).map(_as_reply), st.data())
def test_generated_replies_pass(pdu: object, data: st.DataObject) -> None:
    raw = pdu.encode()  # type: ignore[attr-defined]
    assert problems(raw) == [], (pdu, raw.hex())
    assert decode_pdu(raw) == pdu or isinstance(pdu, (ErrorPdu, PmnsNamesPdu))
