"""The fast FETCH path (a repeated fetch's layout, cached) against the
general path: the same bytes for every shape, type, value and profile, and
a changed shape, profile or instance set gives the right reply."""

from __future__ import annotations

import math
import struct
from collections.abc import Coroutine, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.dispatch import Dispatcher, Mount
from pmda_py.dispatch import fetch as fetch_module
from pmda_py.pmapi import PmType
from pmda_py.session import Request
from pmda_py.table import FetchRequest, InDom, Metric, Table
from pmda_py.testing.support import InlineRunner
from pmda_py.wire import FetchPdu, ProfileEntry, ProfilePdu, ResultPdu, decode_pdu

DOMAIN = 252
INDOM_SERIAL = 7
INDOM_ID = (DOMAIN << 22) | INDOM_SERIAL
TYPES = [PmType.I32, PmType.U32, PmType.I64, PmType.U64, PmType.FLOAT, PmType.DOUBLE]
LIMITS = {
    PmType.I32: (-(1 << 31), (1 << 31) - 1),
    PmType.U32: (0, (1 << 32) - 1),
    PmType.I64: (-(1 << 63), (1 << 63) - 1),
    PmType.U64: (0, (1 << 64) - 1),
}


class _Session:
    def __init__(self) -> None:
        self.prof = ProfilePdu()

    def profile(self, context: int) -> ProfilePdu:
        return self.prof

    def attributes(self, context: int) -> dict[str, str]:
        return {}


class _Shaped(Table):
    """Metrics of the given types, each singular or over one indom; answers ``self.answer``."""

    name = "shaped"

    def __init__(self, specs: Sequence[tuple[int, bool]]) -> None:
        self.indom = InDom(INDOM_SERIAL, {i: f"i{i}" for i in range(64)})
        self.ms = [
            Metric(f"m{k}", cluster=0, item=k, type=t, indom=self.indom if multi else None)
            for k, (t, multi) in enumerate(specs)
        ]
        self.answer: dict[Metric, Any] = {}

    def metrics(self) -> Sequence[Metric]:
        return self.ms

    def indoms(self) -> Sequence[InDom]:
        return [self.indom]

    async def fetch(self, request: FetchRequest) -> Any:
        return dict(self.answer)


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the fetch awaited something")


def _fetch(d: Dispatcher, s: _Session, pmids: tuple[int, ...]) -> bytes:
    reply = _run(d.handle(Request(FetchPdu(pmids), 0, s.prof, s.attributes(0))))
    return bytes(reply.encode())


def _pair(specs: Sequence[tuple[int, bool]]) -> tuple[_Shaped, Dispatcher, _Shaped, Dispatcher]:
    fast_t, gen_t = _Shaped(specs), _Shaped(specs)
    fast = Dispatcher(DOMAIN, [Mount(fast_t, "f", "f")], InlineRunner())
    gen = Dispatcher(DOMAIN, [Mount(gen_t, "f", "f")], InlineRunner())
    gen.planner.fast_enabled = False
    return fast_t, fast, gen_t, gen


def _value(t: int) -> st.SearchStrategy[Any]:
    if t in LIMITS:
        lo, hi = LIMITS[PmType(t)]
        edge = st.sampled_from([lo, hi, lo - 1, hi + 1, 0, -1, 1])
        return st.one_of(edge, edge, st.integers(lo, hi), st.just(True), st.just(1.5), st.none())
    return st.one_of(
        st.floats(width=32 if t == PmType.FLOAT else 64, allow_nan=False),
        st.sampled_from([0.0, -0.0, 3.4028234663852886e38, 1e39, -1e300, math.inf, 2**64, -(2**70)]),
        st.integers(-(2**60), 2**60),
        st.just(False),
        st.just("x"),
    )


specs_st = st.lists(st.tuples(st.sampled_from(TYPES), st.booleans()), min_size=1, max_size=12)


@st.composite
def _answer(draw: st.DrawFn, metrics: Sequence[Metric], insts: Sequence[int], clean: bool) -> dict[Metric, Any]:
    """Values for ``metrics`` (``clean``: only in-range numbers); every indom metric over ``insts``."""
    out: dict[Metric, Any] = {}
    for m in metrics:
        if clean:
            lo, hi = LIMITS.get(PmType(m.type), (-(2**24), 2**24))
            v: st.SearchStrategy[Any] = st.one_of(st.sampled_from([lo, hi]), st.integers(lo, hi))
        else:
            v = _value(m.type)
        if m.indom is None:
            out[m] = draw(v)
        else:
            out[m] = {i: draw(v) for i in insts}
    return out


