"""The mount index of a dispatcher: every mounted table's metrics by PMID
and full name, its indoms by id, and the namespace they make — with the
collisions (clusters, indom serials, PMIDs, names) refused at start-up and
listed later (the dispatcher logs them).  No I/O, no logging."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from pmda_py.errors import PmdaError, PmErr
from pmda_py.namespace import Namespace
from pmda_py.pmapi import pmid_str
from pmda_py.table import InDom, Metric, Table

__all__ = ["ConfigError", "Mount", "MountIndex"]


class ConfigError(PmdaError):
    """The tables cannot be mounted together (collisions, bad names)."""

    code = PmErr.GENERIC


@attrs.define(eq=False)
class Mount:
    """A table mounted at ``mount``: the full name prefix of its metrics
    (``"pypmda.queues"``; may be empty), as :attr:`TableContext.mount
    <pmda_py.table.TableContext.mount>` tells the table.  ``name`` is the
    table's name in the configuration (``[table NAME]``, by default the
    table class's ``name``)."""

    table: Table
    mount: str
    name: str = ""
    options: dict[str, str] = attrs.field(factory=dict)
    #: the table's name in logs and counters: ``name``, else the table's class name
    label: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.label = self.name or type(self.table).__name__

    def full(self, metric: Metric) -> str:
        return f"{self.mount}.{metric.name}" if self.mount else metric.name


