"""``pcp.pmapi`` as PMDA scripts use it, without libpcp.

What pcp.pmda agents take from ``pcp.pmapi``: ``pmUnits`` (a ctypes
structure, the layout of ``<pcp/pmapi.h>``'s bitfields), ``pmDesc``,
``pmID``/``pmInDom``, ``pmErr`` and ``pmContext``'s static helpers
(``pmGetConfig``, ``pmIDStr``, ``pmInDomStr``, ``pmParseUnitsStr``,
``pmParseInterval``, ``pmSetDebug``/``pmDebug``, ``pmErrStr``, the id
builders).  Client calls (``pmContext(...)`` to a pmcd, fetches) are not
part of a PMDA's surface: a context raises ``pmErr(PM_ERR_NYI)``.
"""

from __future__ import annotations

import os
import re
import time
from ctypes import Structure, c_int, c_long, c_uint

from pmda_py import pmapi as _p
from pmda_py.compat.constants import CPMAPI
from pmda_py.errors import errstr
from pmda_py.pcpversion import pcp_conf

__all__ = [
    "pmContext",
    "pmDesc",
    "pmErr",
    "pmID",
    "pmInDom",
    "pmLabelSet",
    "pmUnits",
    "timeval",
]

pmID = c_uint
pmInDom = c_uint

#: PM_ERR_* codes by value -> symbol (cpmapi.pmErrSymDict)
ERR_SYMBOLS: dict[int, str] = {v: k for k, v in CPMAPI.items() if k.startswith("PM_ERR_")}


class pmErr(Exception):
    """A PCP error: ``args[0]`` is the (negative) code, the rest extra text."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.args = tuple(args)
        self.code = args[0] if args and isinstance(args[0], int) else 0

    def message(self) -> str:
        return " ".join([errstr(self.code), *(str(a) for a in self.args[1:])])

    def __str__(self) -> str:
        sym = ERR_SYMBOLS.get(self.code)
        return f"{sym} {self.message()}" if sym else self.message()

    def errno(self) -> int:
        return int(self.code)

    def progname(self) -> str:
        return _state_progname[0]


_state_progname = ["python"]


class pmUnits(Structure):
    """Dimensions and scales of a metric (the C bitfield layout of a
    little-endian host: ``pad`` in the low byte, ``dimSpace`` in the top
    nibble)."""

    _fields_ = [
        ("pad", c_int, 8),
        ("scaleCount", c_int, 4),
        ("scaleTime", c_int, 4),
        ("scaleSpace", c_int, 4),
        ("dimCount", c_int, 4),
        ("dimTime", c_int, 4),
        ("dimSpace", c_int, 4),
    ]

    def __init__(
        self, dimS: int = 0, dimT: int = 0, dimC: int = 0, scaleS: int = 0, scaleT: int = 0, scaleC: int = 0
    ) -> None:
        super().__init__()
        self.dimSpace, self.dimTime, self.dimCount = dimS, dimT, dimC
        self.scaleSpace, self.scaleTime, self.scaleCount = scaleS, scaleT, scaleC
        self.pad = 0

    def to_units(self) -> _p.PmUnits:
        """The engine's descriptor units."""
        return _p.PmUnits(
            dim_space=self.dimSpace,
            dim_time=self.dimTime,
            dim_count=self.dimCount,
            scale_space=self.scaleSpace & 0xF,
            scale_time=self.scaleTime & 0xF,
            scale_count=self.scaleCount,
        )

    def __int__(self) -> int:
        return self.to_units().to_int()

    def __str__(self) -> str:
        return units_str(self)


class pmDesc(Structure):
    """A metric descriptor (``<pcp/pmapi.h>`` pmDesc)."""

    _fields_ = [("pmid", c_uint), ("type", c_int), ("indom", c_uint), ("sem", c_int), ("units", pmUnits)]


class pmLabelSet(Structure):
    """Opaque here: PMDAs return labels as JSON text."""

    _fields_ = [("inst", c_uint), ("nlabels", c_int)]


class timeval(Structure):
    """``struct timeval``, as pmParseInterval returns it."""

    _fields_ = [("tv_sec", c_long), ("tv_usec", c_long)]

    def __init__(self, sec: int = 0, usec: int = 0) -> None:
        super().__init__()
        self.tv_sec, self.tv_usec = sec, usec

    def __float__(self) -> float:
        return float(self.tv_sec) + self.tv_usec / 1e6

    def sleep(self) -> None:
        time.sleep(float(self))

    @classmethod
    def fromInterval(cls, interval: str) -> timeval:
        seconds = parse_interval(interval)
        sec = int(seconds)
        return cls(sec, round((seconds - sec) * 1e6))


