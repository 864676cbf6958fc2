"""The values a table's fetch returns (see :mod:`pmda_py.table.base` for
the forms a fetch may answer in), and labels' values."""

from __future__ import annotations

import json
import re
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Union

import attrs

from pmda_py.errors import PmdaError
from pmda_py.pmapi import TYPES, PmType

if TYPE_CHECKING:
    from pmda_py.table.metric import Metric

__all__ = [
    "PACKED_TYPECODES",
    "Columns",
    "Event",
    "FetchResult",
    "LabelText",
    "Labels",
    "PackedColumns",
    "PackedFetch",
    "Scalar",
    "Value",
    "Values",
]

Scalar = Union[int, float, str, bytes]


@attrs.frozen
class LabelText:
    """A label set laid out already: the JSON text and its index entries
    ``(name offset, name length, flags, value offset, value length)``, sent
    as given (for tables that must reply what a C PMDA replies, byte for byte,
    e.g. the MMV drop-in running libpcp's label parser)."""

    json: bytes
    index: tuple[tuple[int, int, int, int, int], ...] = ()


@attrs.frozen
class Columns:
    """Values of a metric with an indom as two parallel sequences (fast path:
    no per-value objects; any sequence, e.g. an ``array`` or a strided
    ``memoryview``'s ``tolist()``)."""

    insts: Sequence[int]
    values: Sequence[Value]


#: the ``array`` type code of each type :class:`PackedColumns` may carry
PACKED_TYPECODES: Mapping[int, str] = MappingProxyType(
    {t: TYPES[t].code for t in (PmType.I64, PmType.U64, PmType.DOUBLE, PmType.FLOAT)}
)


@attrs.frozen
class PackedColumns:
    """Values of a metric with an indom already packed (a fast path, with no work per value):
    ``data`` holds one value per instance of ``insts``, in order, big-endian,
    laid out as the ``array`` type code ``typecode`` says -- ``"q"`` for an
    I64 metric, ``"Q"`` U64, ``"d"`` DOUBLE, ``"f"`` FLOAT (see
    :data:`PACKED_TYPECODES`); e.g. ``a = array("d", values); a.byteswap()``
    on a little-endian host, then ``a.tobytes()``.

    The daemon copies the bytes into the reply as they are when the client's
    profile takes every instance (and picks its instances otherwise).  A type
    code other than the metric's, or ``data`` of the wrong length, answers
    PM_ERR_TYPE for that metric with a ``table_bad_value`` log line."""

    insts: Sequence[int]
    data: bytes
    typecode: str


@attrs.frozen
class Event:
    """One record of an event metric's value (PM_TYPE_EVENT or
    HIGHRES_EVENT): the value of such a metric, per instance, is a sequence
    of records, oldest first (an empty one: no events).

    Attributes:
        sec, nsec: when it happened (seconds since the epoch, nanoseconds);
            an EVENT metric carries microseconds (``nsec // 1000``), a
            HIGHRES_EVENT one nanoseconds.  :meth:`now` stamps the present.
        params: ``(metric, value)`` pairs, in order: each a :class:`Metric`
            (its PMID and type name the parameter; declare it so clients can
            look its descriptor up) and a Python value of its type.
        flags: :class:`~pmda_py.pmapi.EventFlag` bits (POINT, START, END, ID,
            PARENT).
        missed: above 0: this record only says that many events were missed
            (PM_EVENT_FLAG_MISSED; it carries no parameters).
    """

    sec: int
    nsec: int = 0
    params: Sequence[tuple[Metric, Scalar]] = ()
    flags: int = 0
    missed: int = 0

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.nsec < 1_000_000_000:
            raise ValueError(f"event nsec {self.nsec} out of range")
        if self.missed < 0 or (self.missed and self.params):
            raise ValueError("a missed-events record has a positive count and no parameters")

    @classmethod
    def now(cls, params: Sequence[tuple[Metric, Scalar]] = (), flags: int = 0) -> Event:
        """A record stamped with the present time (``time.time_ns()``)."""
        sec, nsec = divmod(time.time_ns(), 1_000_000_000)
        return cls(sec, nsec, tuple(params), int(flags))


class PackedFetch(Mapping["Metric", "PackedColumns"]):
    """A FETCH answer in one piece (the fast path of tables such as MMV):
    ``metrics`` exactly as the request gave them, each with an instance
    array ``insts[k]`` and type ``vtypes[k]`` (I64, U64 or DOUBLE), and
    ``blob`` holding every value, big-endian, 8 bytes each, in that order.
    ``indoms`` are the metrics' instance domains; ``token`` stays the same
    object while metrics, types and instances do.

    The daemon encodes it without looking at each metric when the client's
    profile takes every instance; otherwise it reads it as the usual
    ``{metric: PackedColumns}`` mapping."""

    __slots__ = ("_as_dict", "blob", "indoms", "insts", "metrics", "token", "vtypes")

    def __init__(
        self,
        metrics: Sequence[Metric],
        vtypes: Sequence[int],
        insts: Sequence[array[int]],
        blob: bytes | memoryview | array[int],
        indoms: frozenset[int],
        token: object,
    ) -> None:
        self.metrics, self.vtypes, self.insts, self.blob = metrics, vtypes, insts, blob
        self.indoms, self.token = indoms, token
        self._as_dict: dict[Metric, PackedColumns] | None = None

    def _mapping(self) -> dict[Metric, PackedColumns]:
        if self._as_dict is None:
            raw = memoryview(self.blob).cast("B")
            out: dict[Metric, PackedColumns] = {}
            off = 0
            for m, vtype, insts in zip(self.metrics, self.vtypes, self.insts):
                n = 8 * len(insts)
                out[m] = PackedColumns(insts, bytes(raw[off : off + n]), PACKED_TYPECODES.get(vtype, "?"))
                off += n
            self._as_dict = out
        return self._as_dict

    def __getitem__(self, m: Metric) -> PackedColumns:
        return self._mapping()[m]

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self.metrics)


#: one instance's value: a Python value, or an event metric's records
Value = Union[Scalar, Sequence[Event]]
Values = Union[Value, Mapping[int, Value], Iterable[tuple[int, Value]], Columns, PackedColumns, PmdaError, None]
FetchResult = Mapping["Metric", Values]

#: labels by name; each value anything ``json.dumps`` takes (checked
#: where a Metric or InDom is declared)
Labels = Mapping[str, object]


def check_labels(owner: str, labels: Mapping[str, object]) -> None:
    for k, v in labels.items():
        if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,254}", k):
            raise ValueError(f"{owner}: bad label name {k!r}")
        try:
            json.dumps(v, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{owner}: label {k!r} is not JSON-serialisable: {err}") from err
