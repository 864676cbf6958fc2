"""The fetch callback's ``[value, status]`` protocol, as the binding reads it.

A pcp.pmda fetch callback returns, per metric and instance:

* ``None`` or any tuple: no value (PMDA_FETCH_NOVALUES);
* a two-item sequence ``[value, status]``: with a status other than 0 and a
  value of the metric's type, that value (U32/U64 masked to their width,
  32/64-bit signed ints range-checked, FLOAT rounded to single precision);
* otherwise the pair is read again as ``[code, status]`` of two C ints: a
  status of 1 there means the value had the wrong type (PM_ERR_TYPE); a
  code above 0 means the value read first (``[5, 0]``: the value 5); 0 no
  value; below 0 that error (``[PM_ERR_INST, 0]``);
* anything that is neither (one item, three, a float for an int status, an
  int out of C int range): -EINVAL.  An exception raised by the callback is
  -EAGAIN (logged by the caller).

:func:`convert` returns ``(status, value)``: status > 0 a value, 0 none,
< 0 an error code.  No state survives a bad return (the binding leaves a
Python exception set that fails the next, unrelated call).
"""

from __future__ import annotations

import errno
import operator
from collections.abc import Mapping
from ctypes import c_float
from typing import Callable, Protocol, SupportsFloat, SupportsIndex, Union, runtime_checkable

from pmda_py.errors import PmErr
from pmda_py.pmapi import PmType

__all__ = ["EINVAL", "ENOTSUP", "convert", "int32"]

EINVAL = -errno.EINVAL
ENOTSUP = -errno.ENOTSUP
_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)


class _Bad(Exception):
    """A value that C's PyArg_Parse would refuse."""


#: what a converter gives: the Python value of the metric's type
Converted = Union[int, float, str]


@runtime_checkable
class _Sized2(Protocol):
    """What ``"(xy)"`` indexes: ``len()`` and ``[i]``."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int, /) -> object: ...


def _index(v: object) -> int:
    """``operator.index`` (C's nb_index) of anything a callback returned
    but an exact ``int`` (read in place by the callers: the usual value)."""
    if not isinstance(v, SupportsIndex):
        raise _Bad
    try:
        return operator.index(v)
    except TypeError:
        raise _Bad from None


def int32(v: object) -> int:
    """A C ``int`` the way PyArg_Parse's ``i`` reads it (``__index__``, range)."""
    n = v if type(v) is int else _index(v)
    if not _I32[0] <= n <= _I32[1]:
        raise _Bad
    return n


def _u32(v: object) -> int:
    return (v if type(v) is int else _index(v)) & 0xFFFFFFFF


def _i64(v: object) -> int:
    n = v if type(v) is int else _index(v)
    if not _I64[0] <= n <= _I64[1]:
        raise _Bad
    return n


def _u64(v: object) -> int:
    return (v if type(v) is int else _index(v)) & 0xFFFFFFFFFFFFFFFF


#: what C's ``d`` takes (``__float__`` or ``__index__``); ``float`` and ``int``
#: first, so the usual values skip the protocol checks
_NUMBER = (float, int, SupportsFloat, SupportsIndex)
_TEXT = (str, bytes, bytearray)


def _double(v: object) -> float:
    if not isinstance(v, _NUMBER) or isinstance(v, _TEXT):
        raise _Bad
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        raise _Bad from None


def _float(v: object) -> float:
    return float(c_float(_double(v)).value)  # C's double -> float conversion (inf past its range)


def _string(v: object) -> str:
    if not isinstance(v, str) or "\0" in v:
        raise _Bad
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad from None
    return v


_CONVERT: dict[int, Callable[[object], Converted]] = {
    PmType.I32: int32,
    PmType.U32: _u32,
    PmType.I64: _i64,
    PmType.U64: _u64,
    PmType.FLOAT: _float,
    PmType.DOUBLE: _double,
    PmType.STRING: _string,
}


def _pair(result: object) -> tuple[object, object] | None:
    """The two items of a sequence of length 2 (what ``"(xy)"`` parses:
    not a mapping, not ``bytes``)."""
    if isinstance(result, (Mapping, bytes)) or not isinstance(result, _Sized2):
        return None
    try:
        if len(result) != 2:
            return None
        return result[0], result[1]
    except Exception:
        return None


def convert(result: object, mtype: int) -> tuple[int, Converted | None]:
    """``(status, value)`` of a fetch callback's return for a metric of type ``mtype``."""
    if result is None or isinstance(result, tuple):
        return 0, None
    conv = _CONVERT.get(mtype)
    if conv is None:
        return ENOTSUP, None
    if type(result) is list and len(result) == 2:
        pair: tuple[object, object] | None = (result[0], result[1])
    else:
        pair = _pair(result)
    if pair is None:
        return EINVAL, None
    value: Converted | None = None
    parsed = False
    try:
        value = conv(pair[0])
        code = int32(pair[1])
        parsed = True
    except _Bad:
        code = 0
    if parsed and code != 0:
        return 1, value
    try:
        sts = int32(pair[0])
        code = int32(pair[1])
    except _Bad:
        return EINVAL, None
    if code == 1:
        return PmErr.TYPE, None
    if sts > 0:
        # the value read first (the binding stores an uninitialised one for
        # a string metric given an int: a wrong type, here)
        return (1, value) if parsed else (PmErr.TYPE, None)
    return sts, None
