"""Every form of the table API on the fast FETCH path: ``Columns`` with a
list, a tuple or an ``array`` (of the metric's type or another), and
``PackedColumns`` (right or wrong), answer the general path's bytes fetch
after fetch -- instance lists changed, changed in place (one object per metric
or one for every metric), shared and unshared, forms switched, profiles
narrowed -- and a repeat of a well-formed answer takes the fast
path in each form."""

from __future__ import annotations

import struct
from array import array
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.pmapi import PmType
from pmda_py.table import PACKED_TYPECODES, Columns, Metric, PackedColumns
from pmda_py.wire.layout import FIXED_CODES
from tests.dispatch.test_fast_fetch import DOMAIN, LIMITS, TYPES, _fetch, _pair, _Session, _value, profiles_st

FORMS = ["dict", "list", "tuple", "array", "array_double", "packed", "packed_long", "packed_code"]


def _array(code: str, values: list[Any]) -> array[Any] | None:
    try:
        return array(code, values)
    except (TypeError, OverflowError):
        return None


def _packed(t: int, values: list[Any], extra: int = 0, code: str | None = None) -> PackedColumns | None:
    tc = code or PACKED_TYPECODES.get(t, "Q")
    try:
        data = struct.pack(f">{len(values)}{tc}", *values)
    except (struct.error, OverflowError, TypeError):
        return None
    return PackedColumns(array("I", range(len(values))), data + b"\0" * extra, tc)


def _form(form: str, t: int, insts: Any, values: list[Any]) -> Any:
    """``values`` over ``insts`` in ``form`` (a dict when the form cannot carry them)."""
    out: Any = None
    if form == "list":
        out = Columns(insts if type(insts) is list else list(insts), list(values))
    elif form == "tuple":
        out = Columns(tuple(insts), tuple(values))
    elif form in ("array", "array_double"):
        vals = _array("d" if form == "array_double" else FIXED_CODES[t], values)
        ins = insts if type(insts) is array else _array("I", list(insts))
        out = Columns(ins, vals) if vals is not None and ins is not None else None
    elif form.startswith("packed"):
        p = _packed(t, values, 8 if form == "packed_long" else 0, "d" if form == "packed_code" else None)
        if p is not None:
            out = PackedColumns(insts, p.data, p.typecode)
    return out if out is not None else dict(zip(insts, values))


@st.composite
def _values(draw: st.DrawFn, t: int, n: int, clean: bool) -> list[Any]:
    if clean:
        lo, hi = LIMITS.get(PmType(t), (-(2**24), 2**24))
        v: st.SearchStrategy[Any] = st.one_of(st.sampled_from([lo, hi]), st.integers(lo, hi))
    else:
        v = _value(t)
    return [draw(v) for _ in range(n)]


@settings(max_examples=400, deadline=None)
@given(data=st.data(), specs=st.lists(st.tuples(st.sampled_from(TYPES), st.booleans()), min_size=1, max_size=8))
@pytest.mark.slow
def test_every_form_answers_the_general_paths_bytes(data: st.DataObject, specs: list[tuple[int, bool]]) -> None:
    fast_t, fast, gen_t, gen = _pair(specs)
    fs, gs = _Session(), _Session()
    pmids = tuple(m.pmid(DOMAIN) for m in fast_t.ms)
    # each metric's instance list: an object the table keeps (and may change in place), its own
    # or one for every metric (as one indom's instance array is)
    kind = data.draw(st.sampled_from(["list", "array"]), label="insts kind")
    one = data.draw(st.booleans(), label="one object for all")

    def objects(ids: list[int]) -> dict[Metric, Any]:
        made = list(ids) if kind == "list" else array("I", ids)
        return dict(zip(fast_t.ms, [made if one else made[:] for _ in fast_t.ms]))

    ids = data.draw(st.lists(st.integers(0, 40), unique=True, max_size=10), label="insts")
    shared = objects(ids)
    forms = {m: data.draw(st.sampled_from(FORMS), label=f"form {m.name}") for m in fast_t.ms}
    for step in range(data.draw(st.integers(2, 6), label="steps")):
        change = data.draw(
            st.sampled_from(["none", "none", "none", "inplace", "inplace_one", "insts", "unshare", "form", "profile"])
        )
        if change == "inplace":  # the same objects, other ids (same count)
            for ins in {id(x): x for x in shared.values()}.values():
                ins[:] = array("I", [i + 1 for i in ins]) if type(ins) is array else [i + 1 for i in ins]
        elif change == "inplace_one":  # one metric's object (perhaps every metric's) changed in place
            ins = shared[data.draw(st.sampled_from(fast_t.ms))]
            ins[:] = array("I", [i + 2 for i in ins]) if type(ins) is array else [i + 2 for i in ins]
        elif change == "insts":
            ids = data.draw(st.lists(st.integers(0, 40), unique=True, max_size=10))
            shared = objects(ids)
        elif change == "unshare":  # one metric gets an object of its own: equal, or with other ids
            m = data.draw(st.sampled_from(fast_t.ms))
            mine = shared[m][:]
            if data.draw(st.booleans()):
                mine.reverse()
            shared = {**shared, m: mine}
        elif change == "form":
            m = data.draw(st.sampled_from(fast_t.ms))
            forms[m] = data.draw(st.sampled_from(FORMS))
        elif change == "profile":
            fs.prof = gs.prof = data.draw(profiles_st)
        clean = data.draw(st.booleans(), label="clean")
        ans: dict[Metric, Any] = {}
        for m in fast_t.ms:
            if m.indom is None:
                ans[m] = data.draw(_values(m.type, 1, clean))[0]
            else:
                ans[m] = _form(forms[m], m.type, shared[m], data.draw(_values(m.type, len(shared[m]), clean)))
        fast_t.answer = ans
        gen_t.answer = dict(zip(gen_t.ms, ans.values()))
        assert _fetch(fast, fs, pmids) == _fetch(gen, gs, pmids), step


