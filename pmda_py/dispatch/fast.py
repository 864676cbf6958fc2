"""The fast FETCH path: the layout of a repeated FETCH (same PMIDs, same
profile, same instances), learnt from the reply the general path made, and
its values taken out of the tables' answers in every form of the table API
(``{inst: value}`` dicts, :class:`~pmda_py.table.Columns` with any sequence
or an ``array`` of the metric's type, :class:`~pmda_py.table.PackedColumns`)
by a few C-level passes per form.  Sans-IO, no trio."""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Callable

from pmda_py.dispatch.coerce import includes_all
from pmda_py.dispatch.mounts import Mount
from pmda_py.table import PACKED_TYPECODES, Columns, Metric, PackedColumns, Values
from pmda_py.wire import ProfilePdu
from pmda_py.wire.layout import FIXED_CODES, FixedLayout, RawValue

__all__ = ["FastFetch"]

#: takes the profile's values out of a group's values
Picker = Callable[[Sequence[object]], Sequence[object]]
#: a raw group: its group number, metrics, instances' copies, type codes, value lengths
RawGroup = tuple[int, list[Metric], list[Sequence[int]], list[str], list[int]]

_LITTLE = sys.byteorder == "little"
_NUMBERS = frozenset((int, float))
_DICTS = frozenset((dict,))
_COLUMNS = frozenset((Columns,))
_PACKED = frozenset((PackedColumns,))
_ARRAYS = frozenset((array,))
_INSTS = attrgetter("insts")
_VALUES = attrgetter("values")
_DATA = attrgetter("data")
_TYPECODE = attrgetter("typecode")

# The value groups of a layout, each filled in request order:
_SINGLE = 0  # singular metrics' values (packed by struct)
_DICT = 1  # {inst: value} metrics' values (packed by struct)
_COLS = 2  # Columns of any sequence (packed by struct)
_PACKED_G = 3  # PackedColumns (raw: their bytes as they are)
_ARRAY8 = 4  # Columns of an array of the metric's type, 8-byte items (raw: byte-swapped on little-endian hosts)
_ARRAY4 = 5  # the same, 4-byte items
_NGROUPS = 6
_RAW = (_PACKED_G, _ARRAY8, _ARRAY4)


def _inst_copy(insts: Sequence[int]) -> Sequence[int] | None:
    """A copy of a table's instance sequence that compares equal to it only
    while its ids are the same (None: a kind of sequence not followed)."""
    kind = type(insts)
    if kind is list:
        return list(insts)
    if kind is tuple:
        return insts
    if isinstance(insts, array) and kind is array:
        return array(insts.typecode, insts)
    return None


