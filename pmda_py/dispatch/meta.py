"""The replies to the requests about metadata -- DESC, INSTANCE, TEXT,
LABEL and the dynamic-namespace PDUs -- built from the dispatcher's mount
index, and which of them the reply cache (:mod:`.replies`) may keep.
Sans-IO, no trio."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs
import structlog

from pmda_py.dispatch.mounts import Mount, MountIndex
from pmda_py.dispatch.problems import ProblemLog
from pmda_py.errors import PmErr
from pmda_py.namespace import Node
from pmda_py.pmapi import PM_IN_NULL, LabelType, TextType, pmid_cluster, pmid_domain
from pmda_py.session import Request
from pmda_py.table import InDom, LabelText, Table
from pmda_py.wire import (
    DescPdu,
    DescReqPdu,
    EncodedPdu,
    ErrorPdu,
    InstanceEntry,
    InstancePdu,
    InstanceReqPdu,
    Label,
    LabelPdu,
    LabelReqPdu,
    LabelSet,
    Pdu,
    PduType,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    TextPdu,
    TextReqPdu,
)

if TYPE_CHECKING:
    from pmda_py.dispatch.dispatcher import Dispatcher

__all__ = ["MetaRequests", "label_set"]

log = structlog.get_logger("pmda_py.dispatch")

_LITTLE = sys.byteorder == "little"


class MetaRequests:
    """The metadata requests of one dispatcher."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        #: tables that compute their labels (label_items): their LABEL replies are never remembered
        self._computed_labels = {
            id(m.table) for m in dispatcher.mounts if type(m.table).label_items is not Table.label_items
        }

    @property
    def index(self) -> MountIndex:
        return self.dispatcher.index

    def _labels_computed(self, pdu: LabelReqPdu) -> bool:
        """Whether a table's label_items took part in the reply to ``pdu``."""
        if not self._computed_labels:
            return False
        t = pdu.type & 0x3F
        if t == LabelType.ITEM:
            found = self.index.by_pmid.get(pdu.ident)
            return found is not None and id(found[0].table) in self._computed_labels
        if t == LabelType.INDOM:
            found_i = self.index.by_indom.get(pdu.ident)
            return found_i is not None and id(found_i[0].table) in self._computed_labels
        # CLUSTER: any table owning the cluster may be asked (not worth the search)
        return bool(t == LabelType.CLUSTER)

    def remember(self, event: Request, reply: Pdu) -> Pdu:
        """Keep ``reply``'s bytes for ``event``'s request bytes when they are
        fixed until the index changes: DESC and TEXT always (frozen metrics,
        help file, indom texts), LABEL unless of instances (the profile
        picks them) or computed by a table (label_items), INSTANCE of an
        indom with no refresh hook and no repeated ids, while its
        ``instances`` map is the same (InDom's ``version`` and size).
        Returns the reply to send: its bytes, once encoded here."""
        pdu = event.pdu
        assert event.key is not None
        if isinstance(reply, ErrorPdu) and (reply.code != PmErr.TEXT or pdu.pdu_type != PduType.TEXT_REQ):
            return reply
        indom: InDom | None = None
        if isinstance(pdu, LabelReqPdu):
            if pdu.type & 0x3F == LabelType.INSTANCES or self._labels_computed(pdu):
                return reply
        elif isinstance(pdu, InstanceReqPdu):
            found = self.index.by_indom.get(pdu.indom)
            if found is None:
                return reply
            mount, indom = found
            if indom.listing is not None or type(mount.table).refresh_instances is not Table.refresh_instances:
                return reply
        if isinstance(reply, EncodedPdu):
            data = bytes(reply.data)  # the same object when it is bytes already
        else:
            data = reply.encode() if reply.from_ == 0 else attrs.evolve(reply, from_=0).encode()
        self.dispatcher.replies.put(pdu.pdu_type, event.key, data, indom)
        # an ERROR stays an ErrorPdu for the session; anything else goes out as these bytes
        return reply if isinstance(reply, ErrorPdu) else EncodedPdu(reply.pdu_type, data)

    async def label(self, event: Request, pdu: LabelReqPdu) -> Pdu:
        return _label_fits(await self._label_reply(event, pdu), self.dispatcher.problems)

    # ---------------------------------------------------------------- DESC

    async def desc(self, event: Request, pdu: DescReqPdu) -> Pdu:
        found = self.index.by_pmid.get(pdu.pmid)
        if found is None:
            return ErrorPdu(PmErr.PMID)
        return DescPdu(found[1].desc(self.dispatcher.domain))

    # ------------------------------------------------------------ INSTANCE

    async def _refreshed(self, ident: int) -> tuple[Mount, InDom] | int:
        """The mount and indom ``ident`` after the table's refresh, or the
        error code to answer."""
        found = self.index.by_indom.get(ident)
        if found is None:
            return PmErr.INDOM
        code = await self._refresh_indom(*found)
        return code if code else found

    async def instance(self, event: Request, pdu: InstanceReqPdu) -> Pdu:
        found = await self._refreshed(pdu.indom)
        if isinstance(found, int):
            return ErrorPdu(found)
        ind = found[1]
        if pdu.name is not None:
            return InstancePdu(pdu.indom, (InstanceEntry(ind.id_of(pdu.name), ""),))
        if pdu.inst != PM_IN_NULL:
            return InstancePdu(pdu.indom, (InstanceEntry(PM_IN_NULL, ind.name_of(pdu.inst)),))
        if ind.listing is not None:  # repeated ids: listed as the table lists them, not cached
            return InstancePdu(pdu.indom, tuple(InstanceEntry(i, n) for i, n in ind.listing))
        data = self.dispatcher.replies.listing(ind)
        if data is None:
            data = InstancePdu(pdu.indom, tuple(InstanceEntry(i, n) for i, n in ind.instances.items())).encode()
            self.dispatcher.replies.put_listing(ind, data)
        return EncodedPdu(PduType.INSTANCE, data)

    async def _refresh_indom(self, mount: Mount, ind: InDom) -> int:
        if getattr(mount.table.refresh_instances, "__func__", None) is Table.refresh_instances:
            return 0  # the base class's no-op: no table call, no deadline to arm
        try:
            await self.dispatcher.runner.call(mount.table, "instances", lambda: mount.table.refresh_instances(ind))
        except Exception as exc:
            return self.dispatcher.table_failed(mount.label, "instances", exc)
        return 0

    # ---------------------------------------------------------------- TEXT

    async def text(self, event: Request, pdu: TextReqPdu) -> Pdu:
        text: str | int | None = None
        oneline = bool(pdu.type & TextType.ONELINE)
        if pdu.type & TextType.INDOM:
            found_i = self.index.by_indom.get(pdu.ident)
            if found_i is not None:
                text = found_i[1].oneline if oneline else found_i[1].help
        elif pdu.type & TextType.PMID:
            found_m = self.index.by_pmid.get(pdu.ident)
            if found_m is not None:
                text = found_m[1].oneline if oneline else found_m[1].help
        if text is None and self.dispatcher.help_source is not None:
            text = self.dispatcher.help_source.text(pdu.ident, pdu.type)
        if text is None:
            return ErrorPdu(PmErr.TEXT)
        if isinstance(text, int):  # a table's error for this text (pmdammv's PM_ERR_PMID, PM_ERR_INDOM)
            return ErrorPdu(text)
        # libpcp_pmda sends the ident in host order (the byte-order quirk).
        ident = TextPdu.swapped_ident(pdu.ident) if _LITTLE else pdu.ident
        return TextPdu(ident, text)

    # -------------------------------------------------------------- LABELS

    def domain_labels(self) -> dict[str, object]:
        """The domain level: ``{"agent": name}`` (what libpcp gives an agent
        that sets no domain labels) plus the configured ones (``[pmda]
        labels``; the compat modes' agent names).  Tables' own domain labels
        go to their clusters (:meth:`cluster_labels`), unless one table is
        all the agent has: then it stands for a libpcp agent that sets its
        domain labels (pmdasimple's ``role``), and gets no ``agent`` label."""
        extra = self.dispatcher.domain_labels_override or {}
        if len(self.dispatcher.mounts) == 1 and self.dispatcher.mounts[0].table.domain_labels:
            return {**self.dispatcher.mounts[0].table.domain_labels, **extra}
        return {"agent": self.dispatcher.name, **extra}

    def cluster_labels(self, table: Table, cluster: int) -> Mapping[str, object]:
        """A cluster's labels: its table's domain labels (several tables
        share the domain) and then the cluster's own."""
        own = table.cluster_labels.get(cluster, {})
        if len(self.dispatcher.mounts) == 1 or not table.domain_labels:
            return own
        return {**table.domain_labels, **own}

    async def _label_reply(self, event: Request, pdu: LabelReqPdu) -> Pdu:
        t = pdu.type & 0x3F
        if t == LabelType.INSTANCES:
            refreshed = await self._refreshed(pdu.ident)
            if isinstance(refreshed, int):
                return ErrorPdu(refreshed)
            mount, ind = refreshed
            profile = event.profile
            sets = []
            # a listing that repeats an id (MMV): one set per entry, as pmdammv sends
            for inst in ind.instances if ind.listing is None else [i for i, _ in ind.listing]:
                if not profile.includes(ind.id, inst):
                    continue
                inst_items = mount.table.label_items(LabelType.INSTANCES, (ind, inst))
                if isinstance(inst_items, LabelText):
                    sets.append(label_set(inst_items, inst))
                elif inst_items is not None:
                    sets.append(LabelSet.from_items(inst_items, inst))
                else:
                    sets.append(LabelSet.from_dict(dict(ind.labels_for(inst)), LabelType.INSTANCES, inst))
            return LabelPdu(pdu.ident, pdu.type, tuple(sets))
        labels: Mapping[str, object] = {}
        items: list[tuple[str, str, int]] | LabelText | None = None
        flag = t
        if t == LabelType.DOMAIN:
            labels = self.domain_labels()
        elif t == LabelType.INDOM:
            found_i = self.index.by_indom.get(pdu.ident)
            if found_i is None:
                return ErrorPdu(PmErr.INDOM)
            labels = found_i[1].labels
            items = found_i[0].table.label_items(LabelType.INDOM, found_i[1])
        elif t == LabelType.CLUSTER:
            if pmid_domain(pdu.ident) == self.dispatcher.domain:
                c = pmid_cluster(pdu.ident)
                for m in self.dispatcher.mounts:
                    if c in m.table.clusters():
                        items = m.table.label_items(LabelType.CLUSTER, c)
                        labels = self.cluster_labels(m.table, c)
                        break
                    if c in m.table.cluster_labels:
                        labels = m.table.cluster_labels[c]
                        break
        elif t == LabelType.ITEM:
            found_m = self.index.by_pmid.get(pdu.ident)
            if found_m is None:
                return ErrorPdu(PmErr.PMID)
            labels = found_m[1].labels
            items = found_m[0].table.label_items(LabelType.ITEM, found_m[1])
        if isinstance(items, LabelText):
            return LabelPdu(pdu.ident, pdu.type, (label_set(items),))
        if items is not None:
            if not items:
                return LabelPdu(pdu.ident, pdu.type, ())
            return LabelPdu(pdu.ident, pdu.type, (LabelSet.from_items(items),))
        if not labels:
            return LabelPdu(pdu.ident, pdu.type, ())
        return LabelPdu(pdu.ident, pdu.type, (LabelSet.from_dict(dict(labels), flag),))

    # ---------------------------------------------------------------- PMNS

    async def pmns_names(self, event: Request, pdu: PmnsNamesPdu) -> Pdu:
        if len(pdu.names) != 1:
            return ErrorPdu(PmErr.IPC)
        node = self.index.pmns.node(pdu.names[0])
        if node is None or node.pmid is None:
            return ErrorPdu(PmErr.NAME)
        return PmnsIdsPdu((node.pmid,), 0)

    async def pmns_ids(self, event: Request, pdu: PmnsIdsPdu) -> Pdu:
        if len(pdu.pmids) != 1:
            return ErrorPdu(PmErr.IPC)
        found = self.index.by_pmid.get(pdu.pmids[0])  # (one name per PMID: the index refuses a second)
        if found is None:
            return ErrorPdu(PmErr.PMID)
        return PmnsNamesPdu((found[0].full(found[1]),))

    async def children(self, event: Request, pdu: PmnsChildPdu) -> Pdu:
        node = self.index.pmns.node(pdu.name)
        if node is None or not pdu.name:
            return ErrorPdu(PmErr.NAME)
        # libpcp_pmda's tree lists the newest child first
        kids = list(reversed(node.children.items()))
        names = tuple(k for k, _ in kids)
        if pdu.subtype:
            return PmnsNamesPdu(names, tuple(0 if c.is_leaf else 1 for _, c in kids))
        return PmnsNamesPdu(names)

    async def traverse(self, event: Request, pdu: PmnsTraversePdu) -> Pdu:
        node = self.index.pmns.node(pdu.name)
        if node is None or not pdu.name:
            return ErrorPdu(PmErr.NAME)
        out: list[str] = []
        _walk(node, pdu.name, out)
        return PmnsNamesPdu(tuple(out))


