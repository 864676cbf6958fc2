"""What a table's fetch is asked with, request after request: the client
context, its attributes (ATTR) and its instance profile (PROFILE) of the
FETCH at hand.  A repeated FETCH asks the tables with the request of the
previous one while these are the very same objects; any change between
fetches must reach the table."""

from __future__ import annotations

from array import array

from pmda_py.pmapi import PmType
from pmda_py.table import Columns, FetchRequest, FetchResult, InDom, Metric, Table
from pmda_py.testing.harness import open_table_pmda
from pmda_py.wire import ProfileEntry

DOMAIN = 250


class Recorder(Table):
    name = "rec"

    def __init__(self) -> None:
        self.indom = InDom(0, {0: "a", 1: "b", 2: "c"})
        self.m = Metric("m", cluster=0, item=0, type=PmType.U64, indom=self.indom)
        self.s = Metric("s", cluster=0, item=1, type=PmType.U32)
        self.asked: list[FetchRequest] = []

    def metrics(self) -> list[Metric]:
        return [self.m, self.s]

    def indoms(self) -> list[InDom]:
        return [self.indom]

    async def fetch(self, request: FetchRequest) -> FetchResult:
        self.asked.append(request)
        return {self.m: Columns(array("I", [0, 1, 2]), array("Q", [7, 8, 9])), self.s: request.context}


def seen(req: FetchRequest, indom: InDom) -> tuple[int, dict[str, str], list[int]]:
    """The context, attributes and wanted instances a table sees."""
    return req.context, dict(req.attributes), [i for i in (0, 1, 2) if req.wanted(indom, i)]


async def test_each_fetch_asks_with_its_own_context_attributes_and_profile() -> None:
    t = Recorder()
    async with open_table_pmda(t, mount="rec", domain=DOMAIN) as pmda:
        ids = await pmda.lookup(["rec.m", "rec.s"])
        pmids = [ids["rec.m"], ids["rec.s"]]
        for _ in range(3):  # repeated: the same request may be asked again
            await pmda.fetch(pmids, from_=1)
        assert [seen(r, t.indom) for r in t.asked] == [(1, {}, [0, 1, 2])] * 3
        assert all(r.pmids == tuple(pmids) and r.metrics == (t.m, t.s) for r in t.asked)

        await pmda.attr(5, "alice", from_=1)  # PCP_ATTR_USERNAME
        await pmda.fetch(pmids, from_=1)
        assert seen(t.asked[-1], t.indom) == (1, {"username": "alice"}, [0, 1, 2])

        await pmda.fetch(pmids, from_=2)  # another client context: its own attributes
        assert seen(t.asked[-1], t.indom) == (2, {}, [0, 1, 2])
        await pmda.fetch(pmids, from_=1)
        assert seen(t.asked[-1], t.indom) == (1, {"username": "alice"}, [0, 1, 2])

        await pmda.profile([ProfileEntry(t.indom.id, 0, (1,))], from_=1)  # all of the indom but instance 1
        result = await pmda.fetch(pmids, from_=1)
        assert seen(t.asked[-1], t.indom) == (1, {"username": "alice"}, [0, 2])
        assert [v.inst for v in result.vsets[0].values] == [0, 2]

        await pmda.attr(5, "bob", from_=1)
        await pmda.fetch(pmids, from_=1)
        assert seen(t.asked[-1], t.indom) == (1, {"username": "bob"}, [0, 2])
