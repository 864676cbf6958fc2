"""A table whose instances are the names of its ``names`` option, in the
order given, in a persistent indom: its ids must not depend on that order."""

from __future__ import annotations

from pmda_py.pmapi import PmType
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, Table, TableContext


class Names(Table):
    name = "names"
    accepts_options = True

    def __init__(self, names: str = "", **_options: str) -> None:
        self.names = [n for n in names.split(",") if n]
        self.indom = InDom(7, oneline="named things", persistent=True)
        self.value = Metric("value", cluster=0, item=0, type=PmType.U32, indom=self.indom, oneline="length of the name")

    async def startup(self, context: TableContext) -> None:
        self.indom.set_names(self.names)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.value: {i: len(n) for i, n in self.indom.instances.items()}}
