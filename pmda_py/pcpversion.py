"""The installed PCP's version, where PCP changed behaviour between releases.

``PCP_VERSION`` from the process environment (tests set it), else from
``$PCP_CONF`` (default ``/etc/pcp.conf``), read once per process; without
either, the oldest release we follow (6.0.3, Debian 12).  Imports nothing
from :mod:`pmda_py` (:mod:`pmda_py.errors` uses it).
"""

from __future__ import annotations

import functools
import os
import re

__all__ = ["BASELINE", "parse", "pcp_version"]

BASELINE = (6, 0, 3)


def parse(text: str) -> tuple[int, int, int]:
    """``"7.2.2"`` -> ``(7, 2, 2)``; missing parts are 0, junk after a part ignored."""
    parts = [int(m) for m in re.findall(r"\d+", text)[:3]]
    if not parts:
        raise ValueError(f"not a PCP version: {text!r}")
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


@functools.lru_cache(maxsize=1)
def pcp_version() -> tuple[int, int, int]:
    """The installed PCP's version (cached; ``pcp_version.cache_clear()`` re-reads)."""
    text = os.environ.get("PCP_VERSION")
    if not text:
        try:
            with open(os.environ.get("PCP_CONF", "/etc/pcp.conf"), encoding="utf-8", errors="replace") as f:
                for line in f:
                    k, sep, v = line.strip().partition("=")
                    if sep and k.strip() == "PCP_VERSION":
                        text = v.strip().strip('"')
                        break
        except OSError:
            pass
    try:
        return parse(text) if text else BASELINE
    except ValueError:
        return BASELINE
