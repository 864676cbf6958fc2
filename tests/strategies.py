"""Hypothesis strategies for PDUs and pmapi values."""

from __future__ import annotations

from hypothesis import strategies as st

from pmda_py.pmapi import PmDesc, PmUnits
from pmda_py.wire import (
    AttrPdu,
    CredsPdu,
    DescIdsPdu,
    DescPdu,
    DescReqPdu,
    DescsPdu,
    ErrorPdu,
    EventArray,
    EventParam,
    EventRecord,
    FetchPdu,
    HighresFetchPdu,
    HighresResultPdu,
    InstanceEntry,
    InstancePdu,
    InstanceReqPdu,
    LabelPdu,
    LabelReqPdu,
    LabelSet,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    PmValue,
    ProfileEntry,
    ProfilePdu,
    ResultPdu,
    TextPdu,
    TextReqPdu,
    ValFmt,
    ValueBlock,
    ValueSet,
)

i32 = st.integers(-(2**31), 2**31 - 1)
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
from_ = st.integers(0, 1000)
text = st.text(max_size=40)
name = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=30)

units = st.builds(
    PmUnits,
    dim_space=st.integers(-8, 7),
    dim_time=st.integers(-8, 7),
    dim_count=st.integers(-8, 7),
    scale_space=st.integers(0, 15),
    scale_time=st.integers(0, 15),
    scale_count=st.integers(-8, 7),
    extra=st.integers(0, 255),
)
desc = st.builds(PmDesc, pmid=u32, type=i32, indom=u32, sem=i32, units=units)

event_param = st.one_of(
    st.builds(EventParam.of, u32, st.just(0), i32),
    st.builds(EventParam.of, u32, st.just(3), st.integers(0, 2**64 - 1)),
    st.builds(EventParam.of, u32, st.just(5), st.floats(allow_nan=False)),
    st.builds(EventParam.of, u32, st.just(6), text),
    st.builds(EventParam.of, u32, st.just(7), st.binary(max_size=12)),
)
event_record = st.builds(
    EventRecord, i32, i32, st.integers(0, 0x7FFFFFFF), st.lists(event_param, max_size=3).map(tuple)
)


@st.composite
def event_array(draw: st.DrawFn) -> EventArray:
    highres = draw(st.booleans())
    recs = draw(st.lists(event_record, max_size=3))
    if highres:
        recs = [EventRecord(r.sec, r.subsec, r.flags, r.params) for r in recs]
    return EventArray(highres, tuple(recs))


def _block(type_: int, value: object) -> ValueBlock:
    return ValueBlock.of(type_, value)  # type: ignore[arg-type]


block = st.one_of(
    st.builds(_block, st.just(2), i64),
    st.builds(_block, st.just(3), st.integers(0, 2**64 - 1)),
    st.builds(_block, st.just(4), st.floats(width=32, allow_nan=False)),
    st.builds(_block, st.just(5), st.floats(allow_nan=False)),
    st.builds(_block, st.just(6), text),
    st.builds(_block, st.just(7), st.binary(max_size=20)),
    event_array().map(lambda a: ValueBlock.of(10 if a.highres else 9, a)),
)


@st.composite
def value_set(draw: st.DrawFn) -> ValueSet:
    pmid = draw(u32)
    kind = draw(st.sampled_from(["insitu", "dptr", "error", "empty"]))
    insts = draw(st.lists(i32, min_size=1, max_size=5))
    if kind == "insitu":
        return ValueSet(pmid, tuple(PmValue(i, draw(u32)) for i in insts), ValFmt.INSITU)
    if kind == "dptr":
        fmt = draw(st.sampled_from([ValFmt.DPTR, ValFmt.SPTR]))
        return ValueSet(pmid, tuple(PmValue(i, draw(block)) for i in insts), fmt)
    if kind == "error":
        return ValueSet.failed(pmid, draw(st.integers(-(2**31), -1)))
    return ValueSet(pmid)


label_dict = st.dictionaries(
    st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True),
    st.one_of(st.text(max_size=10), st.integers(-1000, 1000), st.booleans(), st.none()),
    max_size=5,
)
label_set = st.builds(LabelSet.from_dict, label_dict, st.sampled_from([2, 4, 8, 16, 32, 0x90]), i32)

pdus = st.one_of(
    st.builds(ErrorPdu, i32, st.none(), from_),
    st.builds(ErrorPdu, i32, u32, from_),
    st.builds(CredsPdu, st.lists(u32, max_size=4).map(tuple), from_),
    st.builds(
        ProfilePdu,
        i32,
        st.integers(0, 1),
        st.lists(st.builds(ProfileEntry, u32, st.integers(0, 1), st.lists(i32, max_size=4).map(tuple)), max_size=3).map(
            tuple
        ),
        from_,
    ),
    st.builds(FetchPdu, st.lists(u32, max_size=10).map(tuple), i32, from_),
    st.builds(HighresFetchPdu, st.lists(u32, max_size=10).map(tuple), i32, from_),
    st.builds(ResultPdu, st.lists(value_set(), max_size=5).map(tuple), i32, i32, from_),
    st.builds(HighresResultPdu, st.lists(value_set(), max_size=5).map(tuple), i64, i64, from_),
    st.builds(DescReqPdu, u32, from_),
    st.builds(DescPdu, desc, from_),
    st.builds(DescsPdu, st.lists(desc, max_size=4).map(tuple), from_),
    st.builds(PmnsIdsPdu, st.lists(u32, max_size=4).map(tuple), i32, from_),
    st.builds(DescIdsPdu, pmids=st.lists(u32, max_size=4).map(tuple), from_=from_),
    st.builds(InstanceReqPdu, u32, i32, st.one_of(st.none(), name), from_),
    st.builds(
        InstancePdu,
        u32,
        st.lists(st.builds(InstanceEntry, i32, st.one_of(st.just(""), name)), max_size=5).map(tuple),
        from_,
    ),
    st.builds(TextReqPdu, u32, i32, from_),
    st.builds(TextPdu, u32, text, from_),
    st.builds(PmnsNamesPdu, st.lists(name, max_size=5).map(tuple), st.none(), from_),
    st.lists(name, max_size=5).flatmap(
        lambda ns: st.builds(
            PmnsNamesPdu,
            st.just(tuple(ns)),
            st.lists(st.integers(0, 1), min_size=len(ns), max_size=len(ns)).map(tuple),
            from_,
        )
    ),
    st.builds(PmnsChildPdu, name, st.integers(0, 1), from_),
    st.builds(PmnsTraversePdu, name, st.just(0), from_),
    st.builds(AttrPdu, i32, st.binary(max_size=40), from_),
    st.builds(LabelReqPdu, u32, i32, from_),
    st.builds(LabelPdu, u32, i32, st.lists(label_set, max_size=4).map(tuple), from_),
)
