"""A table whose names change is indexed in place (a cost in the names that
came and went, not in the namespace): after any sequence of metrics and
sources added, removed, replaced or colliding, the dispatcher's index is
what a build from scratch of the same tables gives (a non-leaf's children
in arrival order aside: see MountIndex), and the fast path's layouts of
untouched PMIDs survive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.dispatch import Dispatcher, Mount, MountIndex
from pmda_py.namespace import Namespace, Node
from pmda_py.pmapi import PmType
from pmda_py.table import FetchRequest, InDom, Metric, Table
from pmda_py.testing.support import InlineRunner
from tests.dispatch.test_fast_fetch import _fetch, _Session

DOMAIN = 251


class _Static(Table):
    name = "static"

    def __init__(self) -> None:
        self.ind = InDom(0, {0: "a", 1: "b"})
        self.ms = [Metric(f"x{k}", cluster=0, item=k, type=PmType.U64, indom=self.ind if k else None) for k in range(3)]

    def metrics(self) -> Sequence[Metric]:
        return self.ms

    async def fetch(self, request: FetchRequest) -> Any:
        return {m: 7 if m.indom is None else {0: 1, 1: 2} for m in request.metrics}


class _Dynamic(Table):
    """Sources (a cluster each, names ``sC.mI``, some with an indom of their own)."""

    name = "dyn"
    dynamic_names = True

    def __init__(self) -> None:
        self.ms: list[Metric] = []
        self.inds: dict[int, InDom] = {}
        #: indoms only metrics name (not in indoms())
        self.hidden: dict[int, InDom] = {}

    def metrics(self) -> Sequence[Metric]:
        return list(self.ms)

    def indoms(self) -> Sequence[InDom]:
        return list(self.inds.values())

    def clusters(self) -> set[int]:
        return {m.cluster for m in self.ms}

    async def fetch(self, request: FetchRequest) -> Any:
        return {m: 1 for m in request.metrics if m.indom is None}

    def metric(self, c: int, i: int, name: str | None = None) -> Metric:
        ind = self.inds.get(c)
        if i % 4 == 3:
            ind = self.hidden.setdefault(c, InDom(100 + c, {0: "h"}))
        return Metric(name or f"s{c}.m{i}", cluster=c, item=i, type=PmType.U64, indom=ind if i % 2 else None)


def _tree(ns: Namespace) -> dict[str, set[tuple[str, int | None]]]:
    out: dict[str, set[tuple[str, int | None]]] = {}

    def walk(node: Node, name: str) -> None:
        out[name] = {(k, c.pmid) for k, c in node.children.items()}
        for k, c in node.children.items():
            if not c.is_leaf:
                walk(c, f"{name}.{k}" if name else k)

    walk(ns.root, "")
    return out


def _same(d: Dispatcher) -> None:
    fresh = MountIndex.build(d.mounts, DOMAIN, strict=False, prepare=lambda ind: None)
    assert d.index.by_pmid == fresh.by_pmid
    assert d.index.by_name == fresh.by_name
    assert d.index.by_indom == fresh.by_indom
    assert _tree(d.index.pmns) == _tree(fresh.pmns)
    assert d.index.pmns.leaves() == fresh.pmns.leaves()
    for p in fresh.by_pmid:
        assert d.index.pmns.names(p) == fresh.pmns.names(p)


ops_st = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "source", "drop", "drop_source", "replace", "collide", "indom", "none"]),
        st.integers(1, 6),
        st.integers(0, 30),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(ops=ops_st, data=st.data())
def test_updated_index_is_a_rebuilt_one(ops: list[tuple[str, int, int]], data: st.DataObject) -> None:
    static, dyn, dyn2 = _Static(), _Dynamic(), _Dynamic()
    d = Dispatcher(
        DOMAIN, [Mount(static, "static", "static"), Mount(dyn, "om", "om"), Mount(dyn2, "om2", "om2")], InlineRunner()
    )
    collided = False
    for op, c, i in ops:
        t = dyn2 if i % 7 == 0 else dyn
        if t is dyn2:
            c += 10  # clusters of its own (a cluster two tables claim is a collision, below)
        names = {m.name for m in t.ms}
        if op == "add" and f"s{c}.m{i}" not in names:
            t.ms.append(t.metric(c, i))
        elif op == "source":
            t.ms.extend(t.metric(c, j) for j in range(i, i + 5) if f"s{c}.m{j}" not in names)
        elif op == "drop" and t.ms:
            t.ms.pop(data.draw(st.integers(0, len(t.ms) - 1)))
        elif op == "drop_source":
            t.ms = [m for m in t.ms if m.cluster != c]
            t.inds.pop(c, None)
        elif op == "replace" and t.ms:
            k = data.draw(st.integers(0, len(t.ms) - 1))
            old = t.ms[k]
            t.ms[k] = t.metric(old.cluster, old.item, old.name)
        elif op == "collide":  # a name, PMID or cluster another metric or table has: the rebuild's job
            if i % 5 == 0:
                (dyn2 if t is dyn else dyn).ms.append(t.metric(c, 999))
            else:
                if f"s{c}.m{500 + i}" not in names:  # a new name first: an update that gives up has added it
                    t.ms.append(t.metric(c, 500 + i))
                t.ms.append(t.metric(c, i, "x0" if i % 2 else None) if i % 3 else t.metric(c, i, f"s{c}.other{i}"))
            collided = True
        elif op == "indom":
            t.inds.setdefault(c, InDom(c, {0: "z"}))
        t.generation += 1
        if op == "collide" and i % 5 == 0:
            (dyn2 if t is dyn else dyn).generation += 1
        before = set(d.index.by_name)
        d.names_changed = False  # (a RESULT told pmcd of the last change)
        d._refresh_index()
        _same(d)
        assert d.names_changed == (set(d.index.by_name) != before)  # pmcd hears of a names change, and only of one
    if not collided:
        assert d.index_rebuilds == 1, "every change was an update in place"


def test_other_tables_fast_layouts_survive_a_names_change() -> None:
    static, dyn = _Static(), _Dynamic()
    d = Dispatcher(DOMAIN, [Mount(static, "static", "static"), Mount(dyn, "om", "om")], InlineRunner())
    s = _Session()
    pmids = tuple(m.pmid(DOMAIN) for m in static.ms)
    first = _fetch(d, s, pmids)
    _fetch(d, s, pmids)
    layout = d.planner.layouts()[pmids]
    assert not isinstance(layout, int) and layout.hits == 1
    dyn.ms.extend(dyn.metric(1, j) for j in range(100))
    dyn.generation += 1
    second = _fetch(d, s, pmids)  # the names change is told (PMDA_EXT_NAMES_CHANGE) ...
    assert second[12:16] != first[12:16] and second[16:] == first[16:]
    assert d.planner.layouts()[pmids] is layout and layout.hits == 2  # ... by the same layout, still fast
    assert d.index_rebuilds == 1 and d.index_updates == 1
    assert d.pmid_of("om.s1.m5") == dyn.ms[5].pmid(DOMAIN)


class _Claims(_Dynamic):
    """Its clusters are what it says, not its metrics' (a metric of another cluster is not its to serve)."""

    def __init__(self) -> None:
        super().__init__()
        self.claimed: set[int] = set()

    def clusters(self) -> set[int]:
        return set(self.claimed)


