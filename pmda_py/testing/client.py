"""The pmcd side of a PMDA channel: an async client that drives any PMDA.

This is what pmcd and dbpmda do to an agent, as a library: start a PMDA
command over a pipe (its stdin/stdout) or connect to one listening on a
unix, inet or ipv6 socket, answer its CREDS, then send requests and read
replies one at a time.  Every method returns decoded objects from
:mod:`pmda_py.wire`, or raises :class:`PmdaReplyError` carrying the PCP code
of an ERROR reply.

Example::

    async with open_pipe_pmda(["pmda-py", "run", "--table", "simple"]) as pmda:
        result = await pmda.fetch([pmid(253, 0, 0)])

Never imported by production modules.
"""

from __future__ import annotations

import math
import os
import socket
import struct
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import IO, Any, TypeVar

import attrs
import trio

from pmda_py.errors import PmdaError, PmErr, WireFormatError, errstr
from pmda_py.pmapi import PM_IN_NULL, LabelType, PmDesc, PmType, TextType
from pmda_py.wire import (
    AttrPdu,
    CredsPdu,
    DescPdu,
    DescReqPdu,
    ErrorPdu,
    EventArray,
    FetchPdu,
    InstanceEntry,
    InstancePdu,
    InstanceReqPdu,
    LabelPdu,
    LabelReqPdu,
    Pdu,
    PduReader,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    ProfileEntry,
    ProfilePdu,
    ResultPdu,
    TextPdu,
    TextReqPdu,
    ValueBlock,
    ValueSet,
)

__all__ = [
    "PmdaClient",
    "PmdaReplyError",
    "UnexpectedReply",
    "connect_socket_pmda",
    "open_pipe_pmda",
    "open_socket_pmda",
]

_P = TypeVar("_P")


class PmdaReplyError(PmdaError):
    """The PMDA answered a request with an ERROR PDU."""

    def __init__(self, code: int, request: str = "") -> None:
        super().__init__(f"{request}: {errstr(code)}" if request else errstr(code), code=code)


class UnexpectedReply(WireFormatError):
    """The PMDA answered with a PDU of the wrong type (pmcd: PM_ERR_IPC)."""