profiles_st = st.one_of(
    st.just(ProfilePdu()),
    st.builds(
        lambda state, insts: ProfilePdu(entries=(ProfileEntry(INDOM_ID, state, tuple(insts)),)),
        st.sampled_from([0, 1]),
        st.lists(st.integers(0, 40), max_size=6),
    ),
    st.just(ProfilePdu(g_state=1)),
)


@settings(max_examples=300)
@given(data=st.data(), specs=specs_st)
@pytest.mark.slow
def test_fast_path_bytes_equal_general_path(data: st.DataObject, specs: list[tuple[int, bool]]) -> None:
    """Fetch after fetch (values, instance sets, profiles, PMID lists
    changing or not), the fast dispatcher's reply is the general one's."""
    fast_t, fast, gen_t, gen = _pair(specs)
    fs, gs = _Session(), _Session()
    all_pmids = [m.pmid(DOMAIN) for m in fast_t.ms]
    insts = data.draw(st.lists(st.integers(0, 40), unique=True, max_size=12), label="insts")
    pmids = tuple(all_pmids)
    hits = 0
    for step in range(data.draw(st.integers(2, 6), label="steps")):
        change = data.draw(st.sampled_from(["none", "none", "values", "insts", "profile", "pmids"]), label="change")
        if change == "insts":
            insts = data.draw(st.lists(st.integers(0, 40), unique=True, max_size=12))
        elif change == "profile":
            fs.prof = gs.prof = data.draw(profiles_st)
        elif change == "pmids":
            pmids = tuple(data.draw(st.lists(st.sampled_from([*all_pmids, 0x3FFFFFF]), min_size=1, max_size=14)))
        clean = data.draw(st.booleans(), label="clean")
        ans = data.draw(_answer(fast_t.ms, insts, clean), label=f"answer {step}")
        fast_t.answer = ans
        gen_t.answer = dict(zip(gen_t.ms, ans.values()))
        want = _fetch(gen, gs, pmids)
        assert _fetch(fast, fs, pmids) == want
        hits = sum(f.hits for f in fast.planner.layouts().values() if not isinstance(f, int))
    if hits == 0:
        return  # nothing repeated with good values: the equality above is all there is to check


def _decoded(data: bytes) -> dict[int, list[tuple[int, Any]]]:
    pdu = decode_pdu(data)
    assert isinstance(pdu, ResultPdu)
    return {vs.pmid: [(v.inst, v.value) for v in vs.values] for vs in pdu.vsets}


def _u64(v: Any) -> int:
    raw = v.payload if hasattr(v, "payload") else v
    return int(struct.unpack(">Q", raw)[0]) if isinstance(raw, (bytes, bytearray)) else int(raw)


