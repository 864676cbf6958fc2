"""The sans-IO session: handshake, one reply per request, contexts."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from pmda_py.errors import LocalProtocolError, PmErr, WireFormatError
from pmda_py.pmapi import PmDesc
from pmda_py.session import (
    CLOSED,
    MAX_CREDS_LENGTH,
    NEED_DATA,
    BadRequest,
    HandshakeError,
    Ignored,
    Notice,
    Request,
    Session,
    SessionState,
)
from pmda_py.wire import (
    AttrPdu,
    CredsPdu,
    DescPdu,
    DescReqPdu,
    ErrorPdu,
    FetchPdu,
    ProfileEntry,
    ProfilePdu,
    UnknownPdu,
    decode_pdu,
)


def started() -> Session:
    s = Session(pid=42)
    creds = decode_pdu(s.start())
    assert isinstance(creds, CredsPdu)
    assert (creds.version, creds.flags, creds.from_) == (2, 0, 42)
    s.receive_data(CredsPdu.cversion(0, from_=1).encode())
    assert isinstance(s.next_event(), Notice)
    assert s.state is SessionState.READY
    return s


def test_request_reply_order() -> None:
    s = started()
    s.receive_data(DescReqPdu(1, from_=3).encode() + DescReqPdu(2, from_=4).encode())
    ev = s.next_event()
    assert isinstance(ev, Request)
    assert ev.context == 3
    with pytest.raises(LocalProtocolError):
        s.next_event()  # must answer first
    out = s.send(DescPdu(PmDesc(pmid=1, type=0), from_=9))
    assert decode_pdu(out).from_ == 0  # replies are from FROM_ANON
    ev = s.next_event()
    assert isinstance(ev, Request)
    assert ev.context == 4
    s.send(ErrorPdu(PmErr.PMID))
    with pytest.raises(LocalProtocolError):
        s.send(ErrorPdu(0))  # nothing to answer
    assert s.next_event() is NEED_DATA


def test_profiles_and_attributes_per_context() -> None:
    s = started()
    p1 = ProfilePdu(0, 0, (ProfileEntry(5, 1, (1,)),), from_=1)
    p2 = ProfilePdu(0, 1, (), from_=2)
    s.receive_data(p1.encode() + p2.encode() + AttrPdu(11, b"1000\0", from_=1).encode())
    for _ in range(3):
        assert isinstance(s.next_event(), Notice)
    assert s.profile(1) == p1
    assert s.profile(2) == p2
    assert s.attributes(1) == {"userid": "1000"}
    s.receive_data(ErrorPdu(PmErr.NOTCONN, from_=1).encode())
    ev = s.next_event()
    assert isinstance(ev, Notice)
    assert ev.context == 1
    assert s.attributes(1) == {}
    assert 1 not in s.contexts


def test_bad_request_gets_error_reply_and_stream_continues() -> None:
    s = started()
    bad = struct.pack("!iiii", 16, 0x7003, 0, 1)  # FETCH too short
    s.receive_data(bad + DescReqPdu(7).encode())
    ev = s.next_event()
    assert isinstance(ev, BadRequest)
    assert ev.code == PmErr.IPC
    s.send(ErrorPdu(ev.code))
    assert isinstance(s.next_event(), Request)


def test_unknown_and_control_req_are_ignored_without_reply() -> None:
    s = started()
    s.receive_data(UnknownPdu(0x700A, b"", 0).encode() + UnknownPdu(0x7777, b"abcd", 0).encode())
    assert isinstance(s.next_event(), Ignored)
    assert isinstance(s.next_event(), Ignored)
    assert s.next_event() is NEED_DATA


def test_impossible_length_is_fatal() -> None:
    s = started()
    s.receive_data(struct.pack("!iii", 4, 0x7003, 0))
    with pytest.raises(WireFormatError):
        s.next_event()


def test_eof_and_truncation() -> None:
    s = started()
    s.receive_data(FetchPdu((1,)).encode()[:10])
    s.receive_data(b"")
    assert s.next_event() is CLOSED
    assert s.truncated


def test_notready_then_ready() -> None:
    s = started()
    s.receive_data(DescReqPdu(1).encode())
    assert isinstance(s.next_event(), Request)
    out = s.send(ErrorPdu(PmErr.PMDANOTREADY))
    assert decode_pdu(out) == ErrorPdu(PmErr.PMDANOTREADY)
    assert s.state is SessionState.NOTREADY
    assert decode_pdu(s.ready()) == ErrorPdu(PmErr.PMDAREADY)
    with pytest.raises(LocalProtocolError):
        s.ready()


def test_pmda_error_code_is_the_instance_code() -> None:
    from pmda_py.errors import PmdaError, UnknownMetric

    err = PmdaError(code=PmErr.PERMISSION)
    assert err.code == err.pm_code == PmErr.PERMISSION
    assert PmdaError().code == PmErr.GENERIC and UnknownMetric().code == PmErr.PMID
    assert UnknownMetric(code=PmErr.NOAGENT).code == PmErr.NOAGENT and UnknownMetric.code == PmErr.PMID


# ------------------------------------------------------- require_creds (sockets)


def strict() -> Session:
    s = Session(pid=42, require_creds=True)
    s.start()
    return s


def test_strict_session_accepts_pmcd_creds_split_anywhere_and_keeps_what_follows() -> None:
    data = CredsPdu.cversion(0, from_=777).encode() + DescReqPdu(5, from_=3).encode()
    for cut in range(1, len(data)):
        s = strict()
        s.receive_data(data[:cut])
        events = []
        while (ev := s.next_event()) is not NEED_DATA:
            events.append(ev)
            if isinstance(ev, Request):
                s.send(ErrorPdu(PmErr.PMID))
        assert not s.handshake_done or isinstance(events[0], Notice)
        s.receive_data(data[cut:])
        while (ev := s.next_event()) is not NEED_DATA:
            events.append(ev)
            if isinstance(ev, Request):
                s.send(ErrorPdu(PmErr.PMID))
        assert s.handshake_done
        assert s.peer_creds is not None and s.peer_creds.from_ == 777
        assert [type(e) for e in events] == [Notice, Request], cut
        assert isinstance(events[1], Request) and events[1].context == 3


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (DescReqPdu(5).encode(), "first PDU is DESC_REQ, not CREDS"),
        (DescReqPdu(5).encode()[:8], "first PDU is DESC_REQ, not CREDS"),  # refused on the header alone
        (ErrorPdu(PmErr.NOTCONN).encode(), "first PDU is ERROR, not CREDS"),
        (b"GET / HTTP/1.0\r\n\r\n", "first PDU is 0x2f204854, not CREDS"),
        (b"\x00\x00\x00\x04", "length 4 cannot be a CREDS"),
        (struct.pack("!iii", 12, 0x700C, 0), "length 12 cannot be a CREDS"),
        (struct.pack("!ii", MAX_CREDS_LENGTH + 4, 0x700C), f"length {MAX_CREDS_LENGTH + 4} cannot be a CREDS"),
        (struct.pack("!iiiii", 20, 0x700C, 0, 5, 0), "undecodable CREDS"),  # count 5, one word
        (CredsPdu((0x02000000,)).encode(), "without a CVERSION"),  # a credential of another type
        (struct.pack("!ii", 20, -5), "not CREDS"),  # negative type
    ],
)
def test_strict_session_refuses_anything_but_creds_first(data: bytes, reason: str) -> None:
    s = strict()
    s.receive_data(data)
    with pytest.raises(HandshakeError, match=reason):
        s.next_event()
    assert s.state is SessionState.CLOSED
    assert not s.handshake_done
    assert s.next_event() is CLOSED


def test_strict_session_waits_on_a_partial_creds_header() -> None:
    s = strict()
    s.receive_data(CredsPdu.cversion(0).encode()[:7])
    assert s.next_event() is NEED_DATA
    assert not s.handshake_done
    s.receive_data(b"")
    assert s.next_event() is CLOSED
    assert s.truncated


def test_lenient_session_still_tolerates_a_missing_creds() -> None:
    """Pipes keep libpcp_pmda's behaviour: no CREDS, carry on."""
    s = Session()
    s.start()
    s.receive_data(DescReqPdu(5, from_=3).encode())
    assert isinstance(s.next_event(), Request)
    assert s.handshake_done


