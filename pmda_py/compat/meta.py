"""The metadata requests a compat script's PMDA answers as the binding does
where pmda_py's own tables answer otherwise: about ids the script does not
have, and its label callbacks.

libpcp_pmda (under the binding) looks an instance domain up only among the
indoms the script added, and asks the script's callbacks about any ident:

* INSTANCE: the ``instance`` callback runs for the indom's serial first,
  then an indom not added (unknown, or only named by a metric) is
  PM_ERR_INDOM;
* LABEL of an indom, a cluster or a PMID: ``label(ident, type)`` and
  ``notes(ident, type)`` whether the PMDA has that ident or not (a cluster
  is its number alone); no callbacks, or empty sets: no label sets;
* LABEL of the instances: ``label(indom, PM_LABEL_INSTANCES)`` and
  ``notes`` first (their labels dropped, their error the answer), then
  ``label_callback``/``notes_callback`` per instance of an added indom (no
  ``instance`` callback); an indom not added has no instances, so no sets;
* LABEL of the domain: ``label`` asked once per request, about the
  request's ident (pmcd sends the domain number, dbpmda PM_ID_NULL).

No LABEL reply is remembered: every one comes from the script's callbacks,
run in the worker thread under the deadline (one that overruns it answers
PM_ERR_AGAIN, as a FETCH's do).
"""

from __future__ import annotations

from pmda_py.compat.table import CompatTable
from pmda_py.dispatch import Dispatcher
from pmda_py.dispatch.meta import MetaRequests, label_set
from pmda_py.errors import PmErr
from pmda_py.pmapi import LabelType, indom_serial, pmid_cluster, signed
from pmda_py.session import Request
from pmda_py.table import InDom
from pmda_py.wire import ErrorPdu, InstanceReqPdu, LabelPdu, LabelReqPdu, LabelSet, Pdu

__all__ = ["CompatDispatcher", "CompatMetaRequests"]

#: the levels whose labels come from ``label(ident, type)`` for any ident
_IDENT_LEVELS = (LabelType.INDOM, LabelType.CLUSTER, LabelType.ITEM)
#: the levels whose labels come from the script's callbacks
_CALLBACK_LEVELS = (*_IDENT_LEVELS, LabelType.DOMAIN, LabelType.INSTANCES)


class CompatMetaRequests(MetaRequests):
    """The metadata requests of a dispatcher whose one table is a
    :class:`CompatTable`."""

    @property
    def table(self) -> CompatTable:
        table = self.dispatcher.mounts[0].table
        assert isinstance(table, CompatTable)
        return table

    def remember(self, event: Request, reply: Pdu) -> Pdu:
        if isinstance(event.pdu, LabelReqPdu):
            return reply
        return super().remember(event, reply)

    async def instance(self, event: Request, pdu: InstanceReqPdu) -> Pdu:
        if self.table.added(pdu.indom):
            return await super().instance(event, pdu)
        mount = self.dispatcher.mounts[0]
        serial = indom_serial(pdu.indom)
        try:
            await self.dispatcher.runner.call(mount.table, "instances", lambda: self.table.call_instance(serial))
        except Exception as exc:
            return ErrorPdu(self.dispatcher.table_failed(mount.label, "instances", exc))
        return ErrorPdu(PmErr.INDOM)

    async def _label_reply(self, event: Request, pdu: LabelReqPdu) -> Pdu:
        level = pdu.type & 0x3F
        if level not in _CALLBACK_LEVELS:
            return await super()._label_reply(event, pdu)
        table = self.table
        insts: list[tuple[InDom, int]] = []
        if level == LabelType.INSTANCES:
            found_i = self.index.by_indom.get(pdu.ident)
            if found_i is not None and table.added(pdu.ident):
                table.sync_instances()
                ind = found_i[1]
                for inst in ind.instances if ind.listing is None else [i for i, _ in ind.listing]:
                    if event.profile.includes(ind.id, inst):
                        insts.append((ind, inst))
        # the script's callbacks in the worker thread, under the deadline
        mount = self.dispatcher.mounts[0]
        try:
            return await self.dispatcher.runner.call(
                mount.table, "labels", lambda: table.in_worker(self._labels, pdu, insts)
            )
        except Exception as exc:
            return ErrorPdu(self.dispatcher.table_failed(mount.label, "labels", exc))

    def _labels(self, pdu: LabelReqPdu, insts: list[tuple[InDom, int]]) -> Pdu:
        """The reply from the script's label callbacks (in the worker
        thread, the callback lock held); ``insts``: the instances whose
        labels a LABEL of the instances asks for."""
        level = pdu.type & 0x3F
        table = self.table
        if level in _IDENT_LEVELS:
            # (the binding passes a C int: a cluster its number alone)
            ident = pmid_cluster(pdu.ident) if level == LabelType.CLUSTER else signed(pdu.ident, 32)
            found = table.level_labels(ident, level)
            return LabelPdu(pdu.ident, pdu.type, () if found is None else (label_set(found),))
        if level == LabelType.DOMAIN:
            labels = table.domain_labels_of(signed(pdu.ident, 32))
            extra = self.dispatcher.domain_labels_override or {}
            merged = {**labels, **extra} if labels else {"agent": self.dispatcher.name, **extra}
            return LabelPdu(pdu.ident, pdu.type, (LabelSet.from_dict(merged, LabelType.DOMAIN),))
        table.level_labels(
            signed(pdu.ident, 32), LabelType.INSTANCES
        )  # asked, as the binding asks; only its error counts
        sets = [label_set(table.instance_labels(ind, inst), inst) for ind, inst in insts]
        return LabelPdu(pdu.ident, pdu.type, tuple(sets))


class CompatDispatcher(Dispatcher):
    """A dispatcher of one :class:`CompatTable`, answering metadata
    requests as the binding does."""

    meta_requests = CompatMetaRequests