@attrs.define(eq=False)
class PmdaClient:
    """Drives one PMDA over a connected stream, as pmcd would.

    Args:
        stream: the channel (pipe pair or socket).
        from_: the ``from`` field of requests (pmcd: client slot; dbpmda: 0).
        timeout: seconds to wait for each reply (pmcd's ``-t``); ``None``
            waits forever as dbpmda does.
    """

    stream: trio.abc.Stream
    from_: int = 0
    timeout: float | None = 10.0
    pid: int = 0
    reader: PduReader = attrs.field(factory=PduReader)
    creds: CredsPdu | None = None
    profile_sent: bool = False
    #: Unsolicited PDUs seen (e.g. PMDAREADY), in order.
    unsolicited: list[Pdu] = attrs.field(factory=list)
    sent: list[Pdu] = attrs.field(factory=list)
    received: list[Pdu] = attrs.field(factory=list)
    #: optional ``{name: pmid}`` map used by :meth:`lookup` before asking the PMDA
    pmns: dict[str, int] | None = None
    #: keep every PDU sent and received in :attr:`sent` / :attr:`received`
    record: bool = False

    # ------------------------------------------------------------------ io

    async def send(self, pdu: Pdu) -> None:
        """Send one PDU (for those that get no reply, or before :meth:`receive`)."""
        if self.record:
            self.sent.append(pdu)
        await self.stream.send_all(memoryview(pdu.encode()))

    async def send_raw(self, data: bytes) -> None:
        """Send raw bytes (malformed-input tests)."""
        await self.stream.send_all(data)

    async def receive(self, timeout: float | None = -1.0) -> Pdu:
        """Read the next PDU.

        Raises:
            trio.TooSlowError: nothing complete within the timeout.
            EOFError: the PMDA closed the channel.
        """
        t = self.timeout if timeout is not None and timeout < 0 else timeout
        with trio.fail_after(math.inf if t is None else t):
            while True:
                pdu = self.reader.next_pdu()
                if pdu is not None:
                    if self.record:
                        self.received.append(pdu)
                    return pdu
                data = await self.stream.receive_some(65536)
                if not data:
                    raise EOFError("PMDA closed the channel")
                self.reader.receive_data(data)

    async def request_raw(self, data: bytes) -> bytes:
        """Send encoded request bytes and return the reply frame undecoded
        (for benchmarks: the driver then costs the same for every PMDA)."""
        await self.stream.send_all(data)
        t = self.timeout
        with trio.fail_after(math.inf if t is None else t):
            while True:
                frame = self.reader.next_frame()
                if frame is not None:
                    return frame
                chunk = await self.stream.receive_some(1 << 20)
                if not chunk:
                    raise EOFError("PMDA closed the channel")
                self.reader.receive_data(chunk)

    async def request(self, pdu: Pdu, expect: type[_P]) -> _P:
        """Send ``pdu`` and return its reply of type ``expect``.

        Raises:
            PmdaReplyError: the reply was an ERROR PDU.
            UnexpectedReply: the reply was another type.
        """
        await self.send(pdu)
        reply = await self.receive()
        if isinstance(reply, expect):
            return reply
        if isinstance(reply, ErrorPdu):
            raise PmdaReplyError(reply.code, type(pdu).__name__)
        raise UnexpectedReply(f"{type(pdu).__name__}: got {type(reply).__name__}, wanted {expect.__name__}")

    # ------------------------------------------------------------ handshake

    async def handshake(self, flags: int | None = None) -> CredsPdu:
        """Read the PMDA's CREDS and reply as pmcd does (its flags & AUTH),
        or with ``flags`` if given (dbpmda replies 0)."""
        pdu = await self.receive(timeout=self.timeout if self.timeout is not None else 3.0)
        if not isinstance(pdu, CredsPdu):
            raise UnexpectedReply(f"expected CREDS from the PMDA, got {type(pdu).__name__}")
        self.creds = pdu
        reply_flags = (pdu.flags & 0x4) if flags is None else flags
        await self.send(CredsPdu.cversion(reply_flags, from_=os.getpid()))
        return pdu

    # ------------------------------------------------------------- requests

    async def profile(
        self, entries: Sequence[ProfileEntry] = (), g_state: int = 0, ctxid: int = 0, from_: int | None = None
    ) -> None:
        """Send a PROFILE (no reply)."""
        await self.send(ProfilePdu(ctxid, g_state, tuple(entries), self._from(from_)))
        self.profile_sent = True

    async def fetch(self, pmids: Sequence[int], ctxid: int = 0, from_: int | None = None) -> ResultPdu:
        """FETCH; sends the default profile first if none was sent yet."""
        if not self.profile_sent:
            await self.profile(from_=from_)
        return await self.request(FetchPdu(tuple(pmids), ctxid, self._from(from_)), ResultPdu)

    async def desc(self, pmid: int, from_: int | None = None) -> PmDesc:
        """DESC_REQ -> the descriptor."""
        return (await self.request(DescReqPdu(pmid, self._from(from_)), DescPdu)).desc

    async def instance(
        self, indom: int, inst: int = PM_IN_NULL, name: str | None = None, from_: int | None = None
    ) -> tuple[InstanceEntry, ...]:
        """INSTANCE_REQ: all instances, one by number, or one by name."""
        reply = await self.request(InstanceReqPdu(indom, inst, name, self._from(from_)), InstancePdu)
        return reply.instances

    async def text(self, ident: int, type_: int, from_: int | None = None) -> str:
        """TEXT_REQ -> the text (``type_`` is PM_TEXT_* bits)."""
        return (await self.request(TextReqPdu(ident, type_, self._from(from_)), TextPdu)).text

    async def oneline(self, pmid: int) -> str:
        return await self.text(pmid, TextType.ONELINE | TextType.PMID)

    async def helptext(self, pmid: int) -> str:
        return await self.text(pmid, TextType.HELP | TextType.PMID)

    async def store(self, vsets: Sequence[ValueSet], from_: int | None = None) -> int:
        """Send a store RESULT; returns the ERROR code of the reply (0 = ok)."""
        await self.send(ResultPdu(tuple(vsets), 0, 0, self._from(from_)))
        reply = await self.receive()
        if not isinstance(reply, ErrorPdu):
            raise UnexpectedReply(f"store: got {type(reply).__name__}, wanted ERROR")
        return reply.code

    async def pmid(self, name: str, from_: int | None = None) -> int:
        """PMNS_NAMES(name) -> PMID."""
        reply = await self.request(PmnsNamesPdu((name,), None, self._from(from_)), PmnsIdsPdu)
        if not reply.pmids:
            raise PmdaReplyError(PmErr.NAME, "PMNS_NAMES")
        return reply.pmids[0]

    async def names(self, pmid: int, from_: int | None = None) -> tuple[str, ...]:
        """PMNS_IDS(pmid) -> all names of that PMID."""
        reply = await self.request(PmnsIdsPdu((pmid,), 0, self._from(from_)), PmnsNamesPdu)
        return reply.names

    async def children(self, name: str, status: bool = False, from_: int | None = None) -> PmnsNamesPdu:
        """PMNS_CHILD: child components (with leaf status when ``status``)."""
        return await self.request(PmnsChildPdu(name, int(status), self._from(from_)), PmnsNamesPdu)

    async def traverse(self, name: str, from_: int | None = None) -> tuple[str, ...]:
        """PMNS_TRAVERSE: full names of every leaf at or below ``name``."""
        return (await self.request(PmnsTraversePdu(name, 0, self._from(from_)), PmnsNamesPdu)).names

    async def label(self, ident: int, type_: int, from_: int | None = None) -> LabelPdu:
        """LABEL_REQ for one level (PM_LABEL_*)."""
        return await self.request(LabelReqPdu(ident, type_, self._from(from_)), LabelPdu)

    async def labels_dict(self, ident: int, type_: LabelType) -> dict[str, str]:
        """Labels of a non-INSTANCES level as ``{name: json value text}``."""
        reply = await self.label(ident, type_)
        out: dict[str, str] = {}
        for s in reply.sets:
            out.update(s.as_dict())
        return out

    async def attr(self, attr: int, value: str | bytes, from_: int | None = None) -> None:
        """ATTR (no reply); strings are sent NUL-terminated as pmcd does."""
        raw = value.encode() + b"\0" if isinstance(value, str) else value
        await self.send(AttrPdu(attr, raw, self._from(from_)))

    async def end_context(self, from_: int | None = None) -> None:
        """ERROR(PM_ERR_NOTCONN): the client context ``from_`` closed (no reply)."""
        await self.send(ErrorPdu(PmErr.NOTCONN, None, self._from(from_)))

    async def aclose(self) -> None:
        """Close the channel."""
        await self.stream.aclose()

    # ------------------------------------------------------ by-name helpers

    async def lookup(self, names: Sequence[str]) -> dict[str, int]:
        """Resolve names to PMIDs: from :attr:`pmns` when set (a
        ``{name: pmid}`` map, e.g. from a PMNS file), else by asking the
        PMDA (PMNS_NAMES, its dynamic namespace)."""
        out: dict[str, int] = {}
        for n in names:
            if self.pmns is not None and n in self.pmns:
                out[n] = self.pmns[n]
            else:
                out[n] = await self.pmid(n)
        return out

    async def fetch_values(self, names: Sequence[str]) -> dict[str, Any]:
        """Fetch metrics by name and decode their values by descriptor.

        Returns ``{name: value}`` for metrics without an indom,
        ``{name: {inst: value}}`` for metrics with one, and
        ``{name: PmdaReplyError}`` for metrics that failed.
        """
        pmids = await self.lookup(names)
        descs = {n: await self.desc(p) for n, p in pmids.items()}
        result = await self.fetch(list(pmids.values()))
        out: dict[str, Any] = {}
        for (n, _p), vs in zip(pmids.items(), result.vsets):
            d = descs[n]
            if vs.error < 0:
                out[n] = PmdaReplyError(vs.error, n)
                continue
            vals = {v.inst: _decode_value(d.type, v.value) for v in vs.values}
            if d.indom == 0xFFFFFFFF:
                out[n] = vals.get(PM_IN_NULL) if vals else None
            else:
                out[n] = vals
        return out

    def _from(self, from_: int | None) -> int:
        return self.from_ if from_ is None else from_