def test_pre_encoded_replies_go_through_send_too() -> None:
    """One reply path: an EncodedPdu is accounted like any other reply."""
    from pmda_py.wire import EncodedPdu, PduType

    s = started()
    s.receive_data(DescReqPdu(1, from_=3).encode() + DescReqPdu(2, from_=4).encode())
    assert isinstance(s.next_event(), Request)
    data = DescPdu(PmDesc(pmid=1, type=0)).encode()
    assert s.send(EncodedPdu(PduType.DESC, data)) == data
    assert isinstance(s.next_event(), Request)  # the first request counts as answered
    s.send(ErrorPdu(PmErr.PMID))
    with pytest.raises(LocalProtocolError):
        s.send(EncodedPdu(PduType.DESC, data))  # nothing left to answer
    with pytest.raises(LocalProtocolError):
        EncodedPdu(PduType.ERROR, ErrorPdu(PmErr.PMDANOTREADY).encode())  # would bypass NOTREADY


def test_repeated_fetches_decode_alike_per_context() -> None:
    """FETCH PDUs are kept decoded by their bytes: a repeat gives the same
    PMIDs, another context its own ``from``."""
    s = started()
    seen = []
    for k in range(40):
        for ctx in (1, 2, 1):
            s.receive_data(FetchPdu((k, k + 1, 7), ctxid=ctx, from_=ctx).encode())
            ev = s.next_event()
            assert isinstance(ev, Request) and isinstance(ev.pdu, FetchPdu)
            assert ev.pdu.pmids == (k, k + 1, 7) and ev.context == ctx and ev.pdu.from_ == ctx
            seen.append(ev.pdu)
            s.send(ErrorPdu(0))
    assert seen[0] is seen[2] and seen[0] is not seen[1]  # the repeat was not decoded again
    assert len(s._decoded) == 80


