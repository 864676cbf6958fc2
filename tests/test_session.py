"""The sans-IO session: handshake, one reply per request, contexts."""

from __future__ import annotations

import struct

import pytest

from pmda_py.errors import LocalProtocolError, PmErr, WireFormatError
from pmda_py.pmapi import PmDesc
from pmda_py.session import CLOSED, NEED_DATA, BadRequest, Ignored, Notice, Request, Session, SessionState
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
