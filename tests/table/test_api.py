"""The table API's own promises (pmda_py.table), without a daemon: the
names it exports, an InDom's version, declarations refused early, the
check() contract."""

from __future__ import annotations

import importlib
from typing import Callable

import pytest

import pmda_py.table as api
from pmda_py.pmapi import PM_INDOM_NULL, PmType
from pmda_py.table import InDom, Metric, Table
from pmda_py.table.base import check_mode_of


def test_every_exported_name_is_there_and_no_wire_type() -> None:
    for name in api.__all__:
        obj = getattr(api, name)
        assert not getattr(obj, "__module__", "").startswith("pmda_py.wire"), name
    # the package's modules import on their own (no cycle needs the package first)
    for mod in ("base", "indom", "metric", "requests", "values"):
        importlib.import_module(f"pmda_py.table.{mod}")


def test_an_indoms_version_moves_with_every_new_map() -> None:
    ind = InDom(3, {0: "a"})
    v = ind.version
    ind.set({1: "b"})
    assert ind.version == v + 1 and ind.instances == {1: "b"} and ind.id_of("b") == 1
    ind.instances = {2: "c"}  # assigning a new map counts too
    assert ind.version == v + 2
    ind.set_names(["x", "y"])
    assert ind.version == v + 3 and sorted(ind.instances.values()) == ["x", "y"]
    with pytest.raises(TypeError):
        ind.instances[9] = "z"  # read-only: a change the version could not see
    ind.set(dict(ind.instances))  # the same instances again: nothing changed
    assert ind.version == v + 3 and 9 not in ind.instances


def test_an_unmounted_indom_has_no_id() -> None:
    assert InDom(1).id == PM_INDOM_NULL


@pytest.mark.parametrize(
    ("declare", "match"),
    [
        (lambda: Metric("bad name", cluster=0, item=0, type=PmType.U32), "bad metric name"),
        (lambda: Metric("m", cluster=4096, item=0, type=PmType.U32), "out of range"),
        (lambda: Metric("m", cluster=0, item=0, type=99), "bad type"),
        (lambda: Metric("m", cluster=0, item=0, type=PmType.U32, labels={"a b": 1}), "bad label name"),
        (lambda: InDom(0, labels={"a": float("nan")}), "not JSON-serialisable"),
        (lambda: InDom(1 << 22), "out of range"),
    ],
)
def test_bad_declarations_are_refused_at_once(declare: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        declare()


def test_the_check_mode_is_the_declared_one() -> None:
    class Plain(Table):
        def check(self) -> None:
            pass

    class Async(Table):
        async def check(self) -> None:
            pass

    class Stat(Table):
        check_mode = "inline"

        def check(self) -> None:
            pass

    assert check_mode_of(Table) == "thread"  # (the base check does nothing: it is never run)
    assert [check_mode_of(t) for t in (Plain, Async, Stat)] == ["thread", "async", "inline"]


def test_an_indoms_name_index_is_made_when_asked_and_follows_its_instances() -> None:
    """An indom keeps no name -> id index until one is asked for (tables
    make 100 000s of indoms that pmcd never looks up by name); a change of
    instances, however made, is seen by the next lookup."""
    from pmda_py.errors import UnknownInstance

    ind = InDom(5, {0: "a x", 1: "b"})

    def index() -> object:
        return ind._by_name

    assert index() is None and ind._refused is None
    assert ind.id_of("a x") == 0 and ind.id_of("a") == 0 and index() is not None
    ind.set({2: "c"})
    assert ind.id_of("c") == 2
    with pytest.raises(UnknownInstance):
        ind.id_of("b")
    ind.instances = {3: "d"}
    assert ind.id_of("d") == 3
    listed = InDom(6, {1: "one"}, listing=((1, "one"), (1, "uno")))
    assert listed.id_of("uno") == 1  # (a name of the listing: as listed)


def test_a_name_the_cache_refuses_is_left_out_and_logged_once() -> None:
    """InDom.set_names: an empty name, or one equal to another up to the
    first space but not after it, is left out (the others keep their ids)
    and logged once, not at every call."""
    import structlog.testing

    ind = InDom(4)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            got = ind.set_names(["disk one", "", "disk two", "net"])
    assert sorted(got.values()) == ["disk one", "net"]
    assert dict(ind.instances) == got
    refused = [e for e in logs if e["event"] == "instance_refused"]
    assert sorted(e["name"] for e in refused) == ["", "disk two"], refused
    assert ind.id_of("disk") == ind.id_of("disk one")