@attrs.define
class MountIndex:
    """Where every PMID, indom and name of the mounted tables is.

    :meth:`build` indexes every table; :meth:`update` applies one table's
    changes (its ``generation`` moved) to the index in place, at a cost in
    the names that came and went, not in the whole namespace.  An update
    ends where it cannot give what a rebuild would (a collision, an indom
    or cluster changing hands): the caller then rebuilds.  A namespace
    updated so lists a non-leaf's children in the order they arrived (as
    pcp.pmda's tree, rebuilt from its metric table in registration order);
    a rebuild lists them in the tables' order."""

    by_pmid: dict[int, tuple[Mount, Metric]] = attrs.field(factory=dict)
    by_indom: dict[int, tuple[Mount, InDom]] = attrs.field(factory=dict)
    by_name: dict[str, int] = attrs.field(factory=dict)
    #: (each PMID has the one name by_pmid gives: the tree keeps no names by PMID)
    pmns: Namespace = attrs.field(factory=lambda: Namespace(pmid_names=False))
    #: each table's ``generation`` when indexed (a change means: update)
    generations: list[int] = attrs.field(factory=list)
    #: per mount: every metric its table listed, how many of them are
    #: indexed by cluster, and those not indexed (their cluster is not the mount's)
    members: list[set[Metric]] = attrs.field(factory=list)
    counts: list[dict[int, int]] = attrs.field(factory=list)
    skipped: list[set[Metric]] = attrs.field(factory=list)
    #: per mount: the clusters and the indoms its table declared
    clusters: list[set[int]] = attrs.field(factory=list)
    declared: list[set[InDom]] = attrs.field(factory=list)
    cluster_owner: dict[int, Mount] = attrs.field(factory=dict)
    #: indexed metrics by the indom they name
    indom_refs: dict[InDom, int] = attrs.field(factory=dict)
    #: something was dropped or shared in a way only a rebuild reproduces
    #: (a collision, two indom objects of one id): no updates
    irregular: bool = False
    #: the collisions the build dropped a metric, cluster or indom for (the
    #: dispatcher logs those the index before it did not have)
    problems: list[str] = attrs.field(factory=list)
    #: the names the last :meth:`update` removed and added (so far, when it gave up)
    partial: tuple[set[str], set[str]] = attrs.field(factory=lambda: (set(), set()))

    @classmethod
    def build(
        cls, mounts: Sequence[Mount], domain: int, *, strict: bool, prepare: Callable[[InDom], None]
    ) -> MountIndex:
        """Index ``mounts`` for ``domain``; ``prepare`` is called on each
        indom once it knows its domain (the persistent-id cache).  With
        ``strict`` a collision raises ConfigError, else the later metric
        (cluster, indom) is dropped and the collision listed in
        :attr:`problems`."""
        index = cls()
        by_pmid, by_indom, by_name, pmns = index.by_pmid, index.by_indom, index.by_name, index.pmns
        cluster_owner = index.cluster_owner
        refs = index.indom_refs

        def problem(msg: str) -> None:
            if strict:
                raise ConfigError(msg)
            index.irregular = True
            index.problems.append(msg)

        for mount in mounts:
            t = mount.table
            tname = mount.label
            clusters = set(t.clusters())
            index.clusters.append(clusters)
            for c in sorted(clusters):
                other = cluster_owner.get(c)
                if other is not None and other is not mount:
                    problem(f"tables {other.label} and {tname} both use cluster {c}")
                    continue
                cluster_owner[c] = mount
            declared = set(t.indoms())
            index.declared.append(declared)
            for ind in t.indoms():
                ind.domain = domain
                prepare(ind)
                prev = by_indom.get(ind.id)
                if prev is not None and prev[1] is not ind:
                    problem(f"tables {prev[0].name} and {tname} both use indom serial {ind.serial}")
                    continue
                if prev is not None and prev[0] is not mount:
                    index.irregular = True  # one indom object declared by two tables
                by_indom[ind.id] = (mount, ind)
            metrics = t.metrics()
            members = set(metrics)
            index.members.append(members)
            counts: dict[int, int] = {}
            index.counts.append(counts)
            skipped: set[Metric] = set()
            index.skipped.append(skipped)
            if len(members) != len(metrics):
                index.irregular = True  # a metric listed twice (its PMID is then declared twice)
            for m in metrics:
                if cluster_owner.get(m.cluster) is not mount:
                    skipped.add(m)
                    continue
                p = m.pmid(domain)
                if p in by_pmid:
                    problem(f"{tname}: PMID {pmid_str(p)} declared twice ({m.name})")
                    continue
                if m.indom is not None:
                    if m.indom.id not in by_indom:
                        m.indom.domain = domain
                        prepare(m.indom)
                        by_indom[m.indom.id] = (mount, m.indom)
                    elif by_indom[m.indom.id][1] is not m.indom or by_indom[m.indom.id][0] is not mount:
                        index.irregular = True  # another object of that id, or another table's indom
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
                counts[m.cluster] = counts.get(m.cluster, 0) + 1
                if m.indom is not None:
                    refs[m.indom] = refs.get(m.indom, 0) + 1
        index.generations = [m.table.generation for m in mounts]
        return index

    def update(
        self, k: int, mounts: Sequence[Mount], domain: int, prepare: Callable[[InDom], None]
    ) -> tuple[set[int], bool] | None:
        """Apply the changes of mount ``k``'s table since it was indexed:
        the PMIDs whose entries came or went and whether the set of names
        changed (not just the objects behind them), or None when only a rebuild
        gives what :meth:`build` would (the index is then half updated:
        rebuild it).  The cost is one C-level set difference over the
        table's metrics and, per name that came or went, a few dict and
        tree operations."""
        names_gone: set[str] = set()
        names_came: set[str] = set()
        self.partial = (names_gone, names_came)  # what an update that gives up did already
        if self.irregular:
            return None
        mount = mounts[k]
        t = mount.table
        metrics = t.metrics()
        now = set(metrics)
        if len(now) != len(metrics):
            return None
        before = self.members[k]
        gone = before - now
        came = now - before
        clusters = set(t.clusters())
        gained, lost = clusters - self.clusters[k], self.clusters[k] - clusters
        for c in gained:
            if self.cluster_owner.get(c, mount) is not mount:
                return None  # a collision: the rebuild logs it
        counts = self.counts[k]
        skipped = self.skipped[k]
        if gone and skipped:
            skipped -= gone
        if gained and any(m.cluster in gained for m in skipped):
            return None  # listed metrics whose cluster the table now claims
        declared = set(t.indoms())
        new_inds, old_inds = declared - self.declared[k], self.declared[k] - declared
        changed: set[int] = set()
        by_pmid, by_name, by_indom, refs = self.by_pmid, self.by_name, self.by_indom, self.indom_refs
        # what went: names, then indoms nothing names any more
        for m in gone:
            p = m.pmid(domain)
            entry = by_pmid.get(p)
            if entry is None or entry[1] is not m:
                continue  # was not indexed (another table's cluster)
            full = mount.full(m)
            del by_pmid[p]
            del by_name[full]
            self.pmns.remove(full)
            names_gone.add(full)
            left = counts[m.cluster] - 1
            if left:
                counts[m.cluster] = left
            else:
                del counts[m.cluster]
            changed.add(p)
            if m.indom is not None:
                left = refs[m.indom] - 1
                if left:
                    refs[m.indom] = left
                else:
                    del refs[m.indom]
                    if not any(m.indom in d for d in self.declared):
                        del by_indom[m.indom.id]
        for ind in old_inds:
            if refs.get(ind) or sum(ind in d for d in self.declared) > 1:
                return None  # still named by metrics, or by another table: its entry may change hands
            found = by_indom.get(ind.id)
            if found is not None and found[1] is ind:
                del by_indom[ind.id]
        self.declared[k] = declared
        for c in lost:
            if c in counts:
                return None  # indexed metrics stay while their cluster goes
            del self.cluster_owner[c]
        for c in gained:
            self.cluster_owner[c] = mount
        self.clusters[k] = clusters
        for ind in new_inds:
            ind.domain = domain
            if ind.id in by_indom:
                return None  # its entry may change hands
            prepare(ind)
            by_indom[ind.id] = (mount, ind)
        # what came, in the table's order
        if came:
            for m in filter(came.__contains__, metrics):
                if self.cluster_owner.get(m.cluster) is not mount:
                    skipped.add(m)
                    continue
                p = m.pmid(domain)
                full = mount.full(m)
                if p in by_pmid or full in by_name:
                    return None  # a collision: the rebuild logs it
                if m.indom is not None:
                    found = by_indom.get(m.indom.id)
                    if found is None:
                        m.indom.domain = domain
                        prepare(m.indom)
                        by_indom[m.indom.id] = (mount, m.indom)
                    elif found[1] is not m.indom or found[0] is not mount:
                        return None
                try:
                    self.pmns.add(full, p)
                except ValueError:
                    return None
                by_pmid[p] = (mount, m)
                by_name[full] = p
                names_came.add(full)
                counts[m.cluster] = counts.get(m.cluster, 0) + 1
                if m.indom is not None:
                    refs[m.indom] = refs.get(m.indom, 0) + 1
                changed.add(p)
        self.members[k] = now
        self.generations[k] = t.generation
        return changed, names_gone != names_came