def test_a_cluster_given_up_or_claimed_takes_its_metrics_along() -> None:
    t = _Claims()
    d = Dispatcher(DOMAIN, [Mount(_Static(), "static", "static"), Mount(t, "om", "om")], InlineRunner())
    t.ms.extend(t.metric(c, j) for c in (1, 2) for j in range(3))
    for claimed in ({1, 2}, {1}, {1, 2}, set(), {2}):
        t.claimed = claimed
        t.generation += 1
        d._refresh_index()
        _same(d)
        assert {d.metric(p)[1].cluster for p in d.index.by_pmid if d.metric(p)[0].table is t} == claimed  # type: ignore[index]


def _two_dynamic() -> tuple[Dispatcher, _Dynamic, _Dynamic]:
    """A dispatcher of a static table and two dynamic ones (mounted om, om2)."""
    dyn, dyn2 = _Dynamic(), _Dynamic()
    mounts = [Mount(_Static(), "static", "static"), Mount(dyn, "om", "om"), Mount(dyn2, "om2", "om2")]
    return Dispatcher(DOMAIN, mounts, InlineRunner()), dyn, dyn2


def test_an_update_that_gives_up_at_once_reports_no_names_of_an_earlier_one() -> None:
    """One table's update adds a name; the next table's gives up before
    touching anything (a cluster the first owns): the rebuild compares with
    the names served, and pmcd hears of no change that did not happen."""
    d, dyn, dyn2 = _two_dynamic()
    dyn.ms.append(dyn.metric(11, 999))
    dyn.generation += 1
    d._refresh_index()
    dyn.ms.append(dyn.metric(1, 1))
    dyn.generation += 1
    d._refresh_index()
    assert d.names_changed and d.index_rebuilds == 1
    d.names_changed = False
    dyn2.ms.append(dyn2.metric(11, 0))  # cluster 11 is om's: a collision, the rebuild drops it
    dyn2.generation += 1
    d._refresh_index()
    _same(d)
    assert d.index_rebuilds == 2 and not d.names_changed


def test_a_collision_is_logged_once_while_it_lasts() -> None:
    """A collision makes every later names change a rebuild, which finds it
    again: it is logged when it appears, not at each rebuild; once gone and
    back, it is logged again."""
    from structlog.testing import capture_logs

    d, dyn, dyn2 = _two_dynamic()
    dyn.ms.append(dyn.metric(11, 0))
    dyn.generation += 1
    d._refresh_index()

    def change(t: _Dynamic, *add: Metric, drop: int | None = None) -> list[str]:
        if drop is not None:
            t.ms = [m for m in t.ms if m.cluster != drop]
        t.ms.extend(add)
        t.generation += 1
        with capture_logs() as logs:
            d._refresh_index()
        return [e["problem"] for e in logs if e["event"] == "table_collision"]

    assert change(dyn2, dyn2.metric(11, 1)) == ["tables om and om2 both use cluster 11"]
    rebuilds = d.index_rebuilds
    for k in range(3):  # other names come: each change is a rebuild that meets the collision again
        assert change(dyn, dyn.metric(1, k)) == []
    assert d.index_rebuilds == rebuilds + 3
    assert change(dyn2, drop=11) == []  # gone
    assert change(dyn2, dyn2.metric(11, 2)) == ["tables om and om2 both use cluster 11"]  # back