def test_repeated_meta_requests_are_not_decoded_again_and_the_kept_ones_are_bounded() -> None:
    """DESC/TEXT/LABEL/INSTANCE requests are kept decoded too (their replies
    are remembered by their bytes); at most DECODED_KEPT requests and
    DECODED_BYTES bytes of them are kept, the oldest going first, and a
    request over a quarter of the bytes is decoded each time, not kept."""
    from pmda_py.session import DECODED_BYTES, DECODED_KEPT
    from pmda_py.wire import DescReqPdu, InstanceReqPdu

    s = started()

    def ask(pdu: Any) -> Any:
        s.receive_data(pdu.encode())
        ev = s.next_event()
        assert isinstance(ev, Request)
        s.send(ErrorPdu(0))
        return ev.pdu

    first = ask(DescReqPdu(42, from_=3))
    assert ask(DescReqPdu(42, from_=3)) is first
    assert ask(InstanceReqPdu(5, name="x", from_=3)) is ask(InstanceReqPdu(5, name="x", from_=3))
    for k in range(DECODED_KEPT + 40):
        assert ask(DescReqPdu(1000 + k)).pmid == 1000 + k
        assert len(s._decoded) <= DECODED_KEPT
    assert len(s._decoded) == DECODED_KEPT
    assert ask(DescReqPdu(42, from_=3)) is not first  # the oldest went
    # by bytes: FETCHes of 100 000 PMIDs (400 KB each)
    big = [FetchPdu(tuple(range(k, k + 100_000))) for k in range(12)]
    for pdu in big:
        got = ask(pdu)
        assert got.pmids == pdu.pmids
        assert s._decoded_bytes == sum(map(len, s._decoded)) <= DECODED_BYTES
    assert len(s._decoded) == DECODED_BYTES // len(big[0].encode())
    assert ask(big[-1]) is ask(big[-1])
    huge = FetchPdu(tuple(range(DECODED_BYTES // 16 + 1)))  # over a quarter of the bytes
    a, b = ask(huge), ask(huge)
    assert a == b == huge and a is not b
    assert s._decoded_bytes == sum(map(len, s._decoded)) <= DECODED_BYTES


def test_a_reply_over_the_pdu_limit_is_refused_not_sent() -> None:
    """An INSTANCE reply of 68 MB (over the 64 MiB PDU limit pmcd enforces)
    becomes PM_ERR_TOOBIG, noted for the daemon to log."""
    from pmda_py.wire import InstanceEntry, InstancePdu, InstanceReqPdu

    s = started()
    s.receive_data(InstanceReqPdu(5, from_=3).encode())
    assert isinstance(s.next_event(), Request)
    big = InstancePdu(5, tuple(InstanceEntry(i, f"{i:06d}" + "x" * 40_000) for i in range(1700)))
    out = s.send(big)
    reply = decode_pdu(out)
    assert isinstance(reply, ErrorPdu) and reply.code == PmErr.TOOBIG
    assert s.refused_reply is not None and s.refused_reply[1] > s.max_length == 64 * 1024 * 1024
    s.refused_reply = None
    s.receive_data(InstanceReqPdu(5, from_=3).encode())
    assert isinstance(s.next_event(), Request)
    out = s.send(ErrorPdu(PmErr.INDOM))
    assert decode_pdu(out) == ErrorPdu(PmErr.INDOM) and s.refused_reply is None


def test_remembered_reply_bytes_over_the_pdu_limit_are_refused_too() -> None:
    """Encoded bytes (a remembered reply) go through the same limit."""
    from pmda_py.wire import EncodedPdu, InstanceReqPdu, PduType

    s = started()
    s.receive_data(InstanceReqPdu(5, from_=3).encode())
    assert isinstance(s.next_event(), Request)
    reply = decode_pdu(s.send(EncodedPdu(PduType.INSTANCE, b"\0" * (s.max_length + 1))))
    assert isinstance(reply, ErrorPdu) and reply.code == PmErr.TOOBIG
    assert s.refused_reply is not None and s.refused_reply[1] > s.max_length


def test_a_request_s_attributes_are_read_only_and_stay_as_they_were() -> None:
    """Requests share their context's attributes (no copy per request):
    so they are read-only, and a later ATTR replaces the context's mapping
    rather than changing the one an earlier request holds."""
    s = started()
    s.receive_data(AttrPdu(11, b"1000\0", from_=3).encode() + FetchPdu((1,), from_=3).encode())
    assert isinstance(s.next_event(), Notice)
    first = s.next_event()
    assert isinstance(first, Request)
    s.send(ErrorPdu(PmErr.PMID))
    s.receive_data(FetchPdu((1,), from_=3).encode())
    second = s.next_event()
    assert isinstance(second, Request)
    s.send(ErrorPdu(PmErr.PMID))
    assert second.attributes is first.attributes  # shared, not copied
    with pytest.raises(TypeError):
        first.attributes["userid"] = "0"  # type: ignore[index]
    s.receive_data(AttrPdu(11, b"0\0", from_=3).encode() + FetchPdu((1,), from_=3).encode())
    assert isinstance(s.next_event(), Notice)
    third = s.next_event()
    assert isinstance(third, Request)
    assert dict(first.attributes) == {"userid": "1000"} and dict(third.attributes) == {"userid": "0"}