def _walk(node: Node, prefix: str, out: list[str]) -> None:
    """Leaves at and below ``node``, newest child first (libpcp_pmda's order)."""
    if node.is_leaf:
        out.append(prefix)
        return
    for name, child in reversed(node.children.items()):
        _walk(child, f"{prefix}.{name}", out)


def label_set(text: LabelText, inst: int = PM_IN_NULL) -> LabelSet:
    """The label set a table's :class:`LabelText` (JSON and its index) makes."""
    return LabelSet(inst, text.json, tuple(Label(*e) for e in text.index))


def _label_fits(reply: Pdu, problems: ProblemLog) -> Pdu:
    """PCP's decoders (p_label.c) refuse a set of 255 labels or more, of
    64 KiB of JSON, or whose index points outside its JSON, with PM_ERR_IPC,
    and pmcd 6.3+ then drops the agent: such a reply becomes PM_ERR_TOOBIG
    (pmdammv sends it, and is dropped)."""
    if isinstance(reply, LabelPdu):
        for s in reply.sets:
            if len(s.labels) >= 255 or len(s.json) >= 65535:
                problems.warning(  # (each such set once an hour: a client may ask at every fetch)
                    "(labels)",
                    "label_set_too_big",
                    ident=reply.ident,
                    type=reply.type,
                    labels=len(s.labels),
                    json_bytes=len(s.json),
                    limit="254 labels, 65534 bytes",
                )
                return ErrorPdu(PmErr.TOOBIG)
            for lb in s.labels:
                # p_label.c (6.3+): name and value must lie inside the set's JSON
                if lb.name + lb.namelen > len(s.json) or lb.value + lb.valuelen > len(s.json):
                    problems.warning(
                        "(labels)",
                        "label_set_refused",
                        ident=reply.ident,
                        type=reply.type,
                        inst=s.inst,
                        reason="a label's name or value lies outside the set's JSON text (PCP's decoders refuse it)",
                    )
                    return ErrorPdu(PmErr.TOOBIG)
    return reply
