"""The dbpmda statements a PMDA answers (pmda.c ``dopmda``): each sends its
request through the session's :class:`~pmda_py.testing.dbpmda.link.PmdaLink`
and prints the reply as dbpmda does."""

from __future__ import annotations

import os

import attrs

from pmda_py.errors import errstr
from pmda_py.namespace import Namespace
from pmda_py.pmapi import PM_IN_NULL, PM_INDOM_NULL, PmDesc, PmType, TextType, indom_str, pmid_cluster, pmid_domain
from pmda_py.testing.dbpmda.cvalues import c_strtod, c_strtol, c_strtoul, to_int, to_uint
from pmda_py.testing.dbpmda.format import ATTR_NAMES, TYPE_STR, desc_lines, pmid_str, print_value, time_of
from pmda_py.testing.dbpmda.link import PmdaLink
from pmda_py.testing.dbpmda.parser import Stmt
from pmda_py.testing.dbpmda.transcript import Transcript, reply_error_text, unexpected_reply
from pmda_py.wire import (
    AttrPdu,
    DescPdu,
    DescReqPdu,
    ErrorPdu,
    FetchPdu,
    InstancePdu,
    InstanceReqPdu,
    LabelPdu,
    LabelReqPdu,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    PmValue,
    ResultPdu,
    TextPdu,
    TextReqPdu,
    ValFmt,
    ValueBlock,
    ValueSet,
)

__all__ = ["PmdaRequests", "Settings", "parse_store_value"]


def parse_store_value(text: str, type_: int) -> int | float | str:
    """pmda.c ``fillValues``: the value of ``store`` for a metric of type
    ``type_`` (the casts included), or the line dbpmda prints instead."""
    tname = TYPE_STR.get(type_, str(type_))
    value: int | float | str
    if type_ in (PmType.I32, PmType.I64):
        value, used, erange = c_strtol(text)
        if type_ == PmType.I32:
            value = to_int(value)
    elif type_ in (PmType.U32, PmType.U64):
        value, used, erange = c_strtoul(text)
        if type_ == PmType.U32:
            value = to_uint(value)
    elif type_ in (PmType.FLOAT, PmType.DOUBLE):
        value, used, erange = c_strtod(text, single=type_ == PmType.FLOAT)
    elif type_ == PmType.STRING:
        return text
    else:
        return f"Error: dbpmda does not support storing into {tname} metrics"
    if erange:
        return f"Error: Decoding value: {os.strerror(34)}"
    if used != len(text):
        return f'Error: Value "{text}" is incompatible with metric type (PM_TYPE_{tname})'
    return value


@attrs.define
class Settings:
    """What the session's statements set and the requests read."""

    pmns: Namespace | None
    getdesc: bool = False
    getiname: bool = False


