"""A table's options (``key = value`` lines of its ``[table]`` section, all
strings) read as numbers: a bad value is a ValueError naming the option and
the value, which the daemon says in its one line at start."""

from __future__ import annotations

import math

__all__ = ["option_seconds", "option_whole"]


def option_seconds(key: str, value: str, *, zero: bool = False) -> float:
    """``value`` as a finite number of seconds above 0 (``zero``: 0 or more)."""
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{key}: not a number: {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        least = "0 or more" if zero else "above 0"
        raise ValueError(f"{key}: {value!r} is not a number of seconds {least}")
    return seconds


def option_whole(key: str, value: str, least: int) -> int:
    """``value`` as a whole number, ``least`` or more."""
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{key}: not a whole number: {value!r}") from None
    if number < least:
        raise ValueError(f"{key}: {value!r} is less than {least}")
    return number
