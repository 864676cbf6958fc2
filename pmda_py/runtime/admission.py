"""Who may be pmcd on a socket, and how refusals are logged.

A peer is admitted when its uid is root's, the PCP user's or ours
(:func:`allowed_uids`) and it answers our CREDS with pmcd's in time
(:func:`await_creds`), checked before any PDU.

On a unix socket the peer's uid comes from SO_PEERCRED.  On ``-i``/``-6``
the kernel says who owns the connecting socket too: the connection's other
end is a line of ``/proc/net/tcp`` (``tcp6``) whose local address is the
peer's (address, port) and whose remote address is ours, with the uid of the
process that created it (:func:`tcp_peer_uid`).  A peer not found there (on
another host, or gone) is refused.

Refusals are logged through :class:`RefusalLog`: one line per (event, peer
uid or host, kind of reason), then at most one counted summary every
``interval`` seconds, so a flood of connections costs a few lines, not one
each.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import time
from collections.abc import Sequence
from typing import Callable

import attrs
import structlog
import trio

from pmda_py.errors import WireFormatError
from pmda_py.pcpversion import pcp_conf
from pmda_py.session import CLOSED, NEED_DATA, HandshakeError, Session

__all__ = [
    "PeerCredentials",
    "RefusalLog",
    "allowed_uids",
    "await_creds",
    "peer_credentials",
    "reason_kind",
    "tcp_peer_uid",
    "tcp_peer_uids",
    "user_name",
]

log = structlog.get_logger("pmda_py.runtime")

#: /proc/net/tcp's TIME_WAIT and LISTEN states: never the live other end
_TIME_WAIT, _LISTEN = b"06", b"0A"
#: lines read from /proc/net/tcp at most (a bound on one lookup's cost)
MAX_PROC_LINES = 1 << 20


def _proc_address(family: int, host: str, port: int) -> bytes:
    """An address as /proc/net/tcp{,6} prints it: the address's 32-bit
    words in host byte order, %08X each, then ``:PORT`` in %04X."""
    packed = socket.inet_pton(family, host.split("%", 1)[0])
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return ("".join(f"{w:08X}" for w in words) + f":{port:04X}").encode()


def tcp_peer_uid(
    family: int, peer: tuple[object, ...], local: tuple[object, ...], *, proc: str = "/proc/net"
) -> int | None:
    """The uid owning the socket at the other end of the TCP connection
    from ``peer`` to ``local`` (both as accept()/getsockname() give them),
    or None when it is not on this host (or not found)."""
    return tcp_peer_uids(family, [(peer, local)], proc=proc)[0]


def tcp_peer_uids(
    family: int, connections: Sequence[tuple[tuple[object, ...], tuple[object, ...]]], *, proc: str = "/proc/net"
) -> list[int | None]:
    """:func:`tcp_peer_uid` of each (peer, local) of ``connections``, in
    one read of /proc/net/tcp (or tcp6) for all of them."""
    wanted: dict[tuple[bytes, bytes], list[int]] = {}
    for i, (peer, local) in enumerate(connections):
        try:
            (peer_host, peer_port), (local_host, local_port) = peer[:2], local[:2]
            if not isinstance(peer_port, int) or not isinstance(local_port, int):
                continue
            key = (_proc_address(family, str(peer_host), peer_port), _proc_address(family, str(local_host), local_port))
        except (OSError, ValueError, TypeError, IndexError):
            continue
        wanted.setdefault(key, []).append(i)
    found: list[int | None] = [None] * len(connections)
    if not wanted:
        return found
    path = os.path.join(proc, "tcp6" if family == socket.AF_INET6 else "tcp")
    try:
        with open(path, "rb") as f:
            f.readline()  # the header
            for n, line in enumerate(f):
                if n >= MAX_PROC_LINES:
                    break
                fields = line.split()
                if len(fields) < 8 or fields[3] in (_TIME_WAIT, _LISTEN):
                    continue
                which = wanted.pop((fields[1], fields[2]), None)
                if which is None:
                    continue
                try:
                    uid = int(fields[7])
                except ValueError:
                    continue
                for i in which:
                    found[i] = uid
                if not wanted:
                    break
    except OSError:
        pass
    return found


def reason_kind(reason: str) -> str:
    """A refusal's reason without its particulars (byte counts, PDU
    heads...): what a repeated refusal is counted under."""
    kind = re.split(r":| \(", reason, maxsplit=1)[0]
    return re.sub(r"\d+(\.\d+)?", "N", kind).strip()


@attrs.define
class _Entry:
    last: float  #: when its last line was written
    count: int = 0  #: refusals since that line, not written
    fields: dict[str, object] = attrs.field(factory=dict)


class RefusalLog:
    """Bounded logging of refused connections (see the module docstring)."""

    #: distinct (event, who, kind) remembered at most; past it one shared entry
    max_keys = 256

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        #: lines written, refusals counted (for tests and the control table)
        self.lines = 0
        self.refusals = 0

    def refused(self, event: str, who: str, reason: str, **fields: object) -> bool:
        """Log ``event`` for a refusal of ``who`` (uid or host) because of
        ``reason``, unless the same was logged less than ``interval``
        seconds ago (then it is counted).  True if a line was written."""
        self.refusals += 1
        now = self.clock()
        key = (event, who, reason_kind(reason))
        entry = self._entries.get(key)
        if entry is None and len(self._entries) >= self.max_keys:
            self._prune(now)
            if len(self._entries) >= self.max_keys:
                key = (event, "*", "*")  # too many kinds of refusal at once: one shared count
                entry = self._entries.get(key)
        if entry is not None and now - entry.last < self.interval:
            entry.count += 1
            entry.fields = {"reason": reason, **fields}
            return False
        repeated = entry.count if entry is not None else 0
        self._entries[key] = _Entry(now)
        extra = {"repeated": repeated, "over_seconds": round(now - entry.last, 1)} if entry and repeated else {}
        log.warning(event, reason=reason, **fields, **extra)
        self.lines += 1
        return True

    def flush(self) -> int:
        """Write the counted summaries due (one per key whose count is not
        zero and whose last line is ``interval`` seconds old); returns how
        many lines were written."""
        now = self.clock()
        written = 0
        for (event, _who, _kind), entry in self._entries.items():
            if entry.count and now - entry.last >= self.interval:
                log.warning(
                    event,
                    **entry.fields,
                    repeated=entry.count,
                    over_seconds=round(now - entry.last, 1),
                    detail="refusals like this one since the last line",
                )
                entry.count, entry.last = 0, now
                written += 1
        self.lines += written
        self._prune(now)
        return written

    def _prune(self, now: float) -> None:
        stale = [k for k, e in self._entries.items() if not e.count and now - e.last >= self.interval]
        for k in stale:
            del self._entries[k]


async def await_creds(stream: trio.abc.Stream, session: Session, timeout: float) -> str | None:
    """Send our CREDS and wait up to ``timeout`` seconds in all (not per
    read) for the peer's; None once pmcd's CREDS came, else why not.

    ``session`` should have ``require_creds``; bytes after the CREDS stay
    in it for :func:`serve_session`."""
    received = 0
    with trio.move_on_after(timeout):
        try:
            await stream.send_all(session.start())
            while True:
                event = session.next_event()
                if event is NEED_DATA:
                    data = await stream.receive_some(4096)
                    received += len(data)
                    session.receive_data(data)
                    continue
                if event is CLOSED:
                    if session.truncated:
                        return f"closed in the middle of its first PDU ({received} bytes)"
                    return "closed without sending CREDS"
                if session.handshake_done and session.peer_creds is not None:
                    return None
                return "no CREDS"  # pragma: no cover - require_creds raises first
        except HandshakeError as err:
            return f"not pmcd: {err}"
        except WireFormatError as err:
            return f"not pmcd: {err}"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as err:
            if isinstance(err.__cause__, ConnectionResetError) or isinstance(err, ConnectionResetError):
                return f"reset without sending CREDS ({received} bytes received)"
            return f"channel error: {err}"
    return f"no CREDS within {timeout:g} s ({received} bytes received)"


@attrs.frozen
class PeerCredentials:
    """Who is at the other end of a unix socket (SO_PEERCRED)."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: trio.socket.SocketType) -> PeerCredentials | None:
    """The credentials of a unix socket's peer (SO_PEERCRED), None if unknown."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, gid = struct.unpack("3i", raw)
    return PeerCredentials(pid, uid, gid)


def allowed_uids() -> dict[int, str]:
    """Who may be pmcd on a unix socket: root, the PCP user, and our own
    uid (a process of our uid can signal or ptrace us anyway)."""
    import pwd

    out = {0: "root"}
    user = pcp_conf().get("PCP_USER", "pcp")
    try:
        out.setdefault(pwd.getpwnam(user).pw_uid, user)
    except KeyError:
        pass
    euid = os.geteuid()
    if euid not in out:
        try:
            out[euid] = pwd.getpwuid(euid).pw_name
        except KeyError:
            out[euid] = str(euid)
    return out


def user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