def _decode_value(type_: int, value: int | ValueBlock) -> int | float | str | bytes | EventArray:
    if isinstance(value, ValueBlock):
        if value.vtype in (PmType.EVENT, PmType.HIGHRES_EVENT):
            return value.event_array()
        return value.value()
    if type_ == PmType.I32:
        return value - (1 << 32) if value & 0x80000000 else value
    if type_ == PmType.FLOAT:  # very old INSITU floats
        return float(struct.unpack("!f", struct.pack("!I", value))[0])
    return value


# ------------------------------------------------------------------ opening


@asynccontextmanager
async def _connected(client: PmdaClient, handshake: bool, creds_flags: int | None) -> AsyncIterator[PmdaClient]:
    """``client`` after the CREDS exchange (if ``handshake``); closed on exit,
    even when cancelled."""
    try:
        if handshake:
            await client.handshake(creds_flags)
        yield client
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()


def process_stream(process: trio.Process) -> trio.StapledStream[trio.abc.SendStream, trio.abc.ReceiveStream]:
    """A PMDA process as one stream: we write its stdin and read its stdout
    (``send_eof`` closes its stdin, as pmcd does at shutdown)."""
    assert process.stdin is not None and process.stdout is not None
    return trio.StapledStream(process.stdin, process.stdout)


