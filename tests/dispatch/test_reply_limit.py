"""No reply over the PDU limit (64 MiB, pmcd's) ever leaves the daemon:
it is answered PM_ERR_TOOBIG and logged once (the same reply again: not
again within the hour, as any table's problem)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import structlog

from pmda_py.errors import PmErr
from pmda_py.pmapi import PmType, indom
from pmda_py.table import InDom, Metric, Table
from pmda_py.testing.client import PmdaReplyError
from pmda_py.testing.harness import open_table_pmda


class _Huge(Table):
    """An indom whose names make a 76 MB INSTANCE reply (as label churn did)."""

    name = "huge"

    def __init__(self) -> None:
        names = {i: f"{i:05d} " + "v" * 40_000 for i in range(1900)}
        self.big = InDom(0, names)
        self.small = InDom(1, {0: "one"})
        self.ms = [
            Metric("big", cluster=0, item=0, type=PmType.U32, indom=self.big),
            Metric("small", cluster=0, item=1, type=PmType.U32, indom=self.small),
        ]

    def metrics(self) -> Sequence[Metric]:
        return self.ms

    def indoms(self) -> Sequence[InDom]:
        return [self.big, self.small]


async def test_an_instance_reply_over_the_limit_is_refused_and_logged() -> None:
    with structlog.testing.capture_logs() as logs:
        async with open_table_pmda(_Huge(), mount="huge", domain=253) as pmda:
            for _ in range(3):
                with pytest.raises(PmdaReplyError) as info:
                    await pmda.instance(indom(253, 0))
                assert info.value.pm_code == PmErr.TOOBIG
            assert [e.name for e in await pmda.instance(indom(253, 1))] == ["one"]  # the session goes on
    too_big = [e for e in logs if e["event"] == "reply_too_big"]
    assert len(too_big) == 1 and too_big[0]["bytes"] > too_big[0]["limit"] == 64 * 1024 * 1024
