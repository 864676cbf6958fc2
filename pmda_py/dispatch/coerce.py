"""Value coercion between tables and the wire: what a table returned for a
metric (scalar, ``{inst: value}``, pairs, :class:`~pmda_py.table.Columns`,
:class:`~pmda_py.table.PackedColumns`) as instance and value columns,
checked against the metric's type (event records become the wire's event
arrays); and a stored value decoded per the metric's type and range."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence

from pmda_py.errors import PmdaError, PmErr
from pmda_py.pmapi import TYPES, EventFlag, PmType
from pmda_py.table import PACKED_TYPECODES, Columns, Event, Metric, PackedColumns, Scalar
from pmda_py.wire import EventArray, EventParam, EventRecord, ProfilePdu, ValueBlock
from pmda_py.wire.layout import RawValue
from pmda_py.wire.result import PackedColumn

_INTS = frozenset((int,))

__all__ = ["PACKED_SIZE", "check_range", "columns", "event_arrays", "includes_all", "packed_column", "store_value"]


# types a PackedColumn can carry (DPTR blocks of fixed size), and that size
PACKED_SIZE: dict[int, int] = {t: TYPES[PmType(t)].size for t in PACKED_TYPECODES}


def includes_all(profile: ProfilePdu, indom: int) -> bool:
    if profile.g_state != 0:
        return False
    for e in profile.entries:
        if e.indom == indom:
            return e.state == 0 and not e.instances
    return True


def packed_column(type_: int, value: PackedColumns) -> PackedColumn:
    """The wire's column of a table's packed values, checked against the
    metric's type and the instance count."""
    size = PACKED_SIZE.get(type_)
    if size is None or PACKED_TYPECODES[type_] != value.typecode:
        raise TypeError(f"PackedColumns of type code {value.typecode!r} for a {PmType(type_).name} metric")
    if len(value.data) != size * len(value.insts):
        raise ValueError(f"PackedColumns: {len(value.data)} bytes for {len(value.insts)} instances of {size} bytes")
    return PackedColumn(value.data, size)


def columns(value: RawValue, type_: int) -> tuple[Sequence[int], Sequence[RawValue] | PackedColumn]:
    if type(value) is PackedColumns:
        return value.insts, packed_column(type_, value)
    if isinstance(value, Columns):
        if len(value.insts) != len(value.values):
            raise ValueError("Columns: insts and values differ in length")
        return value.insts, value.values
    if isinstance(value, Mapping):
        return list(value.keys()), list(value.values())
    if isinstance(value, (str, bytes, int, float)):
        raise TypeError(f"a metric with an indom needs {{inst: value}}, got {type(value).__name__}")
    pairs = list(value)
    return [p[0] for p in pairs], [p[1] for p in pairs]


#: the integer types' ranges, and the array codes of each numeric type (from pmapi.TYPES)
_RANGES: dict[int, tuple[int, int]] = {
    t: (info.low, info.high) for t, info in TYPES.items() if info.low is not None and info.high is not None
}
_ARRAY_CODES: dict[int, tuple[str, ...]] = {t: info.array_codes for t, info in TYPES.items() if info.array_codes}


def check_range(type_: int, vals: Sequence[RawValue]) -> None:
    if isinstance(vals, array) and vals.typecode in _ARRAY_CODES.get(type_, ()):
        return  # a typed array of the metric's own type: in range by construction
    rng = _RANGES.get(type_)
    if rng is None or not vals:
        if type_ in (PmType.FLOAT, PmType.DOUBLE):
            for v in vals:
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise TypeError(f"{PmType(type_).name} value {v!r}")
        elif type_ == PmType.STRING:
            for v in vals:
                if not isinstance(v, (str, bytes)):
                    raise TypeError(f"STRING value {v!r}")
        return
    if not _INTS.issuperset(map(type, vals)):  # min/max alone let a float or bool in between through
        for v in vals:
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{PmType(type_).name} value {v!r} is not an int")
    lo, hi = min(vals), max(vals)
    if lo < rng[0] or hi > rng[1]:
        raise OverflowError(f"{PmType(type_).name} value out of range [{lo}, {hi}]")


def event_arrays(type_: int, values: Sequence[RawValue], domain: int) -> list[EventArray]:
    """A table's event values (each a sequence of :class:`~pmda_py.table.Event`)
    as the wire's event arrays, the way libpcp_pmda's pmdaEvent* calls build
    them: a classic EVENT record carries microseconds, a missed-events
    record the count in place of its parameters."""
    highres = type_ == PmType.HIGHRES_EVENT
    out = []
    for v in values:
        if isinstance(v, (str, bytes, Event)) or not isinstance(v, Sequence):
            raise TypeError(f"an event metric's value is a sequence of Event records, not {type(v).__name__}")
        records = []
        for e in v:
            if type(e) is not Event:
                raise TypeError(f"event record {e!r} is not an Event")
            subsec = e.nsec if highres else e.nsec // 1000
            if e.missed:
                records.append(EventRecord(e.sec, subsec, int(e.flags | EventFlag.MISSED), (), e.missed))
                continue
            params = tuple(EventParam.of(m.pmid(domain), m.type, x) for m, x in e.params)
            records.append(EventRecord(e.sec, subsec, e.flags, params))
        out.append(EventArray(highres, tuple(records)))
    return out


def store_value(metric: Metric, valfmt: int, value: int | ValueBlock) -> Scalar:
    """Decode one stored value per the metric's type, and range-check it."""
    t = metric.type
    if t in (PmType.I32, PmType.U32):
        if isinstance(value, ValueBlock):
            raise PmdaError(code=PmErr.TYPE)
        v: Scalar = value & 0xFFFFFFFF
        if t == PmType.I32 and value & 0x80000000:
            v = (value & 0xFFFFFFFF) - (1 << 32)
    else:
        if not isinstance(value, ValueBlock):
            raise PmdaError(code=PmErr.TYPE)
        if value.vtype != t and not (t == PmType.AGGREGATE_STATIC and value.vtype == PmType.AGGREGATE):
            raise PmdaError(code=PmErr.TYPE)
        try:
            v = value.value()
        except PmdaError:
            raise PmdaError(code=PmErr.BADSTORE) from None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if metric.min is not None and v < metric.min:
            raise PmdaError(code=PmErr.BADSTORE)
        if metric.max is not None and v > metric.max:
            raise PmdaError(code=PmErr.BADSTORE)
        if isinstance(v, float) and math.isnan(v) and (metric.min is not None or metric.max is not None):
            raise PmdaError(code=PmErr.BADSTORE)
    return v