_TYPES = [PmType.U64, PmType.I64, PmType.DOUBLE, PmType.FLOAT, PmType.U32, PmType.I32]


@pytest.mark.parametrize(
    ("form", "t"),
    [
        (form, t)
        for form in ("dict", "list", "tuple", "array", "packed")
        for t in _TYPES
        if form != "packed" or t in PACKED_TYPECODES  # PackedColumns carries 8-byte and FLOAT values only
    ],
)
def test_a_repeat_takes_the_fast_path_in_every_form(form: str, t: int) -> None:
    fast_t, fast, gen_t, gen = _pair([(t, True), (t, False), (t, True)])
    s = _Session()
    pmids = tuple(m.pmid(DOMAIN) for m in fast_t.ms)
    insts = array("I", [3, 1, 4])
    replies = []
    for k in range(3):
        ans = {
            m: k + 7 if m.indom is None else _form(form, t, insts, [k * 10 + j + 1 for j in range(3)])
            for m in fast_t.ms
        }
        fast_t.answer, gen_t.answer = ans, dict(zip(gen_t.ms, ans.values()))
        replies.append(_fetch(fast, s, pmids))
        assert replies[-1] == _fetch(gen, _Session(), pmids)
    layout = fast.planner.layouts()[pmids]
    assert not isinstance(layout, int) and layout.hits == 2, form  # both repeats went the fast way
    assert len(set(replies)) == 3


@pytest.mark.parametrize("form", ["dict", "list", "array", "packed"])
@pytest.mark.parametrize("kind", ["list", "array"])
def test_instances_changed_in_place_are_seen(form: str, kind: str) -> None:
    """A table that keeps one instance list and rewrites it in place (same
    length, other ids): the reply carries the new ids."""
    fast_t, fast, gen_t, gen = _pair([(PmType.U64, True), (PmType.U64, True)])
    s = _Session()
    pmids = tuple(m.pmid(DOMAIN) for m in fast_t.ms)
    insts: Any = [1, 2, 3] if kind == "list" else array("I", [1, 2, 3])
    for k in range(4):
        if k == 3:
            insts[:] = [5, 6, 7] if kind == "list" else array("I", [5, 6, 7])
        ans = {m: _form(form, m.type, insts, [k, k + 1, k + 2]) for m in fast_t.ms}
        fast_t.answer, gen_t.answer = ans, dict(zip(gen_t.ms, ans.values()))
        assert _fetch(fast, s, pmids) == _fetch(gen, _Session(), pmids), k


def _kept_record(form: str, t: int, insts: Any, values: list[Any]) -> Any:
    """A record a table keeps and changes in place: ``Columns`` of a list or
    an ``array`` (of the metric's type), ``PackedColumns`` of a bytearray."""
    if form == "array":
        vals = _array(FIXED_CODES[t], values)
        if vals is not None:
            return Columns(insts, vals)
    if form == "packed" and t in PACKED_TYPECODES:
        p = _packed(t, values)
        if p is not None:
            return PackedColumns(insts, bytearray(p.data), p.typecode)  # type: ignore[arg-type]
    return Columns(insts, list(values))