class FastFetch:
    """The layout of a repeated FETCH: its values come out of the tables'
    answers by a few C-level passes (``map``, ``chain``, ``attrgetter``,
    ``bytes.join``) and go into the reply through :class:`FixedLayout`
    (one precompiled ``struct`` per group of Python numbers, which checks
    each value's range; raw bytes as they are for ``PackedColumns`` and for
    ``Columns`` of an ``array`` of the metric's type).  Each metric keeps
    the form it had when the layout was learnt.  Anything unexpected
    (another form, instance list or type code, a non-number, a value out of
    range) answers None: the general path then encodes that fetch and
    reports the bad value precisely."""

    __slots__ = (
        "cols",
        "cols_copies",
        "cols_lens",
        "cols_pick",
        "dicts",
        "hits",
        "keys",
        "layout",
        "lens",
        "ntables",
        "pick",
        "profile",
        "raw",
        "singles",
    )

    def __init__(self, profile: ProfilePdu, ntables: int) -> None:
        self.profile = profile
        self.ntables = ntables
        self.hits = 0
        self.singles: list[Metric] = []
        #: dict metrics, every instance id of theirs in order, how many each has, the profile's pick
        self.dicts: list[Metric] = []
        self.keys: list[int] = []
        self.lens: list[int] = []
        self.pick: Picker | None = None
        #: Columns metrics (values of any sequence): their instances' copies, lengths, the profile's pick
        self.cols: list[Metric] = []
        self.cols_copies: list[Sequence[int]] = []
        self.cols_lens: list[int] = []
        self.cols_pick: Picker | None = None
        #: raw groups: (group, metrics, instances' copies, type codes, value lengths)
        self.raw: list[RawGroup] = []
        self.layout: FixedLayout

    @property
    def multis(self) -> list[Metric]:
        """The dict metrics (the name of the dict-only fast path's)."""
        return self.dicts

    @classmethod
    def build(
        cls,
        pmids: Sequence[int],
        profile: ProfilePdu,
        by_pmid: Mapping[int, tuple[Mount, Metric]],
        answers: Mapping[int, Mapping[Metric, Values]],
        data: bytes,
        ntables: int,
    ) -> FastFetch | None:
        """The layout of the reply ``data`` the general path made, or None
        when some value is not a plain number (or a column of them) of a
        fixed-size type."""
        self = cls(profile, ntables)
        raws: dict[int, RawGroup] = {g: (g, [], [], [], []) for g in _RAW}
        picked: dict[int, list[int]] = {_DICT: [], _COLS: []}
        flat = {_DICT: 0, _COLS: 0}  # values of the group so far, before the profile
        groups: list[int] = []
        types: list[int] = []
        for p in pmids:
            found = by_pmid.get(p)
            if found is None:
                groups.append(-1)
                types.append(0)
                continue
            mount, metric = found
            code = FIXED_CODES.get(metric.type)
            if code is None:
                return None
            value: RawValue = answers[id(mount)].get(metric)
            types.append(metric.type)
            if metric.indom is None:
                if type(value) not in _NUMBERS:
                    return None
                self.singles.append(metric)
                groups.append(_SINGLE)
                continue
            ind = metric.indom.id
            whole = includes_all(profile, ind)
            kind = type(value)
            if kind is dict:
                group, insts = _DICT, tuple(value)
                self.dicts.append(metric)
                self.keys.extend(insts)
                self.lens.append(len(insts))
            elif kind is Columns:
                insts, vals = value.insts, value.values
                copy = _inst_copy(insts)
                if copy is None or len(insts) != len(vals):
                    return None
                if whole and type(vals) is array and vals.typecode == code:
                    group = _ARRAY8 if vals.itemsize == 8 else _ARRAY4
                    _g, ms, copies, codes, lens = raws[group]
                    ms.append(metric)
                    copies.append(copy)
                    codes.append(vals.typecode)
                    lens.append(len(vals))
                else:
                    group = _COLS
                    self.cols.append(metric)
                    self.cols_copies.append(copy)
                    self.cols_lens.append(len(vals))
            elif kind is PackedColumns:
                copy = _inst_copy(value.insts)
                if copy is None or not whole or PACKED_TYPECODES.get(metric.type) != value.typecode:
                    return None
                group = _PACKED_G
                _g, ms, copies, codes, lens = raws[group]
                ms.append(metric)
                copies.append(copy)
                codes.append(value.typecode)
                lens.append(len(value.data))
                insts = value.insts
            else:
                return None
            if group in picked:
                base = flat[group]
                if whole:
                    picked[group].extend(range(base, base + len(insts)))
                    kept = len(insts)
                else:
                    kept = 0
                    for k, i in enumerate(insts):
                        if type(i) is int and profile.includes(ind, i):
                            picked[group].append(base + k)
                            kept += 1
                flat[group] = base + len(insts)
            else:
                kept = len(insts)
            groups.append(group if kept else -1)
        self.raw = [r for r in raws.values() if r[1]]
        try:
            self.layout = FixedLayout(data, groups, types, _NGROUPS, _RAW)
        except (ValueError, KeyError, IndexError):
            return None  # the general path answered otherwise (e.g. an error for a bad instance)
        if self.layout.nvalues != len(self.singles) + len(picked[_DICT]) + len(picked[_COLS]) + sum(
            len(x) for r in self.raw for x in r[2]
        ):
            return None
        self.pick = _picker(picked[_DICT], flat[_DICT])
        self.cols_pick = _picker(picked[_COLS], flat[_COLS])
        return self

    def encode(self, outcomes: Sequence[object], flags: int) -> bytes | None:
        """The reply for these table answers, or None to take the general path."""
        if len(outcomes) != self.ntables:
            return None
        if len(outcomes) == 1:
            answer = outcomes[0]
            if type(answer) is not dict:
                return None
        else:
            answer = {}
            for o in outcomes:
                if type(o) is not dict:
                    return None
                answer.update(o)
        get = answer.get
        single = list(map(get, self.singles))
        if not _NUMBERS.issuperset(map(type, single)):
            return None
        values: list[RawValue] = [single, (), (), b"", b"", b""]
        if self.dicts:
            dicts: list[RawValue] = list(map(get, self.dicts))
            if (
                not _DICTS.issuperset(map(type, dicts))
                or list(map(len, dicts)) != self.lens
                or list(chain.from_iterable(dicts)) != self.keys
            ):
                return None
            multi: RawValue = list(chain.from_iterable(map(dict.values, dicts)))
            if self.pick is not None:
                multi = self.pick(multi)
            if not _NUMBERS.issuperset(map(type, multi)):
                return None
            values[_DICT] = multi
        if self.cols:
            cols: list[RawValue] = list(map(get, self.cols))
            if not _COLUMNS.issuperset(map(type, cols)) or list(map(_INSTS, cols)) != self.cols_copies:
                return None
            seqs = list(map(_VALUES, cols))
            if list(map(len, seqs)) != self.cols_lens:
                return None
            multi = list(chain.from_iterable(seqs))
            if self.cols_pick is not None:
                multi = self.cols_pick(multi)
            if not _NUMBERS.issuperset(map(type, multi)):
                return None
            values[_COLS] = multi
        for group, metrics, copies, codes, lens in self.raw:
            got: list[RawValue] = list(map(get, metrics))
            if group == _PACKED_G:
                if not _PACKED.issuperset(map(type, got)) or list(map(_TYPECODE, got)) != codes:
                    return None
                parts = list(map(_DATA, got))
            else:
                if not _COLUMNS.issuperset(map(type, got)):
                    return None
                parts = list(map(_VALUES, got))
                if not _ARRAYS.issuperset(map(type, parts)) or list(map(_TYPECODE, parts)) != codes:
                    return None
            if list(map(len, parts)) != lens or list(map(_INSTS, got)) != copies:
                return None
            if group == _PACKED_G:
                values[group] = b"".join(parts)
            else:
                joined = array("Q" if group == _ARRAY8 else "I", b"".join(parts))
                if _LITTLE:
                    joined.byteswap()
                values[group] = joined
        try:
            data = self.layout.encode(values, flags)
        except (struct.error, OverflowError, TypeError, ValueError):
            return None
        self.hits += 1
        return data


def _picker(picked: list[int], flat: int) -> Picker | None:
    """What takes the profile's values out of a group's ``flat`` values (None: all of them)."""
    if len(picked) == flat:
        return None
    if len(picked) > 1:
        return itemgetter(*picked)
    return lambda v: [v[k] for k in picked]
