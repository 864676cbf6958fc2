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
from operator import attrgetter, is_, itemgetter
from typing import Callable

from pmda_py.dispatch.coerce import includes_all
from pmda_py.dispatch.mounts import Mount
from pmda_py.table import PACKED_TYPECODES, Columns, Metric, PackedColumns, Values
from pmda_py.wire import ProfilePdu
from pmda_py.wire.buffers import ReplyBuffer
from pmda_py.wire.layout import FIXED_CODES, FixedLayout, RawValue

__all__ = ["FastFetch", "InstCheck"]

#: takes some items out of a sequence, always as a tuple
Picker = Callable[[Sequence[RawValue]], "tuple[RawValue, ...]"]

_LITTLE = sys.byteorder == "little"
_NUMBERS = frozenset((int, float))
_DICTS = frozenset((dict,))
_COLUMNS = frozenset((Columns,))
_PACKED = frozenset((PackedColumns,))
_ARRAYS = frozenset((array,))
#: the ``array`` type codes of integers
_INT_CODES = frozenset("bBhHiIlLqQ")
_BYTES = frozenset((bytes,))
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


def _items(keys: Sequence[int]) -> Picker:
    """What takes the items at ``keys`` out of a sequence, as a tuple."""
    if len(keys) == 1:
        k = keys[0]
        return lambda seq: (seq[k],)
    return itemgetter(*keys)


def _entries(metrics: Sequence[Metric]) -> Callable[[Mapping[Metric, RawValue]], tuple[RawValue, ...]]:
    """What takes ``metrics``' values out of an answer, as a tuple (KeyError: one is missing)."""
    if len(metrics) == 1:
        m = metrics[0]
        return lambda answer: (answer[m],)
    return itemgetter(*metrics)


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


def _first_of(seqs: Sequence[Sequence[int]]) -> tuple[dict[int, int], list[int]]:
    """The index of the first metric having each distinct object of
    ``seqs`` (by the object's id, in order of appearance), and for each
    metric the index of the first one having its object."""
    first: dict[int, int] = {}
    return first, [first.setdefault(id(s), k) for k, s in enumerate(seqs)]


class InstCheck:
    """Whether a group's metrics answer the instance sequences they answered
    when the layout was learnt (same ids, same order, same kind of sequence).

    Metrics of one instance domain usually share one sequence object: each
    distinct object of the answer is compared with its copy once, and the
    others only by identity with it (a C-level pass over pointers).  A table
    that shares no object, or no longer shares it, is compared metric by
    metric (equal values are equal ids: nothing is assumed of identity
    across fetches, so an object changed in place is always seen)."""

    __slots__ = ("copies", "copy_of", "distinct", "pattern")

    def __init__(
        self,
        copies: tuple[Sequence[int], ...],
        pattern: Picker | None,
        distinct: Picker | None,
        copy_of: Sequence[int],
    ) -> None:
        #: a copy of each distinct sequence, in order of first appearance
        self.copies = copies
        #: the index in ``copies`` of each metric's sequence
        self.copy_of = copy_of
        #: the sequence each metric had, by the index of the first metric that had the same object (None: no sharing)
        self.pattern = pattern
        #: the first metric of each distinct sequence (None: every metric)
        self.distinct = distinct

    @classmethod
    def learn(cls, seqs: Sequence[Sequence[int]]) -> InstCheck | None:
        """The check of these sequences (one per metric), or None when one
        is of a kind not followed (only lists, tuples and arrays are)."""
        first, owners = _first_of(seqs)
        copies = []
        for k in first.values():
            copy = _inst_copy(seqs[k])
            if copy is None:
                return None
            copies.append(copy)
        order = {k: n for n, k in enumerate(first.values())}
        copy_of = [order[k] for k in owners]
        if len(first) == len(seqs) or len(first) == 1:
            return cls(tuple(copies), None, None, copy_of)
        return cls(tuple(copies), _items(owners), _items(list(first.values())), copy_of)

    def same(self, seqs: tuple[Sequence[int], ...]) -> bool:
        """Whether ``seqs`` (one per metric) are the learnt instances."""
        if self.pattern is None or self.distinct is None:
            if len(self.copies) == 1 and len(seqs) > 1:  # one object for all: count it (identity, else value)
                return seqs.count(seqs[0]) == len(seqs) and seqs[0] == self.copies[0]
            return seqs == self.copies
        # every metric's sequence is its group's first one (by identity, else
        # by value), and each first one equals its copy
        return self.pattern(seqs) == seqs and self.distinct(seqs) == self.copies

    def objects(self, seqs: tuple[Sequence[int], ...]) -> tuple[tuple[Sequence[int], ...], tuple[Sequence[int], ...]]:
        """The distinct objects of ``seqs`` (an answer :meth:`same`
        accepted), and the copy each must equal."""
        first, _owners = _first_of(seqs)
        copies, copy_of = self.copies, self.copy_of
        return tuple(seqs[k] for k in first.values()), tuple(copies[copy_of[k]] for k in first.values())


