"""How a compat script's fetch callback is called for a metric and its
results become the metric's values, as the binding reads them
(:func:`read_values`); what a failing callback writes to the log
(:data:`SOURCE`, :func:`callback_error`, :func:`log_raised`).  Runs in the
callbacks' thread."""

from __future__ import annotations

import errno
from array import array
from typing import Any, Union

import attrs
import structlog

from pmda_py.compat.agent import Callback
from pmda_py.compat.callbacks import convert
from pmda_py.dispatch.problems import ProblemLog, cut
from pmda_py.errors import PmErr
from pmda_py.pmapi import PM_IN_NULL, TYPES, PmType

__all__ = ["EAGAIN", "IN_NULL", "NO_INSTS", "SINGLE", "SOURCE", "Insts", "callback_error", "log_raised", "read_values"]

log = structlog.get_logger("pmda_py.compat")

EAGAIN = -errno.EAGAIN
#: PM_IN_NULL as the binding passes it to callbacks (an unsigned int)
IN_NULL = PM_IN_NULL & 0xFFFFFFFF
#: the name the script's problems are logged under (one script per process)
SOURCE = "compat"


@attrs.frozen
class Insts:
    """The instances a metric of an indom is fetched for: their ids (the
    engine's, signed as a pmdaInstid's ``i_inst``) and each as the fetch
    callback is given it (an unsigned int, as the binding passes it: -5 is
    4294967291).  ``args`` is ``ids`` itself when no id is negative."""

    ids: list[int]
    args: list[int]

    @classmethod
    def of(cls, ids: list[int]) -> Insts:
        if ids and min(ids) < 0:
            return cls(ids, [i & 0xFFFFFFFF for i in ids])
        return cls(ids, ids)


SINGLE = Insts([IN_NULL], [IN_NULL])
NO_INSTS = Insts([], [])
#: the array type code that checks and holds a type's values as the binding reads them
#: (not FLOAT's: an array of C floats would round a value the binding refuses)
_TYPECODES: dict[int, str] = {t: i.code for t, i in TYPES.items() if i.code and t != PmType.FLOAT}


_RAISED = object()
_DONE = object()
_ONE = 1  # the int 1 (CPython keeps one): ``is _ONE`` picks out the usual status
#: one metric's values, of its type: an array of the type's code (what
#: ``array(code, ...)`` checked) or the converted values; the element type
#: follows a type code known only at run time, so it is not spelled here
_Got = Union["array[Any]", list[Any]]


def _leading(fcb: Callback, cluster: int, item: int, args: list[int], problems: ProblemLog) -> tuple[list[Any], object]:
    """The hot path: call the callback for each instance while it returns a
    list ``[value, 1]`` (an ``int`` 1), keeping only the values; the lists
    are freed as they come, so the cyclic collector is not set off.  Also
    what ended the run: the next result (read by the caller), ``_RAISED``
    (logged here) or ``_DONE``."""
    firsts: list[Any] = []
    inst = -1
    try:
        for inst in args:
            r = fcb(cluster, item, inst)
            if type(r) is not list:
                return firsts, r
            try:
                value, status = r  # a list's unpacking checks its length (cheaper than len())
            except ValueError:
                return firsts, r
            if status is not _ONE:
                return firsts, r
            firsts.append(value)
    except Exception as exc:
        log_raised(problems, "fetch_callback", cluster, item, inst, exc)
        return firsts, _RAISED
    return firsts, _DONE


def read_values(
    fcb: Callback, cluster: int, item: int, mtype: int, which: Insts, problems: ProblemLog
) -> tuple[list[int], _Got, int]:
    """One metric's callbacks, in instance order: the instances that gave a
    value, the values, and the last status (what answers the metric when
    none did).  The callback is given each instance as ``which.args`` has it.

    A type with an array code (every integer type and DOUBLE) takes the hot
    path first (:func:`_leading`); its values are then checked at once by
    ``array(code, ...)``, which takes them as PyArg_Parse takes them for the
    metric's type (ints in range for integer types, ints or floats for
    DOUBLE).  Whatever ends the run, and every result after it, is read one
    by one as :func:`~pmda_py.compat.callbacks.convert` says."""
    code = _TYPECODES.get(mtype)
    got: list[int] = []
    values: _Got = []
    sts = 0

    def take(inst: int, result: object) -> int:
        if result is _RAISED:
            return EAGAIN
        sts, value = convert(result, mtype)
        if sts > 0 and value is not None:
            got.append(inst)
            values.append(value)
        elif sts < 0 and sts not in _QUIET:
            problems.warning(SOURCE, "fetch_callback_error", cluster=cluster, item=item, code=sts, extra={"inst": inst})
        return sts

    insts, args = which.ids, which.args
    start = 0
    if code is not None:
        firsts, pending = _leading(fcb, cluster, item, args, problems)
        start = len(firsts)
        try:
            values = array(code, firsts)
        except (TypeError, OverflowError):  # a value not of the type: each read as the binding reads it
            for inst, value in zip(insts, firsts):
                sts = take(inst, [value, _ONE])
        else:
            got = insts if start == len(insts) else insts[:start]
            sts = 1 if start else 0
        if pending is _DONE:
            return got, values, sts
        sts = take(insts[start], pending)
        start += 1
    for k in range(start, len(insts)):
        try:
            result = fcb(cluster, item, args[k])
        except Exception as exc:
            log_raised(problems, "fetch_callback", cluster, item, args[k], exc)
            result = _RAISED
        sts = take(insts[k], result)
    return got, values, sts


def callback_error(exc: Exception) -> str:
    """What a callback raised, as a log line says it (bounded)."""
    return cut(f"{type(exc).__name__}: {exc}")


def log_raised(problems: ProblemLog, callback: str, cluster: int, item: int, inst: int, exc: Exception) -> None:
    """Log a metric's fetch or store callback (``callback``, its name) that
    raised: once an hour for the same metric and error, whatever the instance."""
    problems.error(
        SOURCE,
        "callback_failed",
        callback=callback,
        cluster=cluster,
        item=item,
        error=callback_error(exc),
        extra={"inst": inst},
        exc_info=True,
    )


#: fetch callback codes libpcp_pmda does not log either
_QUIET = frozenset({0, PmErr.VALUE, PmErr.APPVERSION, PmErr.PERMISSION, PmErr.AGAIN, PmErr.NYI})