_INTERVAL_UNITS = {
    "": 1.0,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "msec": 1e-3,
    "msecs": 1e-3,
    "millisecond": 1e-3,
    "milliseconds": 1e-3,
    "usec": 1e-6,
    "usecs": 1e-6,
    "microsecond": 1e-6,
    "microseconds": 1e-6,
    "nsec": 1e-9,
    "nsecs": 1e-9,
    "nanosecond": 1e-9,
    "nanoseconds": 1e-9,
}
_TERM = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)")


def parse_interval(text: str) -> float:
    """Seconds of a PCP interval (``"5"``, ``"1.5 sec"``, ``"2min 30s"``);
    raises pmErr(PM_ERR_CONV) on anything else."""
    pos, total, found = 0, 0.0, False
    text = text.strip()
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.group(2).lower() not in _INTERVAL_UNITS:
            raise pmErr(CPMAPI["PM_ERR_CONV"], text)
        total += float(m.group(1)) * _INTERVAL_UNITS[m.group(2).lower()]
        pos, found = m.end(), True
    if not found:
        raise pmErr(CPMAPI["PM_ERR_CONV"], text)
    return total


_SPACE = ["byte", "Kbyte", "Mbyte", "Gbyte", "Tbyte", "Pbyte", "Ebyte", "Zbyte", "Ybyte"]
_TIME = ["nanosec", "microsec", "millisec", "sec", "min", "hour"]
_SPACE_WORDS = {w.lower(): k for k, w in enumerate(_SPACE)} | {w.lower() + "s": k for k, w in enumerate(_SPACE)}
for _k, _prefix in enumerate(["", "kilo", "mega", "giga", "tera", "peta", "exa", "zetta", "yotta"]):
    if _prefix:
        _SPACE_WORDS[_prefix + "byte"] = _SPACE_WORDS[_prefix + "bytes"] = _k


_TIME_WORDS = {
    **{w: k for k, w in enumerate(_TIME)},
    **{w + "s": k for k, w in enumerate(_TIME)},
    "nsec": 0,
    "usec": 1,
    "msec": 2,
    "second": 3,
    "seconds": 3,
    "s": 3,
    "minute": 4,
    "minutes": 4,
    "hr": 5,
    "hours": 5,
}


def parse_units(text: str) -> tuple[pmUnits, float]:
    """``pmParseUnitsStr``: ``"Kbyte / sec"``, ``"count x 10^3"``,
    ``"millisec"``, ``"byte^2"``, an optional leading multiplier; returns
    the units and the multiplier."""
    u = pmUnits()
    mult = 1.0
    side = 1
    toks = re.findall(r"[0-9.eE+-]+|\^-?[0-9]+|[A-Za-z]+|/|\*|x", text)
    k = 0
    while k < len(toks):
        t = toks[k]
        power = 1
        if k + 1 < len(toks) and toks[k + 1].startswith("^"):
            power = int(toks[k + 1][1:])
            k += 1
        low = t.lower()
        if t == "/":
            side = -1
        elif t in ("*",):
            pass
        elif t == "x" and k + 1 < len(toks) and toks[k + 1] == "10":
            exp = int(toks[k + 2][1:]) if k + 2 < len(toks) and toks[k + 2].startswith("^") else 1
            u.scaleCount = exp
            k += 3 if k + 2 < len(toks) and toks[k + 2].startswith("^") else 2
            continue
        elif low in ("count", "counts"):
            u.dimCount += side * power
        elif low in _SPACE_WORDS:
            u.dimSpace += side * power
            u.scaleSpace = _SPACE_WORDS[low]
        elif low in _TIME_WORDS:
            u.dimTime += side * power
            u.scaleTime = _TIME_WORDS[low]
        else:
            try:
                mult /= float(t)  # "5 Kbyte": one unit is 5 Kbyte, a value is scaled by 1/5
            except (ValueError, ZeroDivisionError):
                raise pmErr(CPMAPI["PM_ERR_CONV"], f"unknown units {text!r}") from None
        k += 1
    return u, mult