class ColumnGroup:
    """The metrics of one group answering sequences of values: ``Columns``
    (packed by struct, or raw for an ``array`` of the metric's type) or
    ``PackedColumns`` (raw): what their answers must look like for the
    learnt layout to hold."""

    __slots__ = (
        "codes",
        "entries",
        "equal_is_same",
        "group",
        "insts",
        "kept",
        "kept_expected",
        "kept_fixed",
        "kept_insts",
        "kept_parts",
        "kept_seqs",
        "lens",
        "metrics",
    )

    def __init__(self, group: int, metrics: list[Metric], insts: InstCheck, codes: list[str], lens: list[int]) -> None:
        self.group = group
        self.metrics = metrics
        self.entries = _entries(metrics)
        self.insts = insts
        #: each metric's array type code (raw groups)
        self.codes = codes
        #: each metric's number of values (bytes for PackedColumns)
        self.lens = lens
        #: whether records equal to the kept ones (``==``, not ``is``) write
        #: the same reply: PackedColumns (equal data is equal bytes) and
        #: arrays of integers; not floats (``0.0 == -0.0``) nor Python
        #: numbers of any kind (``1 == 1.0 == True``), which only identity
        #: vouches for
        self.equal_is_same = group == _PACKED_G or (group != _COLS and _INT_CODES.issuperset(codes))
        #: the answer objects last accepted (held, so no other object can
        #: take their ids), their value sequences, their instance sequences;
        #: when they come again: the distinct instance sequence objects and
        #: the copies they must equal
        self.kept: tuple[RawValue, ...] = ()
        self.kept_parts: list[RawValue] = []
        self.kept_seqs: tuple[Sequence[int], ...] = ()
        self.kept_insts: tuple[Sequence[int], ...] | None = None
        self.kept_expected: tuple[Sequence[int], ...] = ()
        self.kept_fixed = False

    def parts(self, answer: Mapping[Metric, RawValue]) -> list[RawValue] | None:
        """Each metric's values (an array or bytes for raw groups), or None
        when an answer is not of the learnt form, type code, length or
        instances."""
        try:
            got = self.entries(answer)
        except KeyError:
            return None
        kept = self.kept
        if kept and got[0] is kept[0] and self._same(got, kept):
            # The very records last accepted (or, where that writes the same
            # reply, records equal to them): frozen, so the same value and
            # instance sequence objects, of the same kinds and type codes;
            # only what those can do in place is checked (their lengths,
            # their instance ids).
            parts = self.kept_parts
            if self.kept_insts is None:
                self.kept_insts, self.kept_expected = self.insts.objects(self.kept_seqs)
            if (not self.kept_fixed and list(map(len, parts)) != self.lens) or self.kept_insts != self.kept_expected:
                return None
            return parts
        if self.group == _PACKED_G:
            if not _PACKED.issuperset(map(type, got)) or list(map(_TYPECODE, got)) != self.codes:
                return None
            parts = list(map(_DATA, got))
        else:
            if not _COLUMNS.issuperset(map(type, got)):
                return None
            parts = list(map(_VALUES, got))
            if self.group != _COLS and (
                not _ARRAYS.issuperset(map(type, parts)) or list(map(_TYPECODE, parts)) != self.codes
            ):
                return None
        seqs = tuple(map(_INSTS, got))
        if list(map(len, parts)) != self.lens or not self.insts.same(seqs):
            return None
        self.kept, self.kept_parts, self.kept_seqs, self.kept_insts = got, parts, seqs, None
        # bytes cannot change length: kept PackedColumns of bytes need no length check
        self.kept_fixed = _BYTES.issuperset(map(type, parts))
        return parts

    def _same(self, got: tuple[RawValue, ...], kept: tuple[RawValue, ...]) -> bool:
        """Whether ``got`` are the kept records: each the same object, or
        where :attr:`equal_is_same`, equal (a tuple comparison, whose C loop
        takes an identical pair without calling its ``__eq__``: a tenth of
        the cost of comparing identities one ``is_`` call at a time)."""
        if not self.equal_is_same:
            return all(map(is_, got, kept))
        try:
            return got == kept
        except Exception:  # a table's sequence whose == does not answer a bool
            return False


