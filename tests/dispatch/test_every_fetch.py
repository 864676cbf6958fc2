"""``FetchRequest.pmids`` (the FETCH as the client sent it) and
``Table.sees_every_fetch`` (a table asked even when a FETCH names none of
its metrics)."""

from __future__ import annotations

import pytest

from pmda_py.errors import PmErr
from pmda_py.pmapi import PmType, pmid
from pmda_py.table import FetchRequest, FetchResult, Metric, Table
from pmda_py.testing.harness import open_table_pmda


class Recorder(Table):
    name = "rec"

    def __init__(self) -> None:
        self.m = Metric("m", cluster=3, item=0, type=PmType.U32)
        self.seen: list[tuple[tuple[str, ...], tuple[int, ...]]] = []

    async def fetch(self, request: FetchRequest) -> FetchResult:
        self.seen.append((tuple(m.name for m in request.metrics), request.pmids))
        return {self.m: 7} if request.metrics else {}


class Everything(Recorder):
    sees_every_fetch = True


@pytest.mark.parametrize("every", [False, True])
async def test_pmids_as_sent_and_fetches_of_unknown_pmids(every: bool) -> None:
    table = Everything() if every else Recorder()
    m, unknown, other = pmid(254, 3, 0), pmid(254, 7, 9), pmid(2, 11, 1)
    async with open_table_pmda(table, domain=254) as pmda:
        result = await pmda.fetch([unknown, m, unknown, other])
        assert [v.numval for v in result.vsets] == [PmErr.PMID, 1, PmErr.PMID, PmErr.PMID]
        result = await pmda.fetch([unknown, other])
        assert [v.numval for v in result.vsets] == [PmErr.PMID, PmErr.PMID]
    asked: list[tuple[tuple[str, ...], tuple[int, ...]]] = [(("m",), (unknown, m, unknown, other))]
    if every:
        asked.append(((), (unknown, other)))
    assert table.seen == asked
