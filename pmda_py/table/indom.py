"""An instance domain as a table declares it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Callable

import attrs
import structlog

from pmda_py.errors import UnknownInstance
from pmda_py.pmapi import PM_INDOM_NULL, indom
from pmda_py.pmdacache import PmdaCache, State
from pmda_py.table.values import Labels, check_labels

__all__ = ["INACTIVE_KEPT", "InDom", "InstanceCache"]

#: the persistent cache of an indom: libpcp_pmda's pmdaCache format (see pmda_py.pmdacache)
InstanceCache = PmdaCache

#: names gone from an indom whose ids :meth:`InDom.set_names` keeps (the ones gone longest go first)
INACTIVE_KEPT = 10_000
#: refused instance names an indom logs (each once)
REFUSED_KEPT = 1024


#: the labels of a metric or indom that has none: one read-only mapping shared by
#: all of them (tables make 100 000s of metrics; an empty dict each is 64 bytes)
NO_LABELS: Labels = MappingProxyType({})
NO_INSTANCE_LABELS: Mapping[int, Labels] = MappingProxyType({})


@attrs.define(eq=False)
class InDom:
    """An instance domain.

    Args:
        serial: the indom serial, unique within the PMDA's domain.
        instances: the initial ``{id: name}`` map (static indoms).
        oneline, help: help text for ``text indom``.
        labels: indom-level labels.
        instance_labels: ``{id: {name: value}}`` or a callable ``(id, name) -> dict``.
        persistent: keep name -> id assignments across restarts (dynamic
            indoms updated with :meth:`set_names`): the daemon keeps them in
            its state directory (``--state-dir``, default
            ``$PCP_VAR_DIR/config/pmda``) as ``DOMAIN.SERIAL`` in
            libpcp_pmda's pmdaCache format (:mod:`pmda_py.pmdacache`), so a
            libpcp agent of the same domain and pmda_py keep each other's
            ids; ids of names that went away are not given to another name
            until the maximum id is reached.
    """

    serial: int
    #: the ``{id: name}`` map, read-only: change it with :meth:`set`,
    #: :meth:`set_names` or by assigning a new mapping, each of which moves
    #: :attr:`version` (the daemon's remembered INSTANCE replies are checked
    #: against it; a map changed in place could not be seen)
    instances: Mapping[int, str] = attrs.field(factory=dict, on_setattr=lambda ind, _a, value: ind._new_map(value))
    oneline: str | int | None = None  #: an int: the PCP error code answered instead
    help: str | int | None = None
    labels: Labels = NO_LABELS
    instance_labels: Mapping[int, Labels] | Callable[[int, str], Labels] = NO_INSTANCE_LABELS
    persistent: bool = False
    cache: PmdaCache = attrs.field(factory=PmdaCache)
    #: every entry in listing order, a repeated id too (pmdammv lists an MMV
    #: indom so); None: the ``instances`` map is the listing
    listing: tuple[tuple[int, str], ...] | None = None
    #: set by the daemon when mounted
    domain: int = -1
    #: moves whenever ``instances`` changes (what the daemon's remembered
    #: INSTANCE replies are checked against)
    version: int = attrs.field(default=0, init=False)
    #: name -> id, made on the first lookup by name (None: not made, or the instances changed
    #: since; tables make 100 000s of indoms that are never looked up by name)
    _by_name: dict[str, int] | None = attrs.field(default=None, init=False, repr=False)
    _refused: set[str] | None = attrs.field(default=None, init=False, repr=False)  #: names logged as refused
    #: what set_names left in :attr:`cache`: the ids it made active ({id: name}), and the names it
    #: made inactive, oldest first (None: not known yet, or the cache object was replaced since)
    _active: dict[int, str] | None = attrs.field(default=None, init=False, repr=False)
    _inactive: dict[int, str] = attrs.field(factory=dict, init=False, repr=False)
    _tracked: PmdaCache | None = attrs.field(default=None, init=False, repr=False)

    def _new_map(self, value: Mapping[int, str]) -> Mapping[int, str]:
        new = dict(value)
        if new != self.instances:  # the same instances again (a refresh): nothing for the daemon to rebuild
            self.version += 1
        self._by_name = None
        return MappingProxyType(new)

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.serial <= 0x3FFFFF:
            raise ValueError(f"indom serial {self.serial} out of range")
        check_labels(f"indom {self.serial}", self.labels)
        self.instances = dict(self.instances)

    def _entries(self) -> Iterable[tuple[int, str]]:
        """``(id, name)`` as the indom lists them (an id listed twice, twice)."""
        return self.instances.items() if self.listing is None else self.listing

    def _names(self) -> dict[str, int]:
        by_name = self._by_name
        if by_name is None:
            # a name listed more than once finds its first entry, as pmdaInstance's scan does
            by_name = self._by_name = {v: k for k, v in reversed(tuple(self._entries()))}
        return by_name

    @property
    def id(self) -> int:
        """The pmInDom (needs the domain: set when the table is mounted)."""
        return indom(self.domain, self.serial) if self.domain >= 0 else PM_INDOM_NULL

    def set(self, instances: Mapping[int, str]) -> None:
        """Replace the instances with an explicit ``{id: name}`` map (this,
        :meth:`set_names` or assigning a new mapping to ``instances`` are the
        ways to change them: ``instances`` itself is read-only)."""
        self.instances = instances  # a read-only copy (see _new_map; the name index made again when asked)

    def set_names(self, names: Iterable[str]) -> dict[int, str]:
        """Replace the instances by names; ids stay stable (pmdaCache: the
        names given are active, the others inactive and their ids kept) and
        are persisted when the indom is ``persistent``.  A name the cache
        refuses (empty, or the same as another up to the first space but
        not after it) is left out and logged once.

        The names that went away are remembered, for their ids, up to
        :data:`INACTIVE_KEPT` of them: past that the ones gone longest are
        forgotten (culled, and dropped from the persistent file at its next
        save), so an indom whose names keep changing (processes, containers)
        holds and costs no more than that; each call costs the names given
        and those active before, not every name ever seen."""
        cache = self.cache
        active = self._active
        if active is None or self._tracked is not cache:
            # first call on this cache: whatever it holds (loaded from a file) goes inactive, oldest ids first
            cache.inactivate_all()
            self._tracked, self._inactive = cache, {e.inst: e.name for e in cache.entries()}
            active = {}
        inactive = self._inactive
        new: dict[int, str] = {}
        for n in names:
            try:
                inst = cache.lookup(n)
            except ValueError as err:  # NameClash, CacheFull, an empty name
                self._refuse(n, err)
                continue
            new[inst] = n
            inactive.pop(inst, None)
        for inst, n in active.items():
            if inst not in new and cache.hide(n):
                inactive[inst] = n
        while len(inactive) > INACTIVE_KEPT:
            inst = next(iter(inactive))
            n = inactive.pop(inst)
            if cache.state_of(inst) is State.INACTIVE:  # (the table may have made it active itself)
                cache.cull(n)
        self._active = new
        self.set(new)
        cache.save()
        return new

    def _refuse(self, name: str, err: ValueError) -> None:
        """Log a refused name once (up to :data:`REFUSED_KEPT` names remembered)."""
        if self._refused is None:
            self._refused = set()
        if name in self._refused or len(self._refused) > REFUSED_KEPT:
            return
        self._refused.add(name)
        log = structlog.get_logger("pmda_py.table")
        if len(self._refused) > REFUSED_KEPT:
            log.warning("instance_refusals_not_logged", indom=self.serial, detail=f"{REFUSED_KEPT} names logged")
        else:
            log.warning("instance_refused", indom=self.serial, name=name[:80], reason=str(err))

    def name_of(self, inst: int) -> str:
        try:
            return self.instances[inst]
        except KeyError:
            raise UnknownInstance() from None

    def id_of(self, name: str) -> int:
        """Instance id by name; like pmdaInstance, an exact match first,
        then a match on the name up to the first space."""
        inst = self._names().get(name)
        if inst is not None:
            return inst
        for k, v in self._entries():
            if v.split(" ", 1)[0] == name:
                return k
        raise UnknownInstance()

    def labels_for(self, inst: int) -> Labels:
        il = self.instance_labels
        if callable(il):
            return il(inst, self.instances.get(inst, ""))
        return il.get(inst, {})
