"""Replies remembered by their request bytes (DESC, TEXT, LABEL, INSTANCE):
the dispatcher's reply cache answers what the dispatcher would build, byte
for byte, and a changed index, instance set or table-computed label is never
answered from memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pmda_py.dispatch import Dispatcher, Mount
from pmda_py.pmapi import LabelType, PmType, TextType, indom, pmid
from pmda_py.session import Request, Session
from pmda_py.table import InDom, Metric, Table
from pmda_py.testing.support import InlineRunner
from pmda_py.wire import (
    CredsPdu,
    DescReqPdu,
    InstanceReqPdu,
    LabelReqPdu,
    ProfileEntry,
    ProfilePdu,
    TextReqPdu,
)

DOMAIN = 251


class _Static(Table):
    name = "static"
    cluster_labels: Mapping[int, Mapping[str, Any]] = MappingProxyType({0: {"cl": 1}})

    def __init__(self) -> None:
        self.colours = InDom(0, {0: "red", 1: "green", 2: "blue"}, oneline="colours", labels={"i": "x"})
        self.gen = 0
        self.build()

    def build(self) -> None:
        t = PmType.U32 if self.gen % 2 == 0 else PmType.DOUBLE
        self.ms = [
            Metric("a", cluster=0, item=0, type=t, oneline=f"a gen {self.gen}", help="the a metric", labels={"g": 1}),
            Metric("b", cluster=0, item=1, type=PmType.U64, indom=self.colours, oneline="b"),
        ]

    def metrics(self) -> Sequence[Metric]:
        return self.ms

    def indoms(self) -> Sequence[InDom]:
        return [self.colours]

    def bump(self) -> None:
        self.gen += 1
        self.generation += 1
        self.build()


class _Computed(Table):
    """Labels computed by the table at each request (label_items)."""

    name = "computed"
    c = Metric("c", cluster=1, item=0, type=PmType.U32)

    def __init__(self) -> None:
        self.n = 0

    def label_items(self, level: int, subject: Any) -> list[tuple[str, str, int]] | None:
        return [("n", str(self.n), 0)] if level == LabelType.ITEM else None


class _Refreshed(Table):
    """Instances refreshed by the table at each INSTANCE request."""

    name = "refreshed"

    def __init__(self) -> None:
        self.pool = InDom(1, {0: "x"})
        self.d = Metric("d", cluster=2, item=0, type=PmType.U32, indom=self.pool)
        self.k = 0

    async def refresh_instances(self, indom: InDom) -> None:
        self.k += 1
        indom.set({**indom.instances, self.k: f"x{self.k}"})  # a refresh hook's change


def _world() -> tuple[Dispatcher, Session, _Static, _Computed, _Refreshed]:
    tables = (_Static(), _Computed(), _Refreshed())
    disp = Dispatcher(DOMAIN, [Mount(t, t.name, t.name, {}) for t in tables], InlineRunner())
    session = Session()
    session.start()
    session.receive_data(CredsPdu.cversion(0).encode())
    assert not isinstance(session.next_event(), Request)
    return disp, session, *tables


async def _ask(disp: Dispatcher, session: Session, req: bytes) -> tuple[bytes, bool]:
    """The reply's bytes, and whether the reply cache gave them."""
    session.receive_data(req)
    event = session.next_event()
    assert isinstance(event, Request), event
    hits = disp.replies.hits
    return bytes(session.send(await disp.handle(event))), disp.replies.hits > hits


PMIDS = [pmid(DOMAIN, 0, 0), pmid(DOMAIN, 0, 1), pmid(DOMAIN, 0, 9), pmid(DOMAIN, 1, 0), pmid(DOMAIN, 2, 0)]
INDOMS = [indom(DOMAIN, 0), indom(DOMAIN, 1), indom(DOMAIN, 5)]

requests = st.one_of(
    st.builds(lambda p: DescReqPdu(p).encode(), st.sampled_from(PMIDS)),
    st.builds(
        lambda p, t: TextReqPdu(p, t).encode(),
        st.sampled_from(PMIDS + INDOMS),
        st.sampled_from(
            [TextType.PMID | TextType.ONELINE, TextType.PMID | TextType.HELP, TextType.INDOM | TextType.ONELINE]
        ),
    ),
    st.builds(
        lambda p, t: LabelReqPdu(p, t).encode(),
        st.sampled_from(PMIDS + INDOMS),
        st.sampled_from([LabelType.DOMAIN, LabelType.CLUSTER, LabelType.ITEM, LabelType.INDOM, LabelType.INSTANCES]),
    ),
    st.builds(
        lambda i, name, inst: InstanceReqPdu(i, inst, name).encode(),
        st.sampled_from(INDOMS),
        st.sampled_from([None, "red", "blue", "nosuch", "x"]),
        st.sampled_from([-1, 0, 2, 7]),
    ),
)
#: what may happen between two requests
steps = st.one_of(
    requests,
    st.sampled_from(["bump", "set_instances", "label_n", "profile"]),
)


_D, _I = DescReqPdu(PMIDS[0]).encode(), InstanceReqPdu(INDOMS[0]).encode()