class PmdaRequests:
    """The statements sent to the open PMDA; each takes the parsed statement."""

    def __init__(self, link: PmdaLink, out: Transcript, settings: Settings) -> None:
        self.link, self.out, self.settings = link, out, settings
        #: the last statement ended in an error (dbpmda then prints no
        #: ``Timer:`` line for it)
        self.failed = False

    def _fail(self, line: str) -> None:
        """An error line; the statement failed."""
        self.out.p(line)
        self.failed = True

    async def _desc(self, p: int, show: bool) -> PmDesc | None:
        reply = await self.link.request(DescReqPdu(p))
        if isinstance(reply, DescPdu):
            if show:
                for ln in desc_lines(reply.desc):
                    self.out.p(ln)
            return reply.desc
        self._fail(unexpected_reply(reply, show_type=True))
        return None

    async def desc(self, stmt: Stmt) -> None:
        self.out.p(f"PMID: {pmid_str(stmt.pmid)}")
        await self._desc(stmt.pmid, True)

    async def fetch(self, stmt: Stmt) -> None:
        pmids = stmt.pmids
        self.out.p("PMID(s):" + "".join(f" {pmid_str(p)}" for p in pmids))
        descs: list[PmDesc] | None = None
        if self.settings.getdesc or self.settings.getiname:
            descs = []
            for p in pmids:
                d = await self._desc(p, False)
                if d is None:
                    return
                descs.append(d)
        if not await self.link.send_profile_if_changed():
            self.failed = True
            return
        reply = await self.link.request(FetchPdu(tuple(pmids)))
        if isinstance(reply, ResultPdu):
            await self._print_result(reply, descs)
        else:
            self._fail(unexpected_reply(reply, show_type=True))

    async def _print_result(self, res: ResultPdu, descs: list[PmDesc] | None) -> None:
        """libpcp's ``__pmDumpResult``."""
        stamp = f"{res.sec}.{res.usec * 1000:09d} {time_of(res.sec)}.{res.usec * 1000:09d}"
        self.out.p(f"__pmResult dump from 0x0 timestamp: {stamp} numpmid: {len(res.vsets)}")
        pmns = self.settings.pmns
        for k, vs in enumerate(res.vsets):
            # libpcp's hash chains list the most recently defined name first
            names = list(reversed(pmns.names(vs.pmid))) if pmns is not None else []
            sep = " or " if descs is not None else ", "
            head = f"  {pmid_str(vs.pmid)} ({sep.join(names) if names else '<noname>'}):"
            if vs.numval == 0:
                self.out.p(head + " No values returned!")
                continue
            if vs.numval < 0:
                self.out.p(head + f" {errstr(vs.numval)}")
                continue
            self.out.p(head + f" numval: {vs.numval} valfmt: {vs.valfmt} vlist[]:")
            for v in vs.values:
                self.out.p(await self._value_line(vs, v, descs[k] if descs is not None else None))

    async def _value_line(self, vs: ValueSet, v: PmValue, desc: PmDesc | None) -> str:
        if desc is not None:
            show_inst = vs.numval > 1 or desc.indom != PM_INDOM_NULL
        else:
            show_inst = vs.numval > 1 or (v.inst & 0xFFFFFFFF) != PM_INDOM_NULL
        if show_inst:
            name = "???"
            failed = ""
            if desc is not None and self.settings.getiname:
                reply = await self.link.request(InstanceReqPdu(desc.indom, v.inst))
                if isinstance(reply, InstancePdu) and reply.instances:
                    name = f'"{reply.instances[0].name}"'
                else:
                    # dbpmda has printed "    inst [N" when the lookup fails: its
                    # message lands inside the line, which goes on after it
                    failed = reply_error_text(reply) or ""
                    failed += "\n" if failed else ""
            prefix = f"    inst [{v.inst}{failed} or {name}] "
        else:
            prefix = "   "
        if desc is not None:
            text = print_value(vs.valfmt, desc.type, v.value)
        elif vs.valfmt == ValFmt.INSITU:
            text = print_value(vs.valfmt, PmType.UNKNOWN, v.value)
        else:
            blk = v.value
            text = print_value(vs.valfmt, blk.vtype if isinstance(blk, ValueBlock) else PmType.UNKNOWN, blk)
        return f"{prefix}value {text}"

    async def instance(self, stmt: Stmt) -> None:
        self.out.p(f"pmInDom: {indom_str(stmt.indom)}")
        inst = stmt.number if stmt.name is None else PM_IN_NULL
        reply = await self.link.request(InstanceReqPdu(stmt.indom, inst, stmt.name))
        if not isinstance(reply, InstancePdu):
            self._fail(unexpected_reply(reply))
            return
        if not reply.instances:
            self.out.p("Instance domain is empty")
        has_insts = any(e.inst != PM_IN_NULL for e in reply.instances)
        has_names = any(e.name for e in reply.instances) or len(reply.instances) != 1
        for k, e in enumerate(reply.instances):
            line = f"[{k:3d}]"
            if has_insts:
                line += f" inst: {e.inst}"
            if has_names:
                line += f' name: "{e.name}"'
            self.out.p(line)

    async def text(self, stmt: Stmt) -> None:
        if stmt.number == 2:
            ident = stmt.indom
            self.out.p(f"pmInDom: {indom_str(ident)}")
            kind = TextType.INDOM
        else:
            ident = stmt.pmid
            self.out.p(f"PMID: {pmid_str(ident)}")
            kind = TextType.PMID
        for which in (TextType.ONELINE, TextType.HELP):
            reply = await self.link.request(TextReqPdu(ident, kind | which))
            self.failed = False  # the help text's answer decides
            if not isinstance(reply, TextPdu):
                self._fail(unexpected_reply(reply))
            elif which == TextType.ONELINE:
                self.out.p(f"[{reply.text}]" if reply.text else "[<no one line help text specified>]")
            else:
                self.out.p(reply.text if reply.text else "<no help text specified>")

    async def store(self, stmt: Stmt) -> None:
        p, value = stmt.pmid, str(stmt.name)
        self.out.p(f"PMID: {pmid_str(p)}")
        self.out.p("Getting description...")
        desc = await self._desc(p, False)
        if desc is None:
            return
        if self.link.profile_changed:
            self.out.p("Sending Profile...")
            if not await self.link.send_profile_if_changed():
                self.failed = True
                return
        self.out.p("Getting Result Structure...")
        reply = await self.link.request(FetchPdu((desc.pmid,)))
        if not isinstance(reply, ResultPdu):
            self._fail(unexpected_reply(reply))
            return
        vs = reply.vsets[0]
        new = parse_store_value(value, desc.type)
        if isinstance(new, str) and new.startswith("Error: ") and desc.type != PmType.STRING:
            self._fail(new)
            return
        if vs.numval == 0:
            self._fail(f"Error: {pmid_str(p)} not available!")
            return
        if vs.numval < 0:
            self._fail(f"Error: {pmid_str(p)}: {errstr(vs.numval)}")
            return
        stored = ValueSet.of(vs.pmid, desc.type, [(v.inst, new) for v in vs.values])
        for k, (old, nv) in enumerate(zip(vs.values, stored.values)):
            head = f"{pmid_str(p)} [{k}]: " if vs.numval > 1 else f"{pmid_str(p)}: "
            self.out.p(
                head
                + print_value(vs.valfmt, desc.type, old.value)
                + " -> "
                + print_value(stored.valfmt, desc.type, nv.value)
            )
        self.out.p("Sending Result...")
        ack = await self.link.request(ResultPdu((stored,), reply.sec, reply.usec))
        if isinstance(ack, ErrorPdu):
            if ack.code < 0:
                self._fail(f"Error PDU: {errstr(ack.code)}")
        else:
            self._fail(unexpected_reply(ack))

    async def label(self, stmt: Stmt) -> None:
        type_, ident = stmt.number, PM_IN_NULL & 0xFFFFFFFF
        if type_ == 4:
            ident = stmt.indom
            self.out.p(f"pmInDom: {indom_str(ident)}")
        elif type_ == 8:
            ident = stmt.pmid
            self.out.p(f"Cluster: {pmid_domain(ident)}.{pmid_cluster(ident)}")
        elif type_ == 16:
            ident = stmt.pmid
            self.out.p(f"PMID: {pmid_str(ident)}")
        elif type_ == 32:
            ident = stmt.indom
            self.out.p(f"Instances of pmInDom: {indom_str(ident)}")
            if not await self.link.send_profile_if_changed():
                self.failed = True
                return
        reply = await self.link.request(LabelReqPdu(ident, type_))
        if not isinstance(reply, LabelPdu):
            self._fail(unexpected_reply(reply))
            return
        for k, s in enumerate(reply.sets):
            self.out.p(f"[{k:3d}] Labels inst: {s.inst}" if s.inst != PM_IN_NULL else "Labels:")
            for lb in s.labels:
                name = s.json[lb.name : lb.name + lb.namelen].decode("utf-8", "replace")
                val = s.json[lb.value : lb.value + lb.valuelen].decode("utf-8", "replace")
                self.out.p(f"    {name}={val}")
        if not reply.sets:
            self.out.p("Info: __pmDecodeLabel() returns 0 label sets")

    async def pmid(self, stmt: Stmt) -> None:
        name = str(stmt.name)
        self.out.p(f"Metric: {name}")
        reply = await self.link.request(PmnsNamesPdu((name,)))
        if isinstance(reply, PmnsIdsPdu):
            self.out.p(f"   {pmid_str(reply.pmids[0])}" if reply.pmids else "   ")
        else:
            self._fail(unexpected_reply(reply))

    async def name(self, stmt: Stmt) -> None:
        self.out.p(f"PMID: {pmid_str(stmt.pmid)}")
        reply = await self.link.request(PmnsIdsPdu((stmt.pmid,), 0))
        if isinstance(reply, PmnsNamesPdu):
            for n in reply.names:
                self.out.p(f"   {n}")
        else:
            self._fail(unexpected_reply(reply))

    async def children(self, stmt: Stmt) -> None:
        self.out.p(f"Metric: {stmt.name}")
        reply = await self.link.request(PmnsChildPdu(str(stmt.name), 1))
        if isinstance(reply, PmnsNamesPdu):
            statuses = reply.statuses or (0,) * len(reply.names)
            for n, st in zip(reply.names, statuses):
                self.out.p(f"   {'non-leaf' if st == 1 else 'leaf':>8.8} {n}")
        else:
            self._fail(unexpected_reply(reply))

    async def traverse(self, stmt: Stmt) -> None:
        self.out.p(f"Metric: {stmt.name}")
        reply = await self.link.request(PmnsTraversePdu(str(stmt.name), 0))
        if isinstance(reply, PmnsNamesPdu):
            for n in reply.names:
                self.out.p(f"   {n}")
        else:
            self._fail(unexpected_reply(reply))

    async def attr(self, stmt: Stmt) -> None:
        value = stmt.name
        self.out.p(f"Attribute: {ATTR_NAMES[stmt.number]}={value if value is not None else chr(39) * 2}")
        raw = (value.encode() + b"\0") if value is not None else b""
        if await self.link.send(AttrPdu(stmt.number, raw, 0)):
            self.out.p("Success")
        else:
            self._fail("Error: __pmSendAuth() failed: Broken pipe")