def test_repeat_takes_the_fast_path_and_changes_invalidate_it() -> None:
    t, d, _gt, _g = _pair([(PmType.U32, True), (PmType.U64, False), (PmType.DOUBLE, True)])
    s = _Session()
    a, b, c = t.ms
    pmids = tuple(m.pmid(DOMAIN) for m in t.ms)
    t.answer = {a: {1: 10, 2: 20}, b: 5, c: {1: 0.5, 2: 1.5}}
    first = _fetch(d, s, pmids)
    layout = d.planner.layouts()[pmids]
    assert not isinstance(layout, int) and layout.hits == 0
    t.answer = {a: {1: 11, 2: 21}, b: 6, c: {1: 2.5, 2: 3.5}}
    second = _fetch(d, s, pmids)
    assert layout.hits == 1  # the repeat went the fast way
    assert second != first
    got = _decoded(second)
    assert [(i, int(v)) for i, v in got[a.pmid(DOMAIN)]] == [(1, 11), (2, 21)]
    # a changed instance set: the reply has the new instances
    t.answer = {a: {3: 30}, b: 7, c: {1: 4.5, 2: 5.5, 9: 6.5}}
    got = _decoded(_fetch(d, s, pmids))
    assert [i for i, _v in got[a.pmid(DOMAIN)]] == [3]
    assert [i for i, _v in got[c.pmid(DOMAIN)]] == [1, 2, 9]
    assert layout.hits == 1
    # a changed profile: only instance 2 of the indom
    s.prof = ProfilePdu(entries=(ProfileEntry(INDOM_ID, 1, (2,)),))
    t.answer = {a: {1: 12, 2: 22}, b: 8, c: {1: 7.5, 2: 8.5}}
    got = _decoded(_fetch(d, s, pmids))
    assert [i for i, _v in got[a.pmid(DOMAIN)]] == [2]
    assert [i for i, _v in got[c.pmid(DOMAIN)]] == [2]
    # an equal profile in a new object (pmcd resends it on context switches): still the fast way
    s.prof = ProfilePdu(entries=(ProfileEntry(INDOM_ID, 1, (2,)),))
    _fetch(d, s, pmids)
    fast = d.planner.layouts()[pmids]
    assert not isinstance(fast, int)
    before = fast.hits
    s.prof = ProfilePdu(entries=(ProfileEntry(INDOM_ID, 1, (2,)),))
    got = _decoded(_fetch(d, s, pmids))
    assert fast.hits == before + 1
    assert [i for i, _v in got[c.pmid(DOMAIN)]] == [2]
    # a changed shape (another PMID list): its own reply
    got = _decoded(_fetch(d, s, (c.pmid(DOMAIN), b.pmid(DOMAIN))))
    assert list(got) == [c.pmid(DOMAIN), b.pmid(DOMAIN)]
    # an out-of-range value after a fast fetch: the general path's precise error for that metric only
    s.prof = ProfilePdu()
    t.answer = {a: {1: 1, 2: 2}, b: 1, c: {1: 1.0, 2: 2.0}}
    _fetch(d, s, pmids)
    _fetch(d, s, pmids)
    t.answer = {a: {1: 1, 2: 1 << 40}, b: 1, c: {1: 1.0, 2: 2.0}}
    pdu = decode_pdu(_fetch(d, s, pmids))
    assert isinstance(pdu, ResultPdu)
    errors = {vs.pmid: vs.error for vs in pdu.vsets}
    assert errors[a.pmid(DOMAIN)] < 0 and errors[b.pmid(DOMAIN)] == 0


def test_the_planner_holds_a_bounded_number_of_pmids(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client of pmcd chooses how long its PMID lists are, and each plan
    the planner keeps holds its list: the plans stay within PLAN_PMIDS in
    all, a list too long to keep is still answered (the general path, every
    time), and only short requests are held to find their plans by identity."""
    monkeypatch.setattr(fetch_module, "PLAN_PMIDS", 256)  # a plan of at most 64 PMIDs; held requests: 2
    specs = [(PmType.U32, False)] * 40
    t, d, gt, g = _pair(specs)
    t.answer = {m: 7 * k for k, m in enumerate(t.ms)}
    gt.answer = {m: 7 * k for k, m in enumerate(gt.ms)}
    pmids = [m.pmid(DOMAIN) for m in t.ms]
    s = _Session()
    lists = [tuple((pmids[k:] + pmids[:k])[:30]) for k in range(12)]
    for _ in range(2):
        for lst in lists:
            assert _fetch(d, s, lst) == _fetch(g, s, lst)
            plans, held_pmids, requests = d.planner.holding()
            assert held_pmids <= 256 and plans <= fetch_module.SLOTS and requests == 0
    assert d.planner.holding()[:2] == (8, 240)  # the last 8 lists of 30 PMIDs
    assert set(d.planner.layouts()) == set(lists[-8:])
    long = tuple(pmids + pmids[:30])  # 70 PMIDs (a FETCH may repeat some): over the 64 a plan may hold
    for _ in range(3):
        assert _fetch(d, s, long) == _fetch(g, s, long)
    assert long not in d.planner.layouts() and d.planner.holding()[:2] == (8, 240)  # none of the others dropped
    short = FetchPdu(tuple(pmids[:2]))
    for _ in range(3):  # the same decoded request, as the session hands a repeated one over
        reply = _run(d.handle(Request(short, 0, s.prof, s.attributes(0))))
        assert bytes(reply.encode()) == _fetch(g, s, short.pmids)
    assert d.planner.holding()[2] == 1
    layout = d.planner.layouts()[short.pmids]
    assert not isinstance(layout, int) and layout.hits == 2
