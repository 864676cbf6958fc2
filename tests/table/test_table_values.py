"""The table API's own value types -- :class:`~pmda_py.table.Event` records
and :class:`~pmda_py.table.PackedColumns` -- become the wire's values in the
dispatcher: pmdasample's event arrays (recorded from real PCP) come out of a
table that describes them in Python terms, and packed columns reach the
reply as they are, or as PM_ERR_TYPE when they do not fit the metric."""

from __future__ import annotations

import json
import struct
from array import array
from typing import Any

from structlog.testing import capture_logs

from pmda_py.errors import PmErr
from pmda_py.pmapi import EventFlag, PmType, indom, pmid, pmid_cluster, pmid_item
from pmda_py.table import Event, FetchRequest, FetchResult, InDom, Metric, PackedColumns, Table
from pmda_py.testing.harness import open_table_pmda
from pmda_py.wire import EventArray, ProfileEntry, ResultPdu, ValueBlock, decode_pdu
from tests.conftest import PDUS

SAMPLE = 29  # pmdasample's domain: the parameters' PMIDs are its metrics'


def _recorded() -> list[tuple[int, int, int, EventArray]]:
    """Every event value pmdasample answered in the dbpmda capture: (pmid,
    inst, type, event array)."""
    out = []
    for line in (PDUS / "dbpmda_sample.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        pdu = decode_pdu(bytes.fromhex(json.loads(line)["hex"]))
        if isinstance(pdu, ResultPdu):
            for vs in pdu.vsets:
                for v in vs.values:
                    if isinstance(v.value, ValueBlock) and v.value.vtype in (PmType.EVENT, PmType.HIGHRES_EVENT):
                        out.append((vs.pmid, v.inst, v.value.vtype, v.value.event_array()))
    return out


class Events(Table):
    """Serves event values given as ``{pmid: {inst: [Event, ...]}}``."""

    def __init__(self, types: dict[int, int], params: dict[int, int]) -> None:
        self.ind = InDom(0, {0: "fungus", 1: "bogus"})
        self.by_pmid: dict[int, Metric] = {}
        for p, t in {**params, **types}.items():
            self.by_pmid[p] = Metric(
                f"m{pmid_item(p)}",
                cluster=pmid_cluster(p),
                item=pmid_item(p),
                type=t,
                indom=self.ind if p in types and pmid_item(p) != 137 else None,
            )
        self.answer: dict[int, Any] = {}

    def metrics(self) -> list[Metric]:
        return list(self.by_pmid.values())

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.by_pmid[p]: v for p, v in self.answer.items()}


def _as_events(arr: EventArray, table: Events) -> list[Event]:
    """pmdasample's records said in the table API's terms."""
    out = []
    for r in arr.records:
        nsec = r.subsec if arr.highres else r.subsec * 1000
        if r.flags & EventFlag.MISSED:
            if r.nparams:
                out.append(Event(r.sec, nsec, missed=r.nparams, flags=r.flags & ~EventFlag.MISSED))
            else:  # pmdasample's high-resolution missed record counts 0
                out.append(Event(r.sec, nsec, flags=r.flags))
            continue
        params = [(table.by_pmid[p.pmid], p.value()) for p in r.params]
        out.append(Event(r.sec, nsec, params, r.flags))
    return out


async def test_event_records_become_pmdasample_event_arrays() -> None:
    recorded = _recorded()
    assert len(recorded) > 15 and {t for _, _, t, _ in recorded} == {PmType.EVENT, PmType.HIGHRES_EVENT}
    assert any(r.flags & EventFlag.MISSED for *_, a in recorded for r in a.records)
    types = {p: t for p, _, t, _ in recorded}
    params = {q.pmid: q.type for *_, a in recorded for r in a.records for q in r.params}
    table = Events(types, params)
    async with open_table_pmda(table, mount="sample", domain=SAMPLE) as pmda:
        for p, inst, _t, arr in recorded:
            events = _as_events(arr, table)
            table.answer = {p: events if inst == -1 else {inst: events}}
            reply = await pmda.fetch([p])
            (vs,) = reply.vsets
            assert [v.inst for v in vs.values] == [inst]
            block = vs.values[0].value
            assert isinstance(block, ValueBlock) and block.vtype == types[p]
            assert block.event_array() == arr  # record for record, parameter for parameter
            # the same bytes but for the parameters' padding (pmdasample leaves garbage there)
            assert len(block.payload) == len(arr.encode())


