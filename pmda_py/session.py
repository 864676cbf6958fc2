"""The PMDA side of one pmcd channel, as a sans-IO state machine.

Theory of operation
-------------------
The PMDA speaks first (:meth:`Session.start` returns its CREDS), then pmcd
replies with CREDS and sends requests one at a time.  Bytes read from the
channel go into :meth:`Session.receive_data`; :meth:`Session.next_event`
returns, in order:

* :class:`Request` -- a PDU that must get exactly one reply, given to
  :meth:`Session.send` before the next request is handled;
* :class:`Notice` -- PROFILE, ATTR, NOTCONN: already applied to the
  per-context state here, no reply allowed;
* :class:`BadRequest` -- a request that did not decode: reply with
  ``ERROR(code)`` (what libpcp_pmda does), via :meth:`Session.send`;
* :class:`Ignored` -- CONTROL_REQ, unknown types, undecodable no-reply PDUs:
  log and carry on;
* :data:`NEED_DATA`, or :data:`CLOSED` once the peer closed the channel.

With ``require_creds`` (socket transports, where anyone may connect), the
peer must prove it is pmcd before anything else: its first PDU must be a
CREDS with a CVERSION credential.  Anything else -- another PDU type, a
declared length no CREDS can have (below 16 or above
:data:`MAX_CREDS_LENGTH`), an undecodable CREDS -- raises
:class:`HandshakeError` as soon as the header shows it, without waiting for
the rest of the PDU.  The
timeout for that first PDU is the caller's (it owns the clock).

Per-context state is keyed by the PDU ``from`` field (pmcd's client slot):
the last PROFILE and the ATTR values of each context, freed when pmcd sends
``ERROR(PM_ERR_NOTCONN)`` for it.  A framing error (impossible or oversized
length) raises :class:`~pmda_py.errors.WireFormatError`: the stream cannot
be resynchronised, so the caller must close it.

No I/O and no logging happen here.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NoReturn, Optional, Union

import attrs

from pmda_py.errors import LocalProtocolError, PmErr, WireFormatError
from pmda_py.wire import (
    DEFAULT_MAX_LENGTH,
    AttrPdu,
    CredsPdu,
    EncodedPdu,
    ErrorPdu,
    Pdu,
    PduReader,
    PduType,
    ProfilePdu,
    UnknownPdu,
    decode_pdu,
)
from pmda_py.wire.buffers import ReplyBuffer

#: the attributes of a context no ATTR has named
NO_ATTRIBUTES: Final[Mapping[str, str]] = MappingProxyType({})

#: a PDU header's type and from fields
_TYPE_FROM: Final = struct.Struct("!ii")

__all__ = [
    "CLOSED",
    "DEFAULT_PROFILE",
    "MAX_CREDS_LENGTH",
    "NEED_DATA",
    "ATTR_NAMES",
    "BadRequest",
    "Event",
    "HandshakeError",
    "Ignored",
    "Notice",
    "Request",
    "Session",
    "SessionState",
]


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"
    CLOSED = "CLOSED"


NEED_DATA: Final = _Sentinel.NEED_DATA
CLOSED: Final = _Sentinel.CLOSED

DEFAULT_PROFILE: Final = ProfilePdu()

#: Largest CREDS accepted during the handshake (header, count and 64
#: credentials; pmcd sends one).
MAX_CREDS_LENGTH: Final = 16 + 4 * 64

#: PCP_ATTR_* codes -> names (libpcp auth.c).
ATTR_NAMES: Final[dict[int, str]] = {
    1: "protocol",
    2: "secure",
    3: "compress",
    4: "userauth",
    5: "username",
    6: "authname",
    7: "password",
    8: "method",
    9: "realm",
    10: "unixsock",
    11: "userid",
    12: "groupid",
    13: "local",
    14: "processid",
    15: "container",
    16: "exclusive",
}

_REPLY_EXPECTED: Final = frozenset(
    {
        PduType.FETCH,
        PduType.DESC_REQ,
        PduType.INSTANCE_REQ,
        PduType.TEXT_REQ,
        PduType.RESULT,
        PduType.PMNS_IDS,
        PduType.PMNS_NAMES,
        PduType.PMNS_CHILD,
        PduType.PMNS_TRAVERSE,
        PduType.LABEL_REQ,
    }
)


#: requests whose reply may be remembered by their bytes (a :class:`Request`'s ``key``)
MEMO_TYPES: Final = frozenset({PduType.DESC_REQ, PduType.TEXT_REQ, PduType.LABEL_REQ, PduType.INSTANCE_REQ})

#: requests kept decoded by their bytes, so a repeat is not decoded again:
#: FETCH (pmcd repeats one per client) and the requests whose replies are
#: remembered (:data:`MEMO_TYPES`)
DECODED_TYPES: Final = MEMO_TYPES | {PduType.FETCH}
#: at most this many kept ...
DECODED_KEPT: Final = 256
#: ... and this many bytes of request in all (decoded, a FETCH's PMIDs take
#: about 9 times their bytes); a request over a quarter of it is not kept
DECODED_BYTES: Final = 4 << 20


class SessionState(enum.Enum):
    """Where the session is."""

    START = "start"  #: CREDS not sent yet
    AWAIT_CREDS = "await_creds"  #: our CREDS sent, pmcd's not received
    READY = "ready"
    NOTREADY = "notready"  #: we said PMDANOTREADY; PMDAREADY pending
    CLOSED = "closed"


# The states every request's way compares with, as module constants: a member
# looked up on its enum class goes through the metaclass's attribute hooks,
# about 2 us a lookup when pmcd's next request finds the caches cold.
_CLOSED: Final = SessionState.CLOSED
_READY: Final = SessionState.READY
_AWAIT_CREDS: Final = SessionState.AWAIT_CREDS


@attrs.define
class Request:
    """A request that needs exactly one reply, with what its client context
    has set: the instance profile and the attributes (ATTR PDUs).

    Read-only by convention, not frozen: one is made per request, and a
    frozen record's ``__init__`` costs several times a plain one's when
    the caches are cold (as they are between pmcd's requests)."""

    pdu: Pdu
    context: int
    profile: ProfilePdu = DEFAULT_PROFILE
    attributes: Mapping[str, str] = attrs.field(factory=dict)
    #: the request's bytes after the header, for the types in
    #: :data:`MEMO_TYPES` (the key a reply may be remembered by), else None
    key: bytes | None = None


@attrs.frozen
class BadRequest:
    """A request PDU that failed to decode; reply ``ERROR(code)``."""

    pdu_type: int
    context: int
    code: int
    reason: str


@attrs.frozen
class Notice:
    """A no-reply PDU already applied to the session (PROFILE, ATTR, NOTCONN)."""

    pdu: Pdu
    context: int


@attrs.frozen
class Ignored:
    """A PDU that was dropped (CONTROL_REQ, unknown type, bad no-reply PDU)."""

    pdu_type: int
    context: int
    reason: str


Event = Union[Request, BadRequest, Notice, Ignored]


class HandshakeError(Exception):
    """With ``require_creds``: the peer's first PDU is not pmcd's CREDS."""


@attrs.define
class _Context:
    profile: ProfilePdu = DEFAULT_PROFILE
    #: replaced whole by each ATTR, never changed in place: requests share it
    attributes: Mapping[str, str] = NO_ATTRIBUTES


@attrs.define
class Session:
    """State of the PMDA side of one channel.

    Args:
        pid: our pid, sent in CREDS ``from``.
        flags: CREDS ``c_flags`` (PDU_FLAG_AUTH / CONTAINER to get ATTRs).
        max_length: largest PDU accepted (larger is PM_ERR_TOOBIG, fatal).
        require_creds: the first PDU must be a CREDS (else
            :class:`HandshakeError`); without it a missing CREDS is
            tolerated as libpcp_pmda does.
    """

    pid: int = 0
    flags: int = 0
    max_length: int = DEFAULT_MAX_LENGTH
    #: (PDU type, length) of the last reply :meth:`send` refused for its size (the caller logs and clears it)
    refused_reply: Optional[tuple[int, int]] = attrs.field(default=None, init=False)
    require_creds: bool = False
    state: SessionState = SessionState.START
    peer_creds: CredsPdu | None = None
    _reader: PduReader = attrs.field(init=False)
    _contexts: dict[int, _Context] = attrs.field(factory=dict, init=False)
    _pending: list[int] = attrs.field(factory=list, init=False)  # PDU types awaiting a reply
    _last_profile: ProfilePdu = attrs.field(default=DEFAULT_PROFILE, init=False)
    #: the last requests of :data:`DECODED_TYPES` decoded, by their bytes, and those bytes' total
    _decoded: dict[bytes, Pdu] = attrs.field(factory=dict, init=False)
    _decoded_bytes: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self._reader = PduReader(self.max_length)

    # ------------------------------------------------------------ sending

    def start(self) -> bytes:
        """Our CREDS, to be written before anything is read."""
        if self.state is not SessionState.START:
            raise LocalProtocolError("CREDS already sent")
        self.state = SessionState.AWAIT_CREDS
        return CredsPdu.cversion(self.flags, from_=self.pid).encode()

    @property
    def handshake_done(self) -> bool:
        """True once the peer's first PDU was taken (its CREDS, with
        ``require_creds``)."""
        return self.state not in (SessionState.START, SessionState.AWAIT_CREDS, SessionState.CLOSED)

    @property
    def awaiting_reply(self) -> bool:
        """True while a request has been handed out and not answered."""
        return bool(self._pending)

    def send(self, reply: Pdu) -> bytes | ReplyBuffer:
        """Bytes of the reply to the oldest unanswered request (the one way
        every reply goes out, pre-encoded :class:`EncodedPdu` ones included).
        A fast-path RESULT is its layout's own buffer (a bytearray, or a
        :class:`~pmda_py.wire.buffers.SharedReply` in a pipe agent): write
        it, keep it if need be, never change it.

        A reply of ``ERROR(PM_ERR_PMDANOTREADY)`` puts the session in the
        NOTREADY state (pmcd then sends nothing until :meth:`ready`).
        """
        if not self._pending:
            raise LocalProtocolError(f"{type(reply).__name__} sent with no request to answer")
        self._pending.pop(0)
        if isinstance(reply, EncodedPdu):  # a fast path's bytes, ``from`` 0 already
            data = reply.data
        else:
            if reply.from_ != 0:
                reply = attrs.evolve(reply, from_=0)
            if isinstance(reply, ErrorPdu) and reply.code == PmErr.PMDANOTREADY:
                self.state = SessionState.NOTREADY
            data = reply.encode()
        if len(data) > self.max_length:
            # no PDU over the limit ever goes out (pmcd would refuse it and drop the agent): PM_ERR_TOOBIG
            # instead, and the caller logs :attr:`refused_reply`
            self.refused_reply = (int.from_bytes(data[4:8], "big", signed=True), len(data))
            return ErrorPdu(PmErr.TOOBIG).encode()
        return data

    def send_failed(self) -> None:
        """The transport could not write: the session is dead."""
        self.state = SessionState.CLOSED

    def not_ready(self) -> bytes:
        """Unsolicited-free way to go not ready at start: nothing is sent;
        pmcd.conf's ``notready`` keyword tells pmcd to wait."""
        self.state = SessionState.NOTREADY
        return b""

    def ready(self) -> bytes:
        """``ERROR(PM_ERR_PMDAREADY)``, the one unsolicited PDU a PMDA may send."""
        if self.state is not SessionState.NOTREADY:
            raise LocalProtocolError("PMDAREADY sent while not in the NOTREADY state")
        if self._pending:
            raise LocalProtocolError("PMDAREADY sent while a request is unanswered")
        self.state = SessionState.READY
        return ErrorPdu(PmErr.PMDAREADY).encode()

    # ---------------------------------------------------------- receiving

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes read from the channel; ``b""`` means EOF."""
        self._reader.receive_data(data)

    @property
    def truncated(self) -> bool:
        """True if the channel closed in the middle of a PDU."""
        return self._reader.truncated

    def next_event(self) -> Event | _Sentinel:
        """The next event, :data:`NEED_DATA` or :data:`CLOSED`.

        Raises:
            WireFormatError: impossible framing; close the channel.
            HandshakeError: with ``require_creds``, the first PDU is not a
                CREDS; close the channel.
            LocalProtocolError: called while a request is unanswered.
        """
        if self.state is _CLOSED:
            return CLOSED
        if self._pending:
            raise LocalProtocolError("next_event() while a request is unanswered")
        if self.require_creds and self.state is _AWAIT_CREDS:
            self._check_creds_header()
        frame = self._reader.next_frame()
        if frame is None:
            if self._reader.eof:  # at the end, or cut in the middle of a PDU
                self.state = SessionState.CLOSED
                return CLOSED
            return NEED_DATA
        return self._event(frame)

    def _keep_decoded(self, frame: bytes, pdu: Pdu) -> None:
        """Keep a decoded request by its bytes, the oldest ones going to stay
        within :data:`DECODED_KEPT` and :data:`DECODED_BYTES`."""
        size = len(frame)
        if size > DECODED_BYTES // 4:
            return
        kept = self._decoded
        while kept and (len(kept) >= DECODED_KEPT or self._decoded_bytes + size > DECODED_BYTES):
            oldest = next(iter(kept))
            del kept[oldest]
            self._decoded_bytes -= len(oldest)
        kept[frame] = pdu
        self._decoded_bytes += size

    def _check_creds_header(self) -> None:
        """Refuse a first PDU that cannot be a CREDS as soon as its header shows it."""
        header = self._reader.peek_header()
        if header is None:
            return
        length, pdu_type = header
        if pdu_type is not None and pdu_type != PduType.CREDS:
            self._handshake_failed(f"first PDU is {PduType.name_of(pdu_type)}, not CREDS")
        if not 16 <= length <= MAX_CREDS_LENGTH:
            self._handshake_failed(f"first PDU length {length} cannot be a CREDS")

    def _handshake_failed(self, reason: str) -> NoReturn:
        self.state = SessionState.CLOSED
        raise HandshakeError(reason)

    def _event(self, frame: bytes) -> Event:
        pdu_type, context = _TYPE_FROM.unpack_from(frame, 4)
        key = None
        if pdu_type in MEMO_TYPES and self.state is _READY:
            key = frame[12:]
        try:
            if pdu_type in DECODED_TYPES:  # a client asks the same again and again
                pdu = self._decoded.get(frame)
                if pdu is None:
                    pdu = decode_pdu(frame)
                    self._keep_decoded(frame, pdu)
            else:
                pdu = decode_pdu(frame)
        except WireFormatError as err:
            if self.require_creds and self.state is SessionState.AWAIT_CREDS:
                self._handshake_failed(f"undecodable CREDS: {err}")
            if pdu_type in _REPLY_EXPECTED:
                self._pending.append(pdu_type)
                return BadRequest(pdu_type, context, err.pm_code, str(err))
            return Ignored(pdu_type, context, str(err))

        if self.state is _AWAIT_CREDS:
            if self.require_creds and (not isinstance(pdu, CredsPdu) or pdu.version is None):
                self._handshake_failed("CREDS without a CVERSION credential")
            self.state = SessionState.READY
            if isinstance(pdu, CredsPdu):
                self.peer_creds = pdu
                return Notice(pdu, context)
            # libpcp_pmda logs "version exchange failed" and carries on.

        if pdu_type in _REPLY_EXPECTED and type(pdu) is not UnknownPdu:  # a request: the usual
            self._pending.append(pdu_type)
            return Request(pdu, context, self.profile(context), self.attributes(context), key)
        if isinstance(pdu, ProfilePdu):
            self._ctx(context).profile = pdu
            self._last_profile = pdu
            return Notice(pdu, context)
        if isinstance(pdu, AttrPdu):
            name = ATTR_NAMES.get(pdu.attr, str(pdu.attr))
            ctx = self._ctx(context)
            ctx.attributes = MappingProxyType({**ctx.attributes, name: pdu.text})
            return Notice(pdu, context)
        if isinstance(pdu, ErrorPdu):
            if pdu.code == PmErr.NOTCONN:
                self._contexts.pop(context, None)
                return Notice(pdu, context)
            return Ignored(pdu_type, context, f"unexpected ERROR PDU from pmcd: {pdu.code}")
        if isinstance(pdu, CredsPdu):
            return Ignored(pdu_type, context, "CREDS after the handshake")
        return Ignored(pdu_type, context, "PDU type not expected by a PMDA")

    # ----------------------------------------------------------- contexts

    def _ctx(self, context: int) -> _Context:
        ctx = self._contexts.get(context)
        if ctx is None:
            ctx = self._contexts[context] = _Context()
        return ctx

    def profile(self, context: int) -> ProfilePdu:
        """The profile of ``context``: its own last PROFILE, else the last
        one received (pmcd resends on every context switch), else include-all."""
        ctx = self._contexts.get(context)
        if ctx is not None and ctx.profile is not DEFAULT_PROFILE:
            return ctx.profile
        return self._last_profile

    def attributes(self, context: int) -> Mapping[str, str]:
        """The attributes (ATTR PDUs) of ``context`` by name (read-only, and
        unchanged by later ATTRs: each replaces the context's mapping)."""
        ctx = self._contexts.get(context)
        return ctx.attributes if ctx is not None else NO_ATTRIBUTES

    @property
    def contexts(self) -> list[int]:
        """Contexts with state."""
        return sorted(self._contexts)
