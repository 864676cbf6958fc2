"""Dict ("cache") instance domains of compat scripts: pmdaCache's semantics.

A pcp.pmda script that gives ``pmdaIndom``/``replace_indom`` a dict gets
libpcp_pmda's instance cache: every name keeps its id for the PMDA's life
(and across restarts once saved), a name seen again gets its old id back,
new names get the next id after the highest ever given (ids are not reused),
and a replace marks every entry inactive before the dict's keys are made
active again.  Each entry keeps the dict's value (a ctypes object), so
``inst_lookup`` can hand it back.

One :class:`IndomCache` per pmInDom, shared by every ``pmdaIndom`` object of
that indom (the binding's cache is global to the process too).  Lookups by
id and by name are dictionary lookups (constant time).
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["IndomCache"]


@attrs.define(eq=False)
class IndomCache:
    indom: int
    #: id -> name, every entry ever seen (active or not)
    names: dict[int, str] = attrs.field(factory=dict)
    #: name -> id
    ids: dict[str, int] = attrs.field(factory=dict)
    #: the active entries' ids -> the values given with them
    active: dict[int, Any] = attrs.field(factory=dict)
    next_id: int = 0
    #: bumped whenever the active set changes
    version: int = 0

    def mark_inactive(self) -> None:
        if self.active:
            self.active = {}
            self.version += 1

    def mark_active(self) -> None:
        self.active = dict.fromkeys(self.names, None) | self.active
        self.version += 1

    def add(self, name: str, value: Any) -> int:
        """Make ``name`` active with ``value``; returns its id."""
        inst = self.ids.get(name)
        if inst is None:
            inst = self.next_id
            self.next_id += 1
            self.names[inst] = name
            self.ids[name] = inst
        self.active[inst] = value
        self.version += 1
        return inst

    def replace(self, insts: dict[str, Any]) -> None:
        """The binding's ``set_dict_instances``: all inactive, then each key added."""
        self.active = {}
        for name, value in insts.items():
            self.add(name, value)
        self.version += 1

    def listing(self) -> list[tuple[int, str]]:
        """Active ``(id, name)`` in id order (libpcp_pmda walks its cache so)."""
        return [(i, self.names[i]) for i in sorted(self.active)]
