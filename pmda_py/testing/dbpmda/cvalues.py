"""The C library's number conversions as dbpmda uses them (glibc, LP64):
``strtol``/``strtoul``/``strtod``/``strtof``, ``atoi`` and the casts."""

from __future__ import annotations

import math
import re
import struct

__all__ = ["c_atoi", "c_strtod", "c_strtol", "c_strtoul", "to_int", "to_uint"]

_LONG_MAX, _LONG_MIN, _ULONG_MAX = (1 << 63) - 1, -(1 << 63), (1 << 64) - 1
_INT_PREFIX = re.compile(r"[ \t\n\v\f\r]*([+-]?)")


def _digits(text: str, start: int, base: int) -> tuple[str, int]:
    if base == 16 and re.match(r"0[xX][0-9a-fA-F]", text[start:]):
        start += 2
    end = start
    while end < len(text) and text[end].isascii() and text[end].isalnum() and int(text[end], 36) < base:
        end += 1
    return text[start:end], end


def c_strtol(text: str, base: int = 10) -> tuple[int, int, bool]:
    """``strtol``: (value, characters used, ERANGE)."""
    m = _INT_PREFIX.match(text)
    assert m is not None
    digits, end = _digits(text, m.end(), base)
    if not digits:
        return 0, 0, False
    value = int(digits, base) * (-1 if m.group(1) == "-" else 1)
    if value > _LONG_MAX:
        return _LONG_MAX, end, True
    if value < _LONG_MIN:
        return _LONG_MIN, end, True
    return value, end, False


def c_strtoul(text: str, base: int = 10) -> tuple[int, int, bool]:
    """``strtoul``/``strtoull``: a minus sign negates in unsigned arithmetic."""
    m = _INT_PREFIX.match(text)
    assert m is not None
    digits, end = _digits(text, m.end(), base)
    if not digits:
        return 0, 0, False
    value = int(digits, base)
    if value > _ULONG_MAX:
        return _ULONG_MAX, end, True
    if m.group(1) == "-":
        value = (-value) & _ULONG_MAX
    return value, end, False


def to_int(value: int) -> int:
    """A cast to (32-bit) ``int``."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def to_uint(value: int) -> int:
    return value & 0xFFFFFFFF


def c_atoi(text: str, base: int = 10) -> int:
    """``atoi`` and ``sscanf("%d")`` as glibc does them: ``(int)strtol``."""
    return to_int(c_strtol(text, base)[0])


_FLOAT = re.compile(
    r"[ \t\n\v\f\r]*[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN](?:\([0-9A-Za-z_]*\))?)"
)


def c_strtod(text: str, single: bool = False) -> tuple[float, int, bool]:
    """``strtod`` (``strtof`` when ``single``): (value, characters used, ERANGE)."""
    m = _FLOAT.match(text)
    if m is None:
        return 0.0, 0, False
    s = m.group(0).strip(" \t\n\v\f\r")
    body = s.lstrip("+-")
    neg = s.startswith("-")
    if body[:2] in ("0x", "0X"):
        mant = body[2:]
        exp = 0
        if "p" in mant.lower():
            mant, e = re.split("[pP]", mant)
            exp = int(e)
        try:
            value = float.fromhex(f"0x{mant}p{exp}")
        except OverflowError:
            value = math.inf
        if neg:
            value = -value
    elif body[:1].lower() == "n":
        value = math.nan
    else:
        try:
            value = float(s)
        except (ValueError, OverflowError):
            value = math.inf
    erange = False
    if single and not math.isinf(value) and not math.isnan(value):
        try:
            value = struct.unpack("f", struct.pack("f", value))[0]
        except OverflowError:
            value = math.copysign(math.inf, value)
            erange = True
    if math.isinf(value) and body[:1].lower() != "i":
        erange = True
    tiny = 1.1754943508222875e-38 if single else 2.2250738585072014e-308
    mantissa = re.sub(r"[eEpP][+-]?[0-9]+$", "", body[2:] if body[:2] in ("0x", "0X") else body)
    if abs(value) < tiny and re.search(r"[1-9a-fA-F]", mantissa):
        erange = True  # underflow
    return value, m.end(), erange