def units_str(u: pmUnits) -> str:
    """``pmUnitsStr`` for the common cases (``Kbyte / sec``, ``count``, ``""``)."""
    pos: list[str] = []
    neg: list[str] = []

    def term(word: str, dim: int) -> None:
        if dim:
            (pos if dim > 0 else neg).append(word if abs(dim) == 1 else f"{word}^{abs(dim)}")

    term(_SPACE[u.scaleSpace] if 0 <= u.scaleSpace < len(_SPACE) else "byte", u.dimSpace)
    term(_TIME[u.scaleTime] if 0 <= u.scaleTime < len(_TIME) else "sec", u.dimTime)
    count = "count" if u.scaleCount == 0 else f"count x 10^{u.scaleCount}"
    term(count, u.dimCount)
    if not pos and not neg:
        return ""
    if not neg:
        return " ".join(pos)
    return f"{' '.join(pos)} / {' '.join(neg)}" if pos else f"/ {' '.join(neg)}"


_debug = {"flags": 0}


class pmContext:
    """The static helpers of ``pcp.pmapi.pmContext`` a PMDA calls; a
    client context to pmcd is not offered (PM_ERR_NYI)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise pmErr(CPMAPI["PM_ERR_NYI"], "pmContext connections are not offered by pmda-py compat")

    @staticmethod
    def pmGetConfig(variable: str | bytes) -> str | None:
        """The environment's value, else ``pcp.conf``'s (as libpcp: the
        environment wins); None when neither has it."""
        name = variable.decode() if isinstance(variable, bytes) else variable
        if name in os.environ:
            return os.environ[name]
        return pcp_conf().get(name)

    @staticmethod
    def pmErrStr(code: int) -> str:
        return errstr(code)

    @staticmethod
    def pmIDStr(pmid: int) -> str:
        return _p.pmid_str(int(pmid) & 0xFFFFFFFF)

    @staticmethod
    def pmInDomStr(indom: int | pmDesc) -> str:
        """An indom's text (``"D.S"``); of a pmDesc (or any object with an
        ``indom`` attribute), its ``indom``'s."""
        value = indom.indom if isinstance(indom, pmDesc) else int(getattr(indom, "indom", indom))
        return _p.indom_str(int(value) & 0xFFFFFFFF)

    @staticmethod
    def pmID_build(d: int, c: int, i: int) -> int:
        return _p.pmid(d, c, i)

    @staticmethod
    def pmID_domain(pmid: int) -> int:
        return _p.pmid_domain(pmid)

    @staticmethod
    def pmID_cluster(pmid: int) -> int:
        return _p.pmid_cluster(pmid)

    @staticmethod
    def pmID_item(pmid: int) -> int:
        return _p.pmid_item(pmid)

    @staticmethod
    def pmInDom_build(d: int, s: int) -> int:
        return _p.indom(d, s)

    @staticmethod
    def pmInDom_domain(i: int) -> int:
        return _p.indom_domain(i)

    @staticmethod
    def pmInDom_serial(i: int) -> int:
        return _p.indom_serial(i)

    @staticmethod
    def pmParseUnitsStr(text: str | bytes) -> tuple[pmUnits, float]:
        if not isinstance(text, (str, bytes)):
            raise pmErr(CPMAPI["PM_ERR_CONV"], str(text))
        return parse_units(text.decode() if isinstance(text, bytes) else text)

    @staticmethod
    def pmParseInterval(interval: str) -> tuple[timeval, str]:
        return timeval.fromInterval(interval), ""

    @staticmethod
    def pmUnitsStr(units: pmUnits) -> str:
        return units_str(units)

    @staticmethod
    def pmTypeStr(t: int) -> str:
        names = {-1: "NOSUPPORT", 0: "32", 1: "U32", 2: "64", 3: "U64", 4: "FLOAT", 5: "DOUBLE", 6: "STRING"}
        names |= {7: "AGGREGATE", 8: "AGGREGATE_STATIC", 9: "EVENT", 10: "HIGHRES_EVENT"}
        return names.get(t, "???")

    @staticmethod
    def pmSemStr(sem: int) -> str:
        return {1: "counter", 3: "instant", 4: "discrete"}.get(sem, "???")

    @staticmethod
    def pmSetDebug(flags: str) -> int:
        """Accepted and remembered (the engine's log level is its own)."""
        _debug["flags"] = 1 if flags else 0
        return 0

    @staticmethod
    def pmClearDebug(flags: str) -> int:
        _debug["flags"] = 0
        return 0

    @staticmethod
    def pmDebug(flags: int) -> bool:
        """No libpcp debug options are set under pmda-py compat."""
        return False

    @staticmethod
    def pmProgname() -> str:
        return _state_progname[0]

    @staticmethod
    def pmGetProgname() -> str:
        return _state_progname[0]

    @staticmethod
    def pmtimevalSleep(tv: timeval) -> None:
        tv.sleep()


def set_progname(name: str) -> None:
    _state_progname[0] = name