async def _reap(process: trio.Process, timeout: float) -> None:
    """Give the PMDA ``timeout`` seconds to exit, then kill it (our own child only)."""
    with trio.move_on_after(timeout):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


@asynccontextmanager
async def open_pipe_pmda(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    stderr: IO[str] | IO[bytes] | int | None = None,
    handshake: bool = True,
    creds_flags: int | None = None,
    timeout: float | None = 10.0,
    exit_timeout: float = 5.0,
) -> AsyncIterator[PmdaClient]:
    """Start ``command`` with pipes on stdin/stdout and yield a client for it.

    On exit the pipes are closed (EOF, as pmcd does at shutdown); the PMDA
    gets ``exit_timeout`` seconds to exit before it is killed.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    process = await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=full_env,
        cwd=cwd,
    )
    try:
        client = PmdaClient(process_stream(process), timeout=timeout, pid=process.pid)
        async with _connected(client, handshake, creds_flags):
            yield client
    finally:
        with trio.CancelScope(shield=True):
            await _reap(process, exit_timeout)


async def connect_socket_pmda(
    *,
    unix: str | None = None,
    inet: int | None = None,
    ipv6: int | None = None,
    host: str | None = None,
    retry_for: float = 5.0,
) -> trio.SocketStream:
    """Connect to a PMDA listening on a unix path, inet or ipv6 port,
    retrying until it listens (pmcd waits 2 s once; we poll)."""
    deadline = trio.current_time() + retry_for
    while True:
        try:
            if unix is not None:
                return await trio.open_unix_socket(unix)
            if inet is not None:
                return await trio.open_tcp_stream(host or "127.0.0.1", inet)
            if ipv6 is not None:
                sock = trio.socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                try:
                    await sock.connect((host or "::1", ipv6))
                except BaseException:
                    sock.close()
                    raise
                return trio.SocketStream(sock)
            raise ValueError("one of unix, inet or ipv6 is required")
        except OSError:
            if trio.current_time() >= deadline:
                raise
            await trio.sleep(0.05)


@asynccontextmanager
async def open_socket_pmda(
    *,
    unix: str | None = None,
    inet: int | None = None,
    ipv6: int | None = None,
    command: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
    stderr: IO[str] | IO[bytes] | int | None = None,
    handshake: bool = True,
    creds_flags: int | None = None,
    timeout: float | None = 10.0,
    retry_for: float = 10.0,
) -> AsyncIterator[PmdaClient]:
    """Connect to a socket PMDA (optionally starting ``command`` first, as
    pmcd does for ``socket`` lines with a command) and yield a client."""
    process: trio.Process | None = None
    if command is not None:
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        process = await trio.lowlevel.open_process(
            list(command), stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=full_env
        )
    try:
        stream = await connect_socket_pmda(unix=unix, inet=inet, ipv6=ipv6, retry_for=retry_for)
        client = PmdaClient(stream, timeout=timeout, pid=process.pid if process else 0)
        async with _connected(client, handshake, creds_flags):
            yield client
    finally:
        if process is not None:
            with trio.CancelScope(shield=True):
                await _reap(process, 5.0)
