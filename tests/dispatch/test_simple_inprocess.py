"""The built-in simple table served in-process, checked against what
pmdasimple.python answers (values recorded from real dbpmda sessions in
tests/data/pdus/dbpmda_simple*.dbpmda.out)."""

from __future__ import annotations

import pytest

from pmda_py.errors import PmErr
from pmda_py.pmapi import PM_IN_NULL, LabelType, PmSem, PmType, indom, pmid
from pmda_py.tables.simple import SimpleTable
from pmda_py.testing.client import PmdaReplyError
from pmda_py.testing.harness import open_table_pmda
from pmda_py.wire import ProfileEntry, ValueSet


@pytest.fixture
def simple(tmp_path):  # type: ignore[no-untyped-def]
    conf = tmp_path / "simple.conf"
    conf.write_text("sec,min,hour\n")
    return SimpleTable(config=str(conf))


async def test_descs_match_pmdasimple(simple: SimpleTable) -> None:
    async with open_table_pmda(simple, mount="simple", domain=253) as pmda:
        d = await pmda.desc(pmid(253, 0, 0))
        assert (d.type, d.indom, d.sem, d.units.to_int()) == (PmType.U32, 0xFFFFFFFF, PmSem.INSTANT, 0)
        d = await pmda.desc(pmid(253, 0, 1))
        assert (d.type, d.indom) == (PmType.I32, indom(253, 0))
        d = await pmda.desc(pmid(253, 1, 2))
        assert (d.type, d.sem, d.units.to_int()) == (PmType.DOUBLE, PmSem.COUNTER, 0x01003000)
        d = await pmda.desc(pmid(253, 2, 4))
        assert (d.type, d.indom) == (PmType.U32, indom(253, 1))
        with pytest.raises(PmdaReplyError) as info:
            await pmda.desc(pmid(253, 9, 9))
        assert info.value.pm_code == PmErr.PMID


async def test_value_sequence_and_profile(simple: SimpleTable) -> None:
    async with open_table_pmda(simple, mount="simple", domain=253) as pmda:
        v = await pmda.fetch_values(["simple.numfetch", "simple.color"])
        assert v == {"simple.numfetch": 1, "simple.color": {0: 1, 1: 101, 2: 201}}
        # profile: only instance 1 of the colour indom (dbpmda "profile 253.0 none; add 1")
        await pmda.profile([ProfileEntry(indom(253, 0), 1, (1,))])
        r = await pmda.fetch([pmid(253, 0, 1)])
        assert [(x.inst, x.value) for x in r.vsets[0].values] == [(1, 102)]
        # "profile 253.0 delete 2"
        await pmda.profile([ProfileEntry(indom(253, 0), 0, (2,))])
        r = await pmda.fetch([pmid(253, 0, 1), pmid(253, 0, 0)])
        assert [(x.inst, x.value) for x in r.vsets[0].values] == [(0, 2), (1, 103)]
        assert r.vsets[1].values[0].value == 3
        # an unknown PMID in a batch: numval < 0 for it alone
        r = await pmda.fetch([pmid(253, 9, 9), pmid(253, 0, 0)])
        assert r.vsets[0].error == PmErr.PMID
        assert r.vsets[1].values[0].value == 4


async def test_store_rules(simple: SimpleTable) -> None:
    async with open_table_pmda(simple, mount="simple", domain=253) as pmda:
        ok = await pmda.store([ValueSet.of(pmid(253, 0, 0), PmType.U32, [(PM_IN_NULL, 42)])])
        assert ok == 0
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == 43
        bad = await pmda.store([ValueSet.of(pmid(253, 0, 1), PmType.I32, [(0, 300), (1, 300), (2, 300)])])
        assert bad == PmErr.BADSTORE
        # like pmdasimple.python under libpcp_pmda: the first value is refused,
        # clamped to 255 (then +1 mod 255), and the store stops there
        assert (await pmda.fetch_values(["simple.color"]))["simple.color"] == {0: 1, 1: 101, 2: 201}
        ro = await pmda.store([ValueSet.of(pmid(253, 1, 2), PmType.DOUBLE, [(PM_IN_NULL, 1.0)])])
        assert ro == PmErr.PERMISSION
        inst = await pmda.store([ValueSet.of(pmid(253, 0, 1), PmType.I32, [(7, 1)])])
        assert inst == PmErr.INST
        unknown = await pmda.store([ValueSet.of(pmid(253, 7, 7), PmType.I32, [(PM_IN_NULL, 1)])])
        assert unknown == PmErr.PMID


