"""The PDU exchange of a dbpmda session: the PMDA it opened (a process on
a pipe, or a socket), the version exchange, each request and its reply, and
libpcp's instance profile, sent before the requests that use it."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence

import attrs
import trio

from pmda_py.errors import PmErr, WireFormatError, errstr
from pmda_py.pcpversion import pcp_version
from pmda_py.pmapi import PM_INDOM_NULL
from pmda_py.testing.client import PmdaClient, connect_socket_pmda, process_stream
from pmda_py.testing.dbpmda.transcript import Transcript
from pmda_py.wire import CredsPdu, ErrorPdu, Pdu, PduType, ProfileEntry, ProfilePdu, decode_pdu
from pmda_py.wire.codec import HEADER_SIZE

__all__ = ["Connector", "PmdaLink", "Profile"]

#: a replacement for starting or connecting a PMDA: called with ("pipe", argv)
#: or ("unix"|"inet"|"ipv6", address), it returns the PMDA's stream
Connector = Callable[[str, object], Awaitable[trio.abc.Stream]]

_BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


@attrs.define
class IndomProfile:
    """One indom's entry: its state (0 INCLUDE, 1 EXCLUDE) and the
    instances that are the exceptions to it."""

    state: int
    insts: list[int] = attrs.field(factory=list)


class Profile:
    """libpcp's client profile (``pmAddProfile`` / ``pmDelProfile``), quirk
    included: a new per-indom entry starts EXCLUDE, for add and delete alike."""

    def __init__(self) -> None:
        #: the context's global state: INCLUDE, or EXCLUDE after pmDelProfile(PM_INDOM_NULL, 0, NULL)
        self.state = 0
        self.entries: dict[int, IndomProfile] = {}  # in creation order

    def add(self, ind: int, insts: Sequence[int]) -> None:
        self._change(ind, insts, 0)  # no instances: INCLUDE all

    def delete(self, ind: int, insts: Sequence[int]) -> None:
        self._change(ind, insts, 1)  # no instances: EXCLUDE all

    def _change(self, ind: int, insts: Sequence[int], state: int) -> None:
        """Move ``insts`` towards ``state``."""
        if ind == PM_INDOM_NULL and not insts:  # every indom: the global state, no entries
            self.state, self.entries = state, {}
            return
        e = self.entries.setdefault(ind, IndomProfile(1))
        if not insts:
            e.state, e.insts = state, []
        elif e.state == state:
            e.insts = [i for i in e.insts if i not in insts]
        else:
            e.insts += [i for i in insts if i not in e.insts]

    def rows(self) -> Iterator[tuple[int, int, list[int]]]:
        """(indom, state, instances) of each entry."""
        return ((ind, e.state, e.insts) for ind, e in self.entries.items())

    def pdu(self) -> ProfilePdu:
        return ProfilePdu(0, self.state, tuple(ProfileEntry(i, s, tuple(lst)) for i, s, lst in self.rows()))


def _strerror(err: BaseException) -> str:
    """strerror() of the errno under ``err`` (trio wraps failed attempts)."""
    seen: list[BaseException] = [err]
    while seen:
        e = seen.pop(0)
        if isinstance(e, OSError) and e.errno:
            return os.strerror(e.errno)
        seen += [x for x in (e.__cause__, e.__context__) if x is not None]
        seen += list(getattr(e, "exceptions", ()))
    return str(err)


class _IllegalLength(Exception):
    """A PDU header whose length is shorter than a header (libpcp: PM_ERR_IPC)."""

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length


class PmdaLink:
    """The PMDA a session talks to, if one is open (pmda.c's side of dbpmda)."""

    def __init__(self, out: Transcript) -> None:
        self.out = out
        self.client: PmdaClient | None = None
        self.process: trio.Process | None = None
        self.connector: Connector | None = None
        self.profile = Profile()
        self.profile_changed = True
        #: what ``status`` shows: the PMDA, its pid, its PDU version
        self.name: str | None = None
        self.pid = 0
        self.version: int | None = None
        #: seconds to wait for the PMDA's CREDS (dbpmda's -q)
        self.creds_timeout = 3

    # -- opening and closing
    async def open_dso(self, path: str) -> None:
        """``open dso``: refused (no DSO runs in a Python process), after
        dbpmda's own check that the file is there."""
        try:
            await trio.Path(path).stat()
        except OSError as err:
            self.out.complain(f"opendso: {path}: {err.strerror}\n")
        else:
            self.out.complain(f"opendso: DSO PMDAs are not supported by pmda-py dbpmda ({path})\n")

    async def open_pipe(self, fname: str, argv: Sequence[str]) -> None:
        """pmda.c ``openpmda``: start ``fname`` and talk to it on a pipe."""
        if not await trio.Path(fname).exists():
            self.out.complain(f"openpmda: stat {fname} failed: No such file or directory\n")
            return
        await self.close()
        self.out.p(f"Start {os.path.basename(fname)} PMDA: {fname}" + "".join(f" {a}" for a in argv))
        self.out.flush()
        try:
            if self.connector is not None:
                self.client = PmdaClient(await self.connector("pipe", [fname, *argv]), timeout=None)
            else:
                self.process = await trio.lowlevel.open_process(
                    [fname, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
                )
                self.client = PmdaClient(process_stream(self.process), timeout=None)
                self.pid = self.process.pid
        except OSError as err:
            self.out.complain(f"openpmda: create process failed: {err.strerror or err}\n")
            return
        await self._hello(fname, pipe=True)

    async def open_socket(self, kind: str, path: str, port: int) -> None:
        """pmda.c ``open_unix_socket`` / ``open_inet_socket``: ``kind`` is
        unix (at ``path``), inet or ipv6 (at ``port``)."""
        target = path if kind == "unix" else str(port)
        if kind == "unix" and self.connector is None:
            try:
                await trio.Path(target).stat()
            except OSError as err:
                self.out.complain(f"opensocket: {target}: {err.strerror}\n")
                return
        await self.close()  # pmda.c: the old PMDA goes before the connect is tried
        try:
            if self.connector is not None:
                stream: trio.abc.Stream = await self.connector(kind, target)
            elif kind == "unix":
                stream = await connect_socket_pmda(unix=target, retry_for=0)
            elif kind == "inet":
                stream = await connect_socket_pmda(inet=port, retry_for=0)
            else:
                stream = await connect_socket_pmda(ipv6=port, retry_for=0)
        except (OSError, ValueError) as err:
            self.out.complain(f"opensocket: connect: {_strerror(err)}\n")
            return
        label = f"socket {target}" if kind == "unix" else f"{kind} port {port}"
        self.client = PmdaClient(stream, timeout=None)
        self.out.p(f"Connect to PMDA on {label}")
        await self._hello(target if kind == "unix" else label, pipe=False)

    async def _hello(self, name: str, pipe: bool) -> None:
        """A new PMDA: a fresh profile, and the version exchange (its CREDS,
        ours) within :attr:`creds_timeout` seconds.  A PMDA that sends
        something else, a broken header, nothing, or ends, gets dbpmda's
        messages: libpcp's error, or the type its header names and libpcp's
        trace of it (dbpmda reads a pipe PMDA on its fd 5, a socket one on
        its fd 3), then the warning."""
        assert self.client is not None
        self.profile = Profile()
        self.profile_changed = True
        self.name, self.version = name, None
        fd = 5 if pipe else 3
        try:
            with trio.fail_after(self.creds_timeout):
                frame = await self._first_frame()
        except EOFError:
            self.out.complain("pmdaversion: expecting PDU_CREDS, got EOF\n")
        except trio.TooSlowError:
            self.out.complain(f"__pmGetPDU({fd}): {errstr(PmErr.TIMEOUT)}\n")
        except _IllegalLength as bad:
            # libpcp's error, after (before PCP 6.2.2, where it became a -Dpdu line) its log line
            if pcp_version() < (6, 2, 2):
                stamp = time.strftime("%a %b %d %H:%M:%S")
                self.out.complain(
                    f"[{stamp}] dbpmda({os.getpid()}) Error: __pmGetPDU: fd={fd} illegal PDU len={bad.length} in hdr\n"
                )
            self.out.complain(f"__pmGetPDU({fd}): {errstr(PmErr.IPC)}\n")
        else:
            kind = int.from_bytes(frame[4:8], "big", signed=True)
            if kind == PduType.CREDS:
                try:
                    creds = decode_pdu(frame)
                    if not isinstance(creds, CredsPdu):
                        raise WireFormatError("not CREDS", code=PmErr.IPC)
                except WireFormatError as err:
                    self.out.complain(f"Warning: version exchange failed for PMDA {name}: {errstr(err.code)}\n")
                    return
                self.version = creds.version
                await self.client.send(CredsPdu.cversion(0, from_=os.getpid()))
                return
            kind_name = PduType.name_of(kind, "TYPE-{}?")  # (libpcp's name of a type it has none for)
            self.out.complain(
                f"pmdaversion: expecting PDU_CREDS, got PDU type {kind_name}\n"
                "__pmDumpPDUTrace: recent PDUs ...\n"
                f"[0] recv fd={fd} type={kind_name} len={len(frame)}\n"
            )
        self.out.complain(f"Warning: no version exchange with PMDA {name} after {self.creds_timeout} secs\n")

    async def _first_frame(self) -> bytes:
        """The PMDA's first PDU, undecoded (dbpmda names what came by its
        header).

        Raises:
            EOFError: the PMDA ended first.
            _IllegalLength: a header whose length is shorter than a header.
        """
        assert self.client is not None
        reader = self.client.reader
        while True:
            try:
                frame = reader.next_frame()
            except WireFormatError:
                head = reader.peek_header()
                length = 0 if head is None else head[0] - (1 << 32 if head[0] >= 1 << 31 else 0)
                if length < HEADER_SIZE:
                    raise _IllegalLength(length) from None
                # longer than we take (or a type that is no PDU's): libpcp
                # waits for that much body, until its time is up
                await trio.sleep_forever()
            if frame is not None:
                return frame
            data = await self.client.stream.receive_some(65536)
            if not data:
                raise EOFError("PMDA closed the channel")
            reader.receive_data(data)

    async def close(self) -> None:
        """Say goodbye to the PMDA (PM_ERR_NOTCONN, as pmcd does) and reap it."""
        if self.client is not None:
            try:
                await self.client.send(ErrorPdu(PmErr.NOTCONN))
            except _BROKEN:
                pass
            await self.client.aclose()
            self.client = None
        if self.process is not None:
            with trio.move_on_after(5):
                await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
            self.process = None

    # -- the exchange
    async def send(self, pdu: Pdu) -> bool:
        """Send a PDU that has no reply; False if the PMDA is gone."""
        assert self.client is not None
        try:
            await self.client.send(pdu)
        except _BROKEN:
            return False
        return True

    async def request(self, pdu: Pdu) -> Pdu | None:
        """Send ``pdu`` and wait for the reply; None if the PMDA is gone."""
        assert self.client is not None
        try:
            await self.client.send(pdu)
            return await self.client.receive(timeout=None)
        except EOFError:
            return None
        except _BROKEN:
            return None

    async def send_profile_if_changed(self) -> bool:
        """The profile before a request that uses it, if it changed since it
        was last sent; False (said) if the PMDA is gone."""
        if self.profile_changed:
            if not await self.send(self.profile.pdu()):
                self.out.p("Error: __pmSendProfile() failed: Broken pipe")
                return False
            self.profile_changed = False
        return True
