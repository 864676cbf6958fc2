"""Tables get a typed :class:`TableContext` at startup (domain, mount,
options, state dir, logger, the PMDA's counters, the other tables); nothing
is assigned to a table from outside."""

from __future__ import annotations

from pathlib import Path

from pmda_py.config import parse_args
from pmda_py.pmapi import PmType
from pmda_py.runtime.loader import build_dispatcher
from pmda_py.table import FetchRequest, FetchResult, Metric, Table, TableContext
from pmda_py.tables.control import ControlTable
from pmda_py.testing.harness import dispatcher_of, open_table_pmda

SEEN: list[TableContext] = []


class Probe(Table):
    name = "probe"
    accepts_options = True

    def __init__(self, **options: str) -> None:
        self.options = options
        self.m = Metric("m", cluster=3, item=0, type=PmType.U32)

    async def startup(self, context: TableContext) -> None:
        SEEN.append(context)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.m: 1}


def test_context_from_the_config(tmp_path: Path) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text(
        "[pmda]\nname = ctx\ndomain = 260\n\n[table ctl]\ntable = control\nmount = ctx.control\n\n"
        f"[table p]\ntable = {__name__}:Probe\nmount = ctx.probe\ncolour = blue\n"
    )
    config = parse_args(["-c", str(conf), "-l", str(tmp_path / "log"), "--state-dir", str(tmp_path / "st")])
    d = build_dispatcher(config)
    ctx = d.context(d.mounts[1])
    assert (ctx.domain, ctx.mount, ctx.name, ctx.pmda) == (260, "ctx.probe", "p", "ctx")
    assert dict(ctx.options) == {"colour": "blue"} and ctx.state_dir == str(tmp_path / "st")
    assert ctx.tables == ("ctl", "p") and ctx.stats is d.stats
    table = d.mounts[1].table
    assert isinstance(table, Probe) and table.options == {"colour": "blue"}
    assert set(vars(table)) == {"options", "m"}  # nothing assigned by the daemon


async def test_startup_gets_the_context_and_control_counts(tmp_path: Path) -> None:
    SEEN.clear()
    probe, ctl = Probe(), ControlTable()
    async with open_table_pmda(probe, ctl, domain=261, state_dir=str(tmp_path)) as pmda:
        await pmda.fetch_values(["probe.m"])
        values = await pmda.fetch_values(["control.fetch.count"])
        assert values["control.fetch.count"] == 1  # the fetch before this one
    (ctx,) = SEEN
    assert (ctx.domain, ctx.mount, ctx.name, ctx.state_dir) == (261, "probe", "probe", str(tmp_path))
    assert ctx.tables == ("probe", "control")
    assert set(vars(probe)) == {"options", "m"}


class Ends(Table):
    def __init__(self, name: str, cluster: int, fail: bool = False) -> None:
        self.m = Metric("m", cluster=cluster, item=0, type=PmType.U32)
        self.ended: list[int] = []
        self.fail = fail
        self.label = name

    def end_context(self, context: int) -> None:
        self.ended.append(context)
        if self.fail:
            raise RuntimeError("cannot forget")

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.m: request.context}


async def test_a_closed_client_context_is_told_to_every_table() -> None:
    """Table.end_context: pmcd's NOTCONN for a client context reaches each
    table with the context's number; one that raises is logged and keeps
    neither the other tables nor the agent from going on."""
    import structlog.testing

    from pmda_py.dispatch import Mount

    first, second = Ends("first", 1, fail=True), Ends("second", 2)
    with structlog.testing.capture_logs() as logs:
        async with open_table_pmda(Mount(first, "first", "first"), Mount(second, "second", "second")) as pmda:
            assert (await pmda.fetch_values(["second.m"]))["second.m"] == pmda.from_
            await pmda.end_context(from_=7)
            await pmda.end_context(from_=9)
            assert (await pmda.fetch_values(["first.m"]))["first.m"] == pmda.from_  # still serving
            counted = dispatcher_of(pmda).stats.table_errors
    assert first.ended == second.ended == [7, 9]
    # both failures counted; the same failure logged once (again in an hour: ProblemLog)
    assert counted == {"first": 2}
    assert [e["call"] for e in logs if e["event"] == "table_exception"] == ["end_context"]


def test_a_sections_deadline_is_the_tables_and_not_an_option(tmp_path: Path) -> None:
    """docs/tables.md's ``deadline = 1.5`` in a ``[table ...]`` section: the
    table's deadline; the table's options are the section's other keys."""
    conf = tmp_path / "p.conf"
    conf.write_text(
        f"[pmda]\nname = ctx\ndomain = 260\n\n[table p]\ntable = {__name__}:Probe\nmount = ctx.probe\n"
        "deadline = 1.5\ncolour = blue\n"
    )
    d = build_dispatcher(parse_args(["-c", str(conf), "-l", str(tmp_path / "log")]))
    table = d.mounts[0].table
    assert isinstance(table, Probe) and table.deadline == 1.5 and Table.deadline == 2.0
    assert table.options == {"colour": "blue"} and dict(d.context(d.mounts[0]).options) == {"colour": "blue"}
