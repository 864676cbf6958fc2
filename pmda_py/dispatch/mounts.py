"""The mount index of a dispatcher: every mounted table's metrics by PMID
and full name, its indoms by id, and the namespace they make — with the
collisions (clusters, indom serials, PMIDs, names) refused at start-up and
logged later."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import structlog

from pmda_py.errors import PmdaError, PmErr
from pmda_py.namespace import Namespace
from pmda_py.pmapi import pmid_str
from pmda_py.table import InDom, Metric, Table

__all__ = ["ConfigError", "Mount", "MountIndex"]

log = structlog.get_logger("pmda_py.dispatch")


class ConfigError(PmdaError):
    """The tables cannot be mounted together (collisions, bad names)."""

    code = PmErr.GENERIC


@attrs.define(eq=False)
class Mount:
    """A table mounted at ``prefix`` (the full name prefix, may be empty)."""

    table: Table
    prefix: str
    name: str = ""
    options: dict[str, str] = attrs.field(factory=dict)

    def full(self, metric: Metric) -> str:
        return f"{self.prefix}.{metric.name}" if self.prefix else metric.name


@attrs.define
class MountIndex:
    """Where every PMID, indom and name of the mounted tables is."""

    by_pmid: dict[int, tuple[Mount, Metric]] = attrs.field(factory=dict)
    by_indom: dict[int, tuple[Mount, InDom]] = attrs.field(factory=dict)
    by_name: dict[str, int] = attrs.field(factory=dict)
    pmns: Namespace = attrs.field(factory=Namespace)
    #: each table's ``generation`` when indexed (a change means: rebuild)
    generations: list[int] = attrs.field(factory=list)

    @classmethod
    def build(
        cls, mounts: Sequence[Mount], domain: int, *, strict: bool, prepare: Callable[[InDom], None]
    ) -> MountIndex:
        """Index ``mounts`` for ``domain``; ``prepare`` is called on each
        indom once it knows its domain (the persistent-id cache).  With
        ``strict`` a collision raises ConfigError, else it is logged and the
        later metric dropped."""
        by_pmid: dict[int, tuple[Mount, Metric]] = {}
        by_indom: dict[int, tuple[Mount, InDom]] = {}
        cluster_owner: dict[int, Mount] = {}
        pmns = Namespace()
        by_name: dict[str, int] = {}

        def problem(msg: str) -> None:
            if strict:
                raise ConfigError(msg)
            log.error("table_collision", problem=msg)

        for mount in mounts:
            t = mount.table
            tname = mount.name or type(t).__name__
            for c in sorted(t.clusters()):
                other = cluster_owner.get(c)
                if other is not None and other is not mount:
                    problem(f"tables {other.name or type(other.table).__name__} and {tname} both use cluster {c}")
                    continue
                cluster_owner[c] = mount
            for ind in t.indoms():
                ind.domain = domain
                prepare(ind)
                prev = by_indom.get(ind.id)
                if prev is not None and prev[1] is not ind:
                    problem(f"tables {prev[0].name} and {tname} both use indom serial {ind.serial}")
                    continue
                by_indom[ind.id] = (mount, ind)
            for m in t.metrics():
                if cluster_owner.get(m.cluster) is not mount:
                    continue
                p = m.pmid(domain)
                if p in by_pmid:
                    problem(f"{tname}: PMID {pmid_str(p)} declared twice ({m.name})")
                    continue
                if m.indom is not None and m.indom.id not in by_indom:
                    m.indom.domain = domain
                    prepare(m.indom)
                    by_indom[m.indom.id] = (mount, m.indom)
                full = mount.full(m)
                if full in by_name:
                    problem(f"{tname}: metric name {full} declared twice")
                    continue
                try:
                    pmns.add(full, p)
                except ValueError:
                    problem(f"{tname}: metric name {full} clashes with a non-leaf or leaf of the same name")
                    continue
                by_pmid[p] = (mount, m)
                by_name[full] = p
        return cls(by_pmid, by_indom, by_name, pmns, [m.table.generation for m in mounts])