def _change_values(record: Any, change: str, new: Any) -> None:
    """Rewrite, grow or shrink a kept record's values in place."""
    seq: Any = record.data if isinstance(record, PackedColumns) else record.values
    size = struct.calcsize(record.typecode) if isinstance(record, PackedColumns) else 1
    if change == "values" and len(seq):
        if isinstance(record, PackedColumns):
            seq[:size] = bytes(reversed(seq[:size]))
        else:
            try:
                seq[0] = new
            except (TypeError, OverflowError):
                seq[0] = seq[-1]
    elif change == "grow":
        seq.extend(seq[:size] if isinstance(record, PackedColumns) else seq[:1])
    elif change == "shrink" and len(seq):
        del seq[-size:]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), specs=st.lists(st.tuples(st.sampled_from(TYPES), st.booleans()), min_size=1, max_size=8))
@pytest.mark.slow
def test_records_kept_and_changed_in_place(data: st.DataObject, specs: list[tuple[int, bool]]) -> None:
    """A table that keeps its ``Columns``/``PackedColumns`` records from fetch
    to fetch (the fast path then checks only what can change in place) and
    changes their values, lengths and instance ids in place, or replaces
    one: the general path's bytes, fetch after fetch."""
    fast_t, fast, gen_t, gen = _pair(specs)
    fs, gs = _Session(), _Session()
    pmids = tuple(m.pmid(DOMAIN) for m in fast_t.ms)
    kind = data.draw(st.sampled_from(["list", "array"]), label="insts kind")
    one = data.draw(st.booleans(), label="one instance object for all")
    ids = data.draw(st.lists(st.integers(0, 40), unique=True, max_size=6), label="insts")
    made: Any = list(ids) if kind == "list" else array("I", ids)
    insts = dict(zip(fast_t.ms, [made if one else made[:] for _ in fast_t.ms]))
    forms = {m: data.draw(st.sampled_from(["list", "array", "packed"]), label=f"form {m.name}") for m in fast_t.ms}
    indom_ms = [m for m in fast_t.ms if m.indom is not None]
    kept = {m: _kept_record(forms[m], m.type, insts[m], data.draw(_values(m.type, len(ids), True))) for m in indom_ms}
    for step in range(data.draw(st.integers(2, 8), label="steps")):
        change = data.draw(
            st.sampled_from(["none", "none", "values", "grow", "shrink", "insts", "insts_len", "own", "replace"])
        )
        if indom_ms and change != "none":
            m = data.draw(st.sampled_from(indom_ms))
            rec = kept[m]
            if change in ("values", "grow", "shrink"):
                _change_values(rec, change, data.draw(_value(m.type)))
            elif change == "insts" and len(rec.insts):  # other ids, in place (perhaps every metric's)
                rec.insts[0] = (rec.insts[0] + 41) % 64
            elif change == "insts_len":
                if len(rec.insts) < 8:
                    rec.insts.append(63 - len(rec.insts))
            elif change == "own":  # an equal instance object of its own, changed in place later
                kept[m] = attrs.evolve(rec, insts=rec.insts[:])
            elif change == "replace":
                kept[m] = _kept_record(forms[m], m.type, rec.insts, data.draw(_values(m.type, len(rec.insts), True)))
        if data.draw(st.booleans(), label="profile change"):
            fs.prof = gs.prof = data.draw(profiles_st)
        ans = {m: kept.get(m, k + step) for k, m in enumerate(fast_t.ms)}
        fast_t.answer = ans
        gen_t.answer = dict(zip(gen_t.ms, ans.values()))
        assert _fetch(fast, fs, pmids) == _fetch(gen, gs, pmids), (step, change)


