"""pmdaopenmetrics' metric metadata, sans-IO: a metric's type, semantics
and units from its ``# PCP``/``# PCP5`` line or a ``METADATA:`` line of its
config (units read as the common forms of pmParseUnitsStr(3)), or else from
pmdaopenmetrics' heuristics on its name and ``# TYPE``; its help text; the
metric names it takes."""

from __future__ import annotations

import re

from pmda_py.pmapi import PmSem, PmType, PmUnits

__all__ = ["metric_metadata", "parse_units", "split_help", "valid_metric_name", "valid_unicode_name"]

_TYPES = {
    "double": PmType.DOUBLE,
    "float": PmType.FLOAT,
    "u64": PmType.U64,
    "64": PmType.I64,
    "u32": PmType.U32,
    "32": PmType.I32,
    "string": PmType.STRING,
    "aggregate": PmType.AGGREGATE,
}


_SPACE = {"byte": 0, "kbyte": 1, "mbyte": 2, "gbyte": 3, "tbyte": 4, "pbyte": 5, "ebyte": 6, "zbyte": 7, "ybyte": 8}
_SPACE_ALIASES = {
    "bytes": "byte",
    "b": "byte",
    "kb": "kbyte",
    "kib": "kbyte",
    "mb": "mbyte",
    "mib": "mbyte",
    "gb": "gbyte",
    "gib": "gbyte",
    "tb": "tbyte",
    "tib": "tbyte",
}
_TIME = {"nanosec": 0, "microsec": 1, "millisec": 2, "sec": 3, "min": 4, "hour": 5}
_TIME_ALIASES = {
    "nsec": "nanosec",
    "ns": "nanosec",
    "nanosecond": "nanosec",
    "nanoseconds": "nanosec",
    "usec": "microsec",
    "us": "microsec",
    "microsecond": "microsec",
    "microseconds": "microsec",
    "msec": "millisec",
    "ms": "millisec",
    "millisecond": "millisec",
    "milliseconds": "millisec",
    "s": "sec",
    "second": "sec",
    "seconds": "sec",
    "minute": "min",
    "minutes": "min",
    "hours": "hour",
    "hr": "hour",
}


def parse_units(text: str) -> PmUnits:
    """The common forms of pmParseUnitsStr(3): ``none``, ``byte``,
    ``Kbyte / sec``, ``count``, ``count x 10^3``, ``millisec`` ...

    Raises:
        ValueError: a form this reader does not know.
    """
    s = text.strip()
    if s in ("", "none"):
        return PmUnits()
    num, _, den = s.partition("/")
    dims = [0, 0, 0]
    scales = [0, 0, 0]
    for sign, part in ((1, num), (-1, den)):
        toks = part.replace("^", " ^ ").split()
        k = 0
        while k < len(toks):
            t = toks[k].lower()
            power = 1
            if k + 2 < len(toks) and toks[k + 1] == "^" and toks[k + 2].lstrip("-").isdigit() and t != "10":
                power = int(toks[k + 2])
                k += 2
            if t in ("count", "counts"):
                dims[2] += sign * power
            elif t == "x" and k + 3 < len(toks) and toks[k + 1] == "10" and toks[k + 2] == "^":
                scales[2] = int(toks[k + 3])
                k += 3
            elif _SPACE_ALIASES.get(t, t) in _SPACE:
                dims[0] += sign * power
                scales[0] = _SPACE[_SPACE_ALIASES.get(t, t)]
            elif _TIME_ALIASES.get(t, t) in _TIME:
                dims[1] += sign * power
                scales[1] = _TIME[_TIME_ALIASES.get(t, t)]
            else:
                raise ValueError(f"unknown unit (word {k + 1} of {len(toks)})")
            k += 1
    if not all(-8 <= d <= 7 for d in dims):
        raise ValueError("dimension out of range")
    if not -8 <= scales[2] <= 7:  # (pmUnits holds it in 4 signed bits: 10^8 would be sent as 10^-8)
        raise ValueError("count scale out of range")
    return PmUnits(
        dim_space=dims[0],
        dim_time=dims[1],
        dim_count=dims[2],
        scale_space=scales[0] if dims[0] else 0,
        scale_time=scales[1] if dims[1] else 0,
        scale_count=scales[2] if dims[2] else 0,
    )


