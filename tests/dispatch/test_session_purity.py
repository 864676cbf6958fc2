"""The session never calls up into the dispatcher (or anything above the
wire): the daemon's pump asks the dispatcher, and the dispatcher's reply
cache answers repeated requests.  A session is driven by the daemon's pump
through every PDU type pmcd sends (each request twice, so remembered
replies answer the second), with a profiler noting every pmda_py function
called while a :class:`~pmda_py.session.Session` method is on the stack."""

from __future__ import annotations

import ast
import inspect
import struct
import sys
from pathlib import Path
from types import FrameType

import trio
import trio.testing

import pmda_py.session
from pmda_py.dispatch import Dispatcher, Mount
from pmda_py.errors import PmErr
from pmda_py.pmapi import LabelType, TextType, indom, pmid
from pmda_py.runtime.pump import serve_stream
from pmda_py.session import Session
from pmda_py.testing.support import InlineRunner
from pmda_py.wire import (
    AttrPdu,
    CredsPdu,
    DescReqPdu,
    ErrorPdu,
    FetchPdu,
    InstanceReqPdu,
    LabelReqPdu,
    PduType,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    ProfileEntry,
    ProfilePdu,
    TextReqPdu,
)
from tests.dispatch.test_memo import DOMAIN, _Static

#: what a session may call: itself and the layers below it
BELOW = ("pmda_py.session", "pmda_py.wire", "pmda_py.errors", "pmda_py.pmapi")


def _requests() -> list[bytes]:
    p, i = pmid(DOMAIN, 0, 0), indom(DOMAIN, 0)
    once = [
        DescReqPdu(p).encode(),
        InstanceReqPdu(i).encode(),
        TextReqPdu(p, TextType.PMID | TextType.ONELINE).encode(),
        LabelReqPdu(p, LabelType.ITEM).encode(),
        FetchPdu((p, pmid(DOMAIN, 0, 1))).encode(),
        PmnsNamesPdu(("static.a",)).encode(),
        PmnsIdsPdu((p,)).encode(),
        PmnsChildPdu("static").encode(),
        PmnsTraversePdu("static").encode(),
    ]
    others = [
        ProfilePdu(0, 1, (ProfileEntry(i, 0, (1,)),)).encode(),
        AttrPdu(1, b"me").encode(),
        ErrorPdu(PmErr.NOTCONN, from_=4).encode(),
        struct.pack(">iii", 12, 0x9999, 0),  # a type no PMDA expects
        struct.pack(">iii", 12, PduType.DESC_REQ, 0),  # a request that does not decode: a BadRequest
    ]
    return once + once + others


def test_the_session_calls_nothing_above_the_wire() -> None:
    table = _Static()
    disp = Dispatcher(DOMAIN, [Mount(table, table.name, table.name, {})], InlineRunner())
    session = Session()
    codes = {f.__code__ for f in vars(Session).values() if inspect.isfunction(f)}
    codes |= {p.fget.__code__ for p in vars(Session).values() if isinstance(p, property) and p.fget is not None}
    depth = 0
    above: set[str] = set()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal depth
        if frame.f_code in codes:
            depth += 1 if event == "call" else -1 if event == "return" else 0
            return
        if depth and event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("pmda_py") and not module.startswith(BELOW):
                above.add(f"{module}.{frame.f_code.co_name}")

    async def run() -> None:
        ours, theirs = trio.testing.memory_stream_pair()
        await theirs.send_all(CredsPdu.cversion(0).encode() + b"".join(_requests()))
        await theirs.send_eof()
        sys.setprofile(profile)
        try:
            assert await serve_stream(ours, session, disp) == "eof"
        finally:
            sys.setprofile(None)

    trio.run(run)
    assert disp.replies.hits >= 4  # the repeats were answered from the reply cache: the pump asked it
    assert disp.stats.requests["FETCH"] == 2 and disp.stats.bad_requests == 1
    assert not above, sorted(above)


def test_no_attribute_of_the_session_holds_a_callable() -> None:
    """Nothing in session.py names a callable type: no hook a caller could
    install (the way the daemon once installed a shortcut into the
    dispatcher)."""
    tree = ast.parse(Path(pmda_py.session.__file__).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not names & {"Callable", "Awaitable", "Coroutine"}, names & {"Callable", "Awaitable", "Coroutine"}
