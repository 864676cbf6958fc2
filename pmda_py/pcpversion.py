"""The installed PCP: its settings (``pcp.conf``) and its version, where PCP
changed behaviour between releases.

:func:`pcp_conf` is the one reader of ``$PCP_CONF`` (default
``/etc/pcp.conf``): the file is parsed once per process and path (as libpcp
reads it once), the process environment overrides it at every call.
:func:`pcp_version` is ``PCP_VERSION`` from the environment (tests set it),
else from that file; without either, the oldest release we follow (6.0.3,
Debian 12).  Imports nothing from :mod:`pmda_py` (:mod:`pmda_py.errors`
uses it).
"""

from __future__ import annotations

import functools
import os
import re

from pmda_py.safefile import read_regular

__all__ = ["BASELINE", "PCP_CONF_DEFAULTS", "parse", "pcp_conf", "pcp_version"]

BASELINE = (6, 0, 3)

#: what :func:`pcp_conf` says where neither pcp.conf nor the environment does
PCP_CONF_DEFAULTS: dict[str, str] = {
    "PCP_LOG_DIR": "/var/log/pcp",
    "PCP_VAR_DIR": "/var/lib/pcp",
    "PCP_TMP_DIR": "/var/lib/pcp/tmp",
    "PCP_PMDAS_DIR": "/var/lib/pcp/pmdas",
    "PCP_SYSCONF_DIR": "/etc/pcp",
    "PCP_RUN_DIR": "/run/pcp",
    "PCP_USER": "pcp",
    "PCP_GROUP": "pcp",
}


#: bytes pcp.conf may have (PCP's is about 10 KB)
MAX_CONF = 1 << 20


def _conf_path() -> str:
    return os.environ.get("PCP_CONF", "/etc/pcp.conf")


@functools.lru_cache(maxsize=4)
def _read_conf(path: str) -> tuple[tuple[str, str], ...]:
    """The ``NAME=value`` lines of the file at ``path`` (quotes stripped),
    in order; none when it cannot be read (or is not a regular file of at
    most :data:`MAX_CONF` bytes: a FIFO put at ``$PCP_CONF`` cannot stall).  Cached by path
    (``_read_conf.cache_clear()`` re-reads)."""
    items: list[tuple[str, str]] = []
    try:
        text = read_regular(path, MAX_CONF, whole=True).decode("utf-8", "replace")
    except OSError:
        return ()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            items.append((k.strip(), v.strip().strip('"')))
    return tuple(items)


def pcp_conf() -> dict[str, str]:
    """PCP's environment: :data:`PCP_CONF_DEFAULTS`, then ``/etc/pcp.conf``
    (or ``$PCP_CONF``; parsed once per path), both overridden by the
    process environment (read at every call)."""
    conf = dict(PCP_CONF_DEFAULTS)
    conf.update(_read_conf(_conf_path()))
    for k in list(conf):
        if k in os.environ:
            conf[k] = os.environ[k]
    return conf


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
        text = next((v for k, v in _read_conf(_conf_path()) if k == "PCP_VERSION"), None)
    try:
        return parse(text) if text else BASELINE
    except ValueError:
        return BASELINE