class FastFetch:
    """The layout of a repeated FETCH: its values come out of the tables'
    answers by a few C-level passes (``itemgetter``, ``map``, ``chain``,
    ``attrgetter``, ``bytes.join``) and go into the reply through
    :class:`FixedLayout` (one precompiled ``struct`` per group of Python
    numbers, which checks each value's range; raw bytes as they are for
    ``PackedColumns`` and for ``Columns`` of an ``array`` of the metric's
    type).  Each metric keeps the form it had when the layout was learnt.
    Anything unexpected (another form, instance list or type code, a
    non-number, a value out of range) answers None: the general path then
    encodes that fetch and reports the bad value precisely."""

    __slots__ = (
        "cols",
        "cols_pick",
        "dict_entries",
        "dicts",
        "hits",
        "keys",
        "layout",
        "lens",
        "ntables",
        "pick",
        "profile",
        "raw",
        "single_entries",
        "singles",
    )

    def __init__(self, profile: ProfilePdu, ntables: int) -> None:
        self.profile = profile
        self.ntables = ntables
        self.hits = 0
        self.singles: list[Metric] = []
        self.single_entries: Callable[[Mapping[Metric, RawValue]], tuple[RawValue, ...]] | None = None
        #: dict metrics, every instance id of theirs in order, how many each has, the profile's pick
        self.dicts: list[Metric] = []
        self.dict_entries: Callable[[Mapping[Metric, RawValue]], tuple[RawValue, ...]] | None = None
        self.keys: list[int] = []
        self.lens: list[int] = []
        self.pick: Picker | None = None
        #: Columns metrics packed by struct (values of any sequence), the profile's pick
        self.cols: ColumnGroup | None = None
        self.cols_pick: Picker | None = None
        #: raw groups (PackedColumns, Columns of arrays)
        self.raw: list[ColumnGroup] = []
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
        # per group: metrics, their instance sequences, type codes, value lengths
        found_by: dict[int, tuple[list[Metric], list[Sequence[int]], list[str], list[int]]] = {
            g: ([], [], [], []) for g in (_COLS, *_RAW)
        }
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
                if len(insts) != len(vals):
                    return None
                if whole and type(vals) is array and vals.typecode == code:
                    group = _ARRAY8 if vals.itemsize == 8 else _ARRAY4
                else:
                    group = _COLS
                ms, seqs, codes, lens = found_by[group]
                codes.append(vals.typecode if group != _COLS else "")
                lens.append(len(vals))
            elif kind is PackedColumns:
                insts = value.insts
                if not whole or PACKED_TYPECODES.get(metric.type) != value.typecode:
                    return None
                group = _PACKED_G
                ms, seqs, codes, lens = found_by[group]
                codes.append(value.typecode)
                lens.append(len(value.data))
            else:
                return None
            if group != _DICT:
                ms.append(metric)
                seqs.append(insts)
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
        nraw = 0
        for g, (ms, seqs, codes, lens) in found_by.items():
            if not ms:
                continue
            check = InstCheck.learn(seqs)
            if check is None:
                return None
            col = ColumnGroup(g, ms, check, codes, lens)
            if g == _COLS:
                self.cols = col
            else:
                self.raw.append(col)
                nraw += sum(map(len, seqs))
        try:
            self.layout = FixedLayout(data, groups, types, _NGROUPS, _RAW)
        except (ValueError, KeyError, IndexError):
            return None  # the general path answered otherwise (e.g. an error for a bad instance)
        if self.layout.nvalues != len(self.singles) + len(picked[_DICT]) + len(picked[_COLS]) + nraw:
            return None
        if self.singles:
            self.single_entries = _entries(self.singles)
        if self.dicts:
            self.dict_entries = _entries(self.dicts)
        self.pick = _picker(picked[_DICT], flat[_DICT])
        self.cols_pick = _picker(picked[_COLS], flat[_COLS])
        return self

    def encode(self, outcomes: Sequence[object], flags: int) -> ReplyBuffer | None:
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
        values: list[RawValue] = [(), (), (), b"", b"", b""]
        try:
            if self.single_entries is not None:
                single = self.single_entries(answer)
                if not _NUMBERS.issuperset(map(type, single)):
                    return None
                values[_SINGLE] = single
            if self.dict_entries is not None:
                dicts = self.dict_entries(answer)
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
        except KeyError:
            return None
        if self.cols is not None:
            seqs = self.cols.parts(answer)
            if seqs is None:
                return None
            multi = list(chain.from_iterable(seqs))
            if self.cols_pick is not None:
                multi = self.cols_pick(multi)
            if not _NUMBERS.issuperset(map(type, multi)):
                return None
            values[_COLS] = multi
        for col in self.raw:
            parts = col.parts(answer)
            if parts is None:
                return None
            if col.group == _PACKED_G:
                values[_PACKED_G] = b"".join(parts)
            else:
                joined = array("Q" if col.group == _ARRAY8 else "I", b"".join(parts))
                if _LITTLE:
                    joined.byteswap()
                values[col.group] = joined
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
    if not picked:
        return lambda v: ()
    return _items(picked)