@settings(max_examples=300, deadline=None)
@given(st.lists(steps, min_size=1, max_size=40))
@example([_D, "bump", _D, _I, "set_instances", _I])
def test_remembered_replies_are_the_built_ones(script: list[bytes | str]) -> None:
    """Two daemons get the same requests and changes: one remembers replies,
    one builds every reply; their bytes are the same throughout."""

    async def run() -> int:
        worlds = [_world(), _world()]
        worlds[1][0].replies.enabled = False
        hits = 0
        for step in script:
            if isinstance(step, bytes):
                (mine, hit), (built, never) = [await _ask(w[0], w[1], step) for w in worlds]
                assert not never
                assert mine == built, step.hex()
                hits += hit
                continue
            for _disp, session, static, computed, _ in worlds:
                if step == "bump":
                    static.bump()
                elif step == "set_instances":
                    n = len(static.colours.instances)
                    static.colours.set({**static.colours.instances, n: f"c{n}"})
                elif step == "label_n":
                    computed.n += 1
                else:
                    session.receive_data(ProfilePdu(0, 1, (ProfileEntry(indom(DOMAIN, 0), 0, (1,)),)).encode())
                    session.next_event()
        return hits

    trio.run(run)


async def test_a_repeated_request_is_answered_from_memory() -> None:
    disp, session, *_ = _world()
    for req in (
        DescReqPdu(PMIDS[0]).encode(),
        TextReqPdu(PMIDS[0], TextType.PMID | TextType.HELP).encode(),
        LabelReqPdu(PMIDS[0], LabelType.ITEM).encode(),
        InstanceReqPdu(INDOMS[0]).encode(),
    ):
        first, hit1 = await _ask(disp, session, req)
        again, hit2 = await _ask(disp, session, req)
        assert (hit1, hit2) == (False, True) and first == again
    assert disp.stats.requests["DESC_REQ"] == 2  # a remembered reply is counted like any other


async def test_changes_are_never_answered_from_memory() -> None:
    disp, session, static, computed, _refreshed = _world()
    desc = DescReqPdu(PMIDS[0]).encode()
    before, _ = await _ask(disp, session, desc)
    static.bump()  # a U32 metric became a DOUBLE
    after, hit = await _ask(disp, session, desc)
    assert not hit and after != before

    inst = InstanceReqPdu(INDOMS[0]).encode()
    before, _ = await _ask(disp, session, inst)
    static.colours.set({7: "seven"})
    after, hit = await _ask(disp, session, inst)
    assert not hit and b"seven" in after

    static.colours.instances = {**static.colours.instances, 8: "eight"}  # a new map assigned
    after, hit = await _ask(disp, session, inst)
    assert not hit and b"eight" in after

    label = LabelReqPdu(PMIDS[3], LabelType.ITEM).encode()
    await _ask(disp, session, label)
    computed.n = 42
    after, hit = await _ask(disp, session, label)
    assert not hit and b"42" in after

    pool = InstanceReqPdu(INDOMS[1]).encode()
    await _ask(disp, session, pool)
    after, hit = await _ask(disp, session, pool)
    assert not hit and b"x2" in after

    labels = LabelReqPdu(INDOMS[0], LabelType.INSTANCES).encode()
    await _ask(disp, session, labels)
    _, hit = await _ask(disp, session, labels)
    assert not hit  # the profile picks the instances: never remembered


def test_reindex_leaves_the_collector_as_it_was() -> None:
    """The index is built with the cyclic collector paused, and it is back
    as it was afterwards (on, or off if it was off)."""
    import gc

    disp, _session, static, *_ = _world()
    assert gc.isenabled()
    static.bump()
    disp.reindex()
    assert gc.isenabled()
    gc.disable()
    try:
        disp.reindex()
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Checked(_Static):
    """A table whose check (declared inline) counts its calls."""

    check_mode = "inline"

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def check(self) -> None:
        self.checks += 1


async def test_each_request_checks_the_tables_once() -> None:
    """A remembered reply found stale is built by handle() without running
    the checks a second time for the same request."""
    table = _Checked()
    disp = Dispatcher(DOMAIN, [Mount(table, table.name, table.name, {})], InlineRunner())
    session = Session()
    session.start()
    session.receive_data(CredsPdu.cversion(0).encode())
    session.next_event()
    desc = DescReqPdu(PMIDS[0]).encode()
    hits = []
    for step in ("first", "again", "bump", "after"):
        if step == "bump":
            table.bump()
            continue
        hits.append((await _ask(disp, session, desc))[1])
    assert hits == [False, True, False]
    assert table.checks == 3


class _Waiting(_Static):
    """A table whose check may wait (a plain def: the runner bounds it)."""

    def check(self) -> None:
        pass


async def test_remembered_replies_are_used_when_a_check_may_wait() -> None:
    """A table whose check the runner bounds does not turn the reply cache
    off: the check is awaited, then the remembered reply answers."""
    table = _Waiting()
    disp = Dispatcher(DOMAIN, [Mount(table, table.name, table.name, {})], InlineRunner())
    session = Session()
    session.start()
    session.receive_data(CredsPdu.cversion(0).encode())
    session.next_event()
    desc = DescReqPdu(PMIDS[0]).encode()
    hits = [(await _ask(disp, session, desc))[1] for _ in range(5)]
    assert hits == [False, True, True, True, True]