_NO_UNITS = PmUnits()  #: (frozen: one for every metric without units)
_SECONDS = PmUnits(dim_time=1, scale_time=3)
_MICROSECONDS = PmUnits(dim_time=1, scale_time=1)
_BYTES = PmUnits(dim_space=1)
_COUNT = PmUnits(dim_count=1)
_SEMS = {"instant": PmSem.INSTANT, "counter": PmSem.COUNTER, "discrete": PmSem.DISCRETE}


def metric_metadata(
    name: str, pcpline: str | None, typeline: str | None, problems: list[str] | None = None
) -> tuple[str, int, int, PmUnits, bool]:
    """``(leaf name, type, semantics, units, forced singular)`` of exposition
    metric ``name``, from its PCP/PCP5/METADATA line or the heuristics.

    Raises:
        ValueError: a PCP line without a name, a PCP5 one without its
            semantics (pmdaopenmetrics stops reading the document there).
    """
    mtype, sem, units = PmType.DOUBLE, PmSem.INSTANT, _NO_UNITS
    if pcpline:
        md = pcpline.split(" ")
        if len(md) < (5 if md[0] in ("PCP5", "METADATA") else 2):
            raise ValueError(f"a {md[0]} line with too few fields ({len(md)})")
        leaf = md[1] if len(md) > 1 else name
        unit_text: str | None = None
        if md[0] in ("PCP5", "METADATA"):
            sem = _SEMS.get(md[4], sem) if len(md) > 4 else sem
            mtype = _TYPES.get(md[2], PmType.DOUBLE) if len(md) > 2 else mtype
            if len(md) >= 5:
                unit_text = " ".join(md[5:])
        elif md[0] == "PCP":
            sem = _SEMS.get(md[2], sem) if len(md) >= 3 else sem
            if len(md) >= 4:
                unit_text = " ".join(md[3:])
        if unit_text is not None:
            try:
                units = parse_units(unit_text)
            except ValueError as err:
                if problems is not None:
                    problems.append(f"units of a metric: {err}")
        return leaf, mtype, sem, units, "PM_INDOM_NULL" in md
    pieces = name.split("_")
    leaf = name.replace(":", ".")
    bucket = typeline == "histogram" and "bucket" in pieces
    if typeline == "counter" or "total" in pieces or "count" in pieces or "sum" in pieces or bucket:
        sem = PmSem.COUNTER
    if (typeline in ("histogram", "summary") and "count" in pieces) or bucket:
        units = _COUNT
    elif "seconds" in pieces:
        units = _SECONDS
    elif "microseconds" in pieces:
        units = _MICROSECONDS
    elif "bytes" in pieces:
        units = _BYTES
    return leaf, mtype, sem, units, False


def valid_metric_name(name: str) -> bool:
    """pmdaopenmetrics' rule (letters, digits, ``_ . :``, a letter first),
    ASCII only (PCP names are ASCII)."""
    return name.isascii() and valid_unicode_name(name)


def valid_unicode_name(name: str) -> bool:
    """pmdaopenmetrics' rule as it applies it: any letters and digits."""
    return name[0].isalpha() and re.sub("[_.:]", "", name).isalnum()


def split_help(helpline: str | None) -> tuple[str, str]:
    """``(one-line, rest)`` of a ``# HELP`` text after unescaping."""
    if not helpline:
        return "", ""
    lines = helpline.replace("\\\\", "\\").replace("\\n", "\n").split("\n")
    return lines[0], "\n".join(lines[1:])
