"""The fast FETCH path's instance check (``InstCheck``): metrics sharing one
instance sequence object are compared with its copy once, the others by
identity with it, and nothing is assumed of identity across fetches -- an
object changed in place, a sharing broken, another kind of sequence with the
same ids, all give the answer a metric-by-metric comparison gives."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.dispatch.fast import InstCheck


def _learn(seqs: Sequence[Sequence[int]]) -> InstCheck:
    check = InstCheck.learn(seqs)
    assert check is not None
    return check


def test_one_object_for_every_metric_is_followed_in_place() -> None:
    shared = array("I", [1, 2, 3])
    check = _learn([shared] * 4)
    assert check.same((shared,) * 4)
    shared[1] = 9  # the table rewrites its one instance array
    assert not check.same((shared,) * 4)
    shared[1] = 2
    assert check.same((shared,) * 4)


def test_a_sharing_given_up_is_compared_by_value() -> None:
    shared = [1, 2, 3]
    check = _learn([shared, shared, shared])
    assert check.same((shared, [1, 2, 3], shared))  # an equal object of its own: the same ids
    assert not check.same((shared, [1, 2, 4], shared))  # one metric's ids moved
    assert not check.same((shared, shared, array("I", [1, 2, 3])))  # another kind of sequence


def test_a_sharing_taken_up_is_compared_by_value() -> None:
    a, b = array("I", [5, 6]), array("I", [5, 6])
    check = _learn([a, b])
    assert check.same((a, a)) and check.same((b, b))
    a[0] = 7
    assert not check.same((a, a)) and not check.same((b, a))


def test_two_shared_objects() -> None:
    x, y = array("I", [1, 2]), [3, 4, 5]
    check = _learn([x, y, x, y, y])
    assert check.same((x, y, x, y, y))
    y.append(6)
    assert not check.same((x, y, x, y, y))
    y.pop()
    x[0] = 0
    assert not check.same((x, y, x, y, y))


def test_kinds_not_followed() -> None:
    assert InstCheck.learn([range(3)]) is None
    assert InstCheck.learn([[1], memoryview(b"ab")]) is None


_SEQS = st.lists(st.integers(0, 5), max_size=4)


def _seq(kind: str, ids: list[int]) -> Any:
    return array("I", ids) if kind == "array" else list(ids)


@settings(max_examples=500)
@given(data=st.data())
def test_same_is_a_comparison_metric_by_metric(data: st.DataObject) -> None:
    """Objects (lists and arrays), the metrics' sequences among them (some
    shared), the check learnt; then objects changed in place, and the next
    answer's sequences among the same objects and fresh ones: ``same`` says
    what comparing each metric's with a copy of its learnt one says."""
    kinds = st.sampled_from(["list", "array"])
    objs = [_seq(data.draw(kinds), ids) for ids in data.draw(st.lists(_SEQS, min_size=1, max_size=4))]
    n = data.draw(st.integers(1, 6))
    learnt = [data.draw(st.sampled_from(objs)) for _ in range(n)]
    check = _learn(learnt)
    copies = [_seq("array" if type(s) is array else "list", list(s)) for s in learnt]
    for o in objs:
        if data.draw(st.booleans()):  # changed in place
            o[:] = _seq("array" if type(o) is array else "list", data.draw(_SEQS))
    fresh = [_seq(data.draw(kinds), data.draw(_SEQS)) for _ in range(2)]
    equal = [_seq("array" if type(c) is array else "list", list(c)) for c in copies]
    nxt = [data.draw(st.sampled_from(objs + fresh + equal)) for _ in range(n)]
    expected = all(type(a) is type(b) and a == b for a, b in zip(nxt, copies))
    assert check.same(tuple(nxt)) == expected