async def test_an_event_value_that_is_not_records_is_a_type_error() -> None:
    table = Events({pmid(SAMPLE, 0, 137): PmType.EVENT}, {pmid(SAMPLE, 0, 127): PmType.U32})
    p = pmid(SAMPLE, 0, 137)
    async with open_table_pmda(table, mount="sample", domain=SAMPLE) as pmda:
        for bad in ("fetch #0", 7, [("not", "an event")]):
            table.answer = {p: bad}
            with capture_logs() as logs:
                reply = await pmda.fetch([p])
            assert reply.vsets[0].numval == PmErr.TYPE, bad
            assert [e["metric"] for e in logs if e["event"] == "table_bad_value"] == ["sample.m137"], bad
        table.answer = {p: []}  # no events: an empty array
        assert (await pmda.fetch_values(["sample.m137"]))["sample.m137"] == EventArray(False, ())


class Packed(Table):
    """Packed columns of each type; ``wrong`` answers DOUBLE bytes for a U64."""

    def __init__(self) -> None:
        self.ind = InDom(3, {0: "a", 5: "b", 9: "c"})
        self.u = Metric("u", cluster=0, item=0, type=PmType.U64, indom=self.ind)
        self.i = Metric("i", cluster=0, item=1, type=PmType.I64, indom=self.ind)
        self.d = Metric("d", cluster=0, item=2, type=PmType.DOUBLE, indom=self.ind)
        self.f = Metric("f", cluster=0, item=3, type=PmType.FLOAT, indom=self.ind)
        self.wrong = Metric("wrong", cluster=0, item=4, type=PmType.U64, indom=self.ind)
        self.short = Metric("short", cluster=0, item=5, type=PmType.DOUBLE, indom=self.ind)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        insts = array("I", [0, 5, 9])
        return {
            self.u: PackedColumns(insts, struct.pack("!3Q", 1, 2, 2**64 - 1), "Q"),
            self.i: PackedColumns(insts, struct.pack("!3q", -1, 0, 2**63 - 1), "q"),
            self.d: PackedColumns(insts, struct.pack("!3d", 0.5, -1.5, 1e300), "d"),
            self.f: PackedColumns(insts, struct.pack("!3f", 0.5, -1.5, 2.0), "f"),
            self.wrong: PackedColumns(insts, struct.pack("!3d", 0.5, -1.5, 1e300), "d"),
            self.short: PackedColumns(insts, struct.pack("!2d", 0.5, -1.5), "d"),
        }


async def test_packed_columns_reach_the_reply() -> None:
    good: dict[str, dict[int, Any]] = {
        "p.u": {0: 1, 5: 2, 9: 2**64 - 1},
        "p.i": {0: -1, 5: 0, 9: 2**63 - 1},
        "p.d": {0: 0.5, 5: -1.5, 9: 1e300},
        "p.f": {0: 0.5, 5: -1.5, 9: 2.0},
    }
    async with open_table_pmda(Packed(), mount="p", domain=250) as pmda:
        assert await pmda.fetch_values(list(good)) == good
        with capture_logs() as logs:
            reply = await pmda.fetch([pmid(250, 0, 4), pmid(250, 0, 5), pmid(250, 0, 0)])
        assert [vs.numval for vs in reply.vsets] == [PmErr.TYPE, PmErr.TYPE, 3]
        assert sorted(e["metric"] for e in logs if e["event"] == "table_bad_value") == ["p.short", "p.wrong"]
        # a profile naming some instances: the packed values are cut to them
        await pmda.profile([ProfileEntry(indom(250, 3), 1, (5, 9))])  # exclude all but 5 and 9
        cut = await pmda.fetch_values(list(good))
        assert cut == {n: {i: v for i, v in vals.items() if i in (5, 9)} for n, vals in good.items()}