@pytest.mark.parametrize("form", ["list", "array", "packed"])
@pytest.mark.parametrize(
    "change",
    [
        "values",
        "grow",
        "shrink",
        "grow_one_shrink_another",
        "insts",
        "insts_len",
        "own_insts_in_place",
        "other_insts_object_in_place",
    ],
)
def test_a_kept_record_changed_in_place_is_seen(form: str, change: str) -> None:
    """Records kept from fetch to fetch take the fast path while nothing
    changes, and every change a kept record can undergo in place shows in
    the next reply (the general path's bytes)."""
    fast_t, fast, gen_t, gen = _pair([(PmType.U64, True), (PmType.U64, True), (PmType.U64, True)])
    s = _Session()
    pmids = tuple(m.pmid(DOMAIN) for m in fast_t.ms)
    shared = array("I", [1, 2, 3])
    own = array("I", [1, 2, 3])  # the last metric's own object, equal to the shared one
    recs = {
        m: _kept_record(form, m.type, own if k == 2 else shared, [10 * k + 1, 10 * k + 2, 10 * k + 3])
        for k, m in enumerate(fast_t.ms)
    }

    def fetch() -> bytes:
        fast_t.answer = dict(recs)
        gen_t.answer = dict(zip(gen_t.ms, recs.values()))
        reply = _fetch(fast, s, pmids)
        assert reply == _fetch(gen, _Session(), pmids)
        return reply

    first = fetch()
    for _ in range(3):
        assert fetch() == first
    layout = fast.planner.layouts()[pmids]
    assert not isinstance(layout, int) and layout.hits == 3  # the repeats went the fast way
    rec = recs[fast_t.ms[0]]
    if change in ("values", "grow", "shrink"):
        _change_values(rec, change, 99)
    elif change == "grow_one_shrink_another":  # as many values in all, not per metric
        _change_values(rec, "grow", 0)
        _change_values(recs[fast_t.ms[1]], "shrink", 0)
    elif change == "insts":
        shared[1] = 7
    elif change == "insts_len":
        shared.append(4)
    elif change == "own_insts_in_place":
        own[0] = 9
    else:  # a metric's own object, taken up after the layout was learnt, changed in place
        recs[fast_t.ms[1]] = attrs.evolve(recs[fast_t.ms[1]], insts=array("I", [1, 2, 3]))
        fetch()
        recs[fast_t.ms[1]].insts[2] = 5
    assert fetch() != first


@pytest.mark.parametrize(
    ("form", "t", "new", "stand_in"),
    [
        ("packed", PmType.U64, [1, 2, 3], True),  # equal: the same bytes, the kept record stands in
        ("packed", PmType.DOUBLE, [-0.0, 1.5, 2.0], False),  # other bytes: not equal
        ("array", PmType.U64, [1, 2, 3], True),
        ("array", PmType.DOUBLE, [-0.0, 1.5, 2.0], False),  # equal floats, other bytes
        ("list", PmType.U64, [1, 2, 3], False),  # Python numbers: only identity vouches
        ("list", PmType.U64, [1.0, 2, 3], False),  # equal, and not a U64's value at all
    ],
)
def test_records_equal_to_the_kept_ones_write_their_own_values(
    form: str, t: int, new: list[Any], stand_in: bool
) -> None:
    """A table that keeps its first record and makes the other afresh,
    equal (``==``) to the last one: the kept record stands in for it only
    where equal means the same bytes (PackedColumns, arrays of integers),
    never where it does not (``0.0 == -0.0``, ``1 == 1.0``); the reply is
    the general path's either way."""
    fast_t, fast, gen_t, gen = _pair([(t, True), (t, True)])
    s = _Session()
    pmids = tuple(m.pmid(DOMAIN) for m in fast_t.ms)
    old = [0.0, 1.5, 2.0] if t == PmType.DOUBLE else [1, 2, 3]

    def record(values: list[Any], insts: Any) -> Any:
        if form == "packed":
            made = _packed(t, values)
            assert made is not None
            return PackedColumns(insts, made.data, made.typecode)
        if form == "array":
            return Columns(insts, array(FIXED_CODES[t], values))
        return Columns(insts, list(values))

    def fetch(records: dict[Metric, Any]) -> bytes:
        fast_t.answer = dict(records)
        gen_t.answer = dict(zip(gen_t.ms, records.values()))
        reply = _fetch(fast, s, pmids)
        assert reply == _fetch(gen, _Session(), pmids)
        return reply

    a, b = fast_t.ms
    first, second = record([7, 8, 9], array("I", [1, 2, 3])), record(old, array("I", [1, 2, 3]))
    fetch({a: first, b: second})
    fetch({a: first, b: second})  # the layout's first hit: these records are kept
    layout = fast.planner.layouts()[pmids]
    assert not isinstance(layout, int)
    hits = layout.hits
    again = record(new, array("I", [1, 2, 3]))
    assert again is not second
    fetch({a: first, b: again})
    (col,) = [*layout.raw, *([layout.cols] if layout.cols else [])]
    if stand_in:
        assert again == second and layout.hits == hits + 1
    assert (col.kept[1] is second) == stand_in, "an equal record stands in only where equal is the same bytes"