async def test_instances_text_labels(simple: SimpleTable) -> None:
    async with open_table_pmda(simple, mount="simple", domain=253) as pmda:
        all_ = await pmda.instance(indom(253, 0))
        assert [(e.inst, e.name) for e in all_] == [(0, "red"), (1, "green"), (2, "blue")]
        one = await pmda.instance(indom(253, 0), 1)
        assert [(e.inst, e.name) for e in one] == [(PM_IN_NULL, "green")]
        byname = await pmda.instance(indom(253, 0), name="green")
        assert [(e.inst, e.name) for e in byname] == [(1, "")]
        for bad in ({"inst": 99}, {"name": "purple"}):
            with pytest.raises(PmdaReplyError) as info:
                await pmda.instance(indom(253, 0), **bad)
            assert info.value.pm_code == PmErr.INST
        with pytest.raises(PmdaReplyError) as info:
            await pmda.instance(indom(253, 7))
        assert info.value.pm_code == PmErr.INDOM
        now = await pmda.instance(indom(253, 1))
        assert [e.name for e in now] == ["sec", "min", "hour"]
        assert (await pmda.oneline(pmid(253, 0, 0))) == "Number of pmFetch operations."
        assert (await pmda.text(indom(253, 0), 9)).startswith('Instance domain "colour"')
        with pytest.raises(PmdaReplyError) as info:
            await pmda.text(pmid(253, 9, 9), 6)
        assert info.value.pm_code == PmErr.TEXT
        assert await pmda.labels_dict(0xFFFFFFFF, LabelType.DOMAIN) == {"role": '"testing"'}
        assert await pmda.labels_dict(indom(253, 0), LabelType.INDOM) == {
            "indom_name": '"color"',
            "model": '"RGB"',
        }
        assert await pmda.labels_dict(pmid(253, 0, 0), LabelType.CLUSTER) == {}
        inst_labels = await pmda.label(indom(253, 1), LabelType.INSTANCES)
        assert [(s.inst, s.as_dict()) for s in inst_labels.sets] == [
            (0, {"units": '"sec"'}),
            (1, {"units": '"min"'}),
            (2, {"units": '"hour"'}),
        ]


async def test_dynamic_namespace(simple: SimpleTable) -> None:
    async with open_table_pmda(simple, mount="simple", domain=253) as pmda:
        assert await pmda.pmid("simple.numfetch") == pmid(253, 0, 0)
        assert await pmda.names(pmid(253, 0, 0)) == ("simple.numfetch",)
        kids = await pmda.children("simple", status=True)
        # libpcp_pmda's order (newest first), as pmdasimple.python answers
        assert list(zip(kids.names, kids.statuses or ())) == [("now", 0), ("time", 1), ("color", 0), ("numfetch", 0)]
        assert await pmda.traverse("simple") == (
            "simple.now",
            "simple.time.sys",
            "simple.time.user",
            "simple.color",
            "simple.numfetch",
        )
        assert await pmda.traverse("simple.numfetch") == ("simple.numfetch",)
        for call in (pmda.pmid("simple.nonesuch"), pmda.traverse("nonesuch"), pmda.pmid("simple.time")):
            with pytest.raises(PmdaReplyError) as info:
                await call
            assert info.value.pm_code == PmErr.NAME
        with pytest.raises(PmdaReplyError) as info:
            await pmda.names(pmid(253, 9, 9))
        assert info.value.pm_code == PmErr.PMID


async def test_now_instance_ids_persist(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "simple.conf"
    conf.write_text("hour,sec\n")
    from pmda_py.table import InstanceCache

    t1 = SimpleTable(config=str(conf))
    async with open_table_pmda(t1, mount="simple", domain=253) as pmda:
        t1.time.cache = InstanceCache(str(tmp_path / "253.1"))
        t1.time.cache.load()
        assert [(e.inst, e.name) for e in await pmda.instance(indom(253, 1))] == [(0, "hour"), (1, "sec")]
    conf.write_text("sec,min,hour\n")
    t2 = SimpleTable(config=str(conf))
    async with open_table_pmda(t2, mount="simple", domain=253) as pmda:
        t2.time.cache = InstanceCache(str(tmp_path / "253.1"))
        t2.time.cache.load()
        got = [(e.inst, e.name) for e in await pmda.instance(indom(253, 1))]
        assert got == [(1, "sec"), (2, "min"), (0, "hour")]
