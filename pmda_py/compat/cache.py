"""Dict ("cache") instance domains of compat scripts: libpcp_pmda's pmdaCache,
in its own files.

A pcp.pmda script that gives ``pmdaIndom``/``replace_indom`` a dict gets
libpcp_pmda's instance cache: the indom's file
``$PCP_VAR_DIR/config/pmda/DOMAIN.SERIAL`` is loaded once (its entries
inactive), a replace marks every entry inactive and adds the dict's keys
(a name seen before gets its old id back, a new one the next id; ids are not
reused), then saves the file when ids were added -- so a PMDA switched
between the binding and ``pmda-py compat``, either way, keeps its instance
ids.  The format and its rules are :mod:`pmda_py.pmdacache`'s (the one
implementation); this module adds what the binding keeps beside each entry:
the dict's value (a ctypes object ``inst_lookup`` hands back).

One :class:`IndomCache` per pmInDom, shared by every ``pmdaIndom`` of that
indom (the binding's caches are process-wide too).  Lookups by id and by
name are dictionary lookups (constant time).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import structlog

from pmda_py.errors import PmErr
from pmda_py.pmapi import indom_domain, indom_serial
from pmda_py.pmdacache import CacheFull, NameClash, PmdaCache

__all__ = ["IndomCache", "cache_path"]

log = structlog.get_logger("pmda_py.compat")


def cache_path(indom: int) -> str | None:
    """Where libpcp_pmda keeps ``indom``'s cache (None without PCP_VAR_DIR)."""
    from pmda_py.compat.pmapi import pmContext

    var = pmContext.pmGetConfig("PCP_VAR_DIR")
    if not var:
        return None
    return os.path.join(var, "config", "pmda", f"{indom_domain(indom)}.{indom_serial(indom)}")


class IndomCache:
    """One dict indom: the pmdaCache entries and the values given with the
    active ones."""

    def __init__(self, indom: int, path: str | None = None) -> None:
        self.indom = indom
        self.cache = PmdaCache(path)
        self.values: dict[int, object] = {}
        self.loaded = False
        #: the active entries, ``{inst: name}`` in id order (rebuilt on change)
        self.active: dict[int, str] = {}

    def load(self) -> None:
        """PMDA_CACHE_LOAD, once."""
        if self.loaded:
            return
        self.loaded = True
        problem = self.cache.load()
        if problem:
            log.warning(
                "instance_cache_problem",
                indom=f"{indom_domain(self.indom)}.{indom_serial(self.indom)}",
                problem=problem,
            )
        self._refresh()

    def _refresh(self) -> None:
        self.active = dict(sorted(self.cache.active().items()))

    def mark_inactive(self) -> None:
        self.cache.inactivate_all()
        self.values.clear()
        self._refresh()

    def resize(self, maximum: int) -> int:
        """pmdaCacheResize: 0, or PM_ERR_SIGN (``maximum`` below 0) or
        PM_ERR_TOOBIG (an id in the cache above it), as libpcp_pmda answers."""
        self.load()
        if maximum < 0:
            return PmErr.SIGN
        if any(inst > maximum for inst in self.cache.ids.values()):
            return PmErr.TOOBIG
        self.cache.resize(maximum)
        return 0

    def mark_active(self) -> None:
        self.cache.activate_all()
        self._refresh()

    def replace(self, insts: Mapping[str, object]) -> None:
        """The binding's ``set_dict_instances``: every entry inactive, each
        key added (active) with its value, then the file saved if ids were
        added."""
        self.load()
        self.cache.inactivate_all()
        self.values = {}
        for name, value in insts.items():
            try:
                inst = self.cache.lookup(str(name))
            except (NameClash, CacheFull, ValueError) as err:
                log.warning("instance_refused", name=str(name), error=str(err))
                continue
            self.values[inst] = value
        self.cache.save()
        self._refresh()

    def name_of(self, inst: int) -> str | None:
        """The name of an active instance."""
        return self.active.get(inst)

    def listing(self) -> list[tuple[int, str]]:
        """Active ``(id, name)`` in id order (libpcp_pmda walks its cache so)."""
        return list(self.active.items())
