"""Socket modes (``-i`` inet, ``-6`` ipv6, ``-u`` unix): :class:`SocketServer`
serves pmcd, not whoever connects first.

The listener stays open; every connection gets our CREDS and must answer
with pmcd's CREDS within the creds timeout, from an allowed uid, else it is
dropped, logged once per peer and reason (:mod:`pmda_py.runtime.admission`).
One pmcd session at a time: a second pmcd is refused (pmcd only reconnects
an agent it has lost, so it never needs to take over).  When the session
ends the daemon exits (pmcd started it, as libpcp_pmda's agents do), or with
``--standalone`` goes back to listening with its tables intact, re-creating
its unix socket when pmcd removes it (woken by inotify on its directory,
through ctypes).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import tempfile
from collections.abc import Awaitable
from typing import Callable

import attrs
import structlog
import trio

from pmda_py.config import Config
from pmda_py.inotify import IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF, IN_MOVED_FROM, watch_directory
from pmda_py.pcpversion import pcp_conf
from pmda_py.runtime.admission import (
    RefusalLog,
    allowed_uids,
    await_creds,
    peer_credentials,
    tcp_peer_uids,
    user_name,
)
from pmda_py.runtime.pump import Active, serve_session
from pmda_py.session import Session

__all__ = ["Listener", "PeerCheck", "SocketServer", "listen_address"]

log = structlog.get_logger("pmda_py.runtime")


@attrs.frozen
class Listener:
    """A listening socket, and for a unix socket its file's (dev, ino):
    the file is ours while it has them."""

    sock: trio.socket.SocketType
    ident: tuple[int, int] | None = None


@attrs.frozen
class PeerCheck:
    """What the admission check found out about a connection before any PDU."""

    peer: str  #: a name for the peer, as logged
    who: str  #: ``uid=N``, or its host where the uid is unknown: what refusals are counted by
    refusal: str | None  #: why it is refused, or None


def listen_address(config: Config) -> tuple[str, int]:
    port = socket.getservbyname(config.address) if not config.address.isdigit() else int(config.address)
    loopback = "::1" if config.transport == "ipv6" else "127.0.0.1"
    return config.bind_address or loopback, port


async def _bind_unix(path: str, username: str | None) -> Listener:
    """A listening unix socket at ``path``, with the file's (dev, ino).

    A socket left at ``path`` (a previous run's) is replaced; anything else
    there (a file, a directory, a symlink: a mistyped ``-u``, or a name
    planted in a directory the PCP user owns) is left alone and refused: the
    agent runs as root here.

    The socket is bound in a private directory (mode 0700) made beside
    ``path``, given its mode and owner there, and renamed into place: the
    directory of ``path`` may be writable by others, who could otherwise
    swap the new name for a link between the ``bind`` and the ``chmod`` and
    ``chown`` that follow it (and have root give them any file).  They can
    also rename the private directory itself and plant another of its name,
    so after ``mkdtemp`` it is reached only through a descriptor, checked
    to be ours, never by its name again."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise OSError(errno.EEXIST, "exists and is not a socket (left alone)", path)
        if _listened_on(path):
            raise OSError(errno.EADDRINUSE, "in use: a running process listens on it (left alone)", path)
    private = tempfile.mkdtemp(prefix=".", dir=os.path.dirname(path) or ".")
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dirfd = -1
    bound = False
    try:
        dirfd = os.open(private, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
        own = os.fstat(dirfd)
        if own.st_uid != os.geteuid() or stat.S_IMODE(own.st_mode) != 0o700:
            raise OSError(errno.EPERM, "the private directory made for the socket was replaced", private)
        if _names_descriptors():  # through the descriptor: whatever now has the directory's name
            await sock.bind(f"{_PROC_FD}/{dirfd}/s")
        else:
            await sock.bind(os.path.join(private, "s"))
        bound = True
        st = os.stat("s", dir_fd=dirfd, follow_symlinks=False)
        if not stat.S_ISSOCK(st.st_mode):  # (bound by name in a directory swapped for ours)
            raise OSError(errno.EPERM, "the private directory made for the socket was replaced", private)
        os.chmod("s", 0o660, dir_fd=dirfd)  # (in our 0700 directory: no one else can put a link there)
        if os.geteuid() == 0:
            # as libpcp_pmda does: the socket belongs to the PCP user (or -U's)
            owner = username or pcp_conf().get("PCP_USER", "pcp")
            try:
                import pwd

                pw = pwd.getpwnam(owner)
                os.chown("s", pw.pw_uid, pw.pw_gid, dir_fd=dirfd, follow_symlinks=False)
            except (KeyError, OSError) as err:
                log.warning("chown_failed", path=path, user=owner, error=str(err))
        sock.listen(16)
        st = os.stat("s", dir_fd=dirfd, follow_symlinks=False)
        os.rename("s", path, src_dir_fd=dirfd)  # (replaces a stale socket; never follows a link)
    except BaseException:
        sock.close()
        if bound and dirfd >= 0:
            with contextlib.suppress(OSError):
                os.unlink("s", dir_fd=dirfd)
        raise
    finally:
        if dirfd >= 0:
            _remove_private(private, dirfd)
            os.close(dirfd)
        else:
            with contextlib.suppress(OSError):
                os.rmdir(private)
    return Listener(sock, (st.st_dev, st.st_ino))


#: where a descriptor on a directory can be named as a path (Linux)
_PROC_FD = "/proc/self/fd"
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _listened_on(path: str) -> bool:
    """Whether a process listens on the unix socket at ``path`` (a
    connection is taken, or its queue is full), not a socket a previous
    run left there (refused)."""
    parent = -1
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.setblocking(False)
        where = path
        if len(os.fsencode(path)) >= 108 and _names_descriptors():  # (too long for an address)
            parent = os.open(os.path.dirname(path) or ".", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
            where = f"{_PROC_FD}/{parent}/{os.path.basename(path)}"
        probe.connect(where)
    except (BlockingIOError, InterruptedError):
        return True  # its queue is full: somebody listens
    except OSError:
        return False  # ECONNREFUSED: nobody listens there any more
    else:
        return True
    finally:
        probe.close()
        if parent >= 0:
            os.close(parent)


def _names_descriptors() -> bool:
    """Whether a descriptor can be named by a path (``/proc/self/fd/N``)."""
    return os.path.isdir(_PROC_FD)


def _remove_private(private: str, dirfd: int) -> None:
    """Remove the private directory if the name still has it (someone may
    have renamed it away and put another of the same name there)."""
    try:
        here, ours = os.stat(private, follow_symlinks=False), os.fstat(dirfd)
        if (here.st_dev, here.st_ino) == (ours.st_dev, ours.st_ino):
            os.rmdir(private)
    except OSError:
        pass


async def _listen(config: Config) -> Listener:
    if config.transport == "unix":
        return await _bind_unix(config.address, config.username)
    family = socket.AF_INET6 if config.transport == "ipv6" else socket.AF_INET
    host, port = listen_address(config)
    sock = trio.socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        await sock.bind((host, port))
        sock.listen(16)
    except BaseException:
        sock.close()
        raise
    return Listener(sock)


@attrs.define(eq=False)
class _Lookup:
    """A connection waiting for its peer's uid (/proc/net/tcp)."""

    peer: tuple[object, ...]
    local: tuple[object, ...]
    uid: int | None = None
    done: bool = False


@attrs.define(eq=False)
class _Handshake:
    """A connection waiting for pmcd's CREDS."""

    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    evicted: bool = False


@attrs.define(eq=False)
class _Live:
    """The pmcd session being served."""

    pmcd_pid: int
    peer: str
    done: trio.Event = attrs.field(factory=trio.Event)


class SocketServer:
    """Socket modes: admit only pmcd, serve one pmcd session at a time.

    Every accepted connection is handled in its own task, so an idle or
    slow peer never delays pmcd's connection: unix peers are checked with
    SO_PEERCRED first, then our CREDS are sent and pmcd's awaited for
    ``config.creds_timeout`` seconds in all.  At most ``max_pending``
    connections wait at once; one more evicts the oldest.  A valid pmcd
    while a session is live waits up to ``takeover_grace`` seconds for that
    session to end (a restarted pmcd's old channel may still be draining),
    else is refused.  :attr:`finished` is set when a session ends and the
    daemon is not ``standalone``.
    """

    max_pending = 8
    #: connections accepted and not yet through the peer check (a uid lookup in
    #: /proc/net/tcp on -i/-6) at most; past it the listen queue holds the next ones
    max_checking = 32
    takeover_grace = 1.0
    socket_check_interval = 1.0
    #: seconds between two lines about the same kind of refusal of the same peer
    refusal_log_interval = 10.0

    def __init__(
        self,
        config: Config,
        active: Active,
        *,
        on_ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.active = active
        self.on_ready = on_ready
        self.standalone = config.standalone
        self.finished = trio.Event()
        self.reason = "eof"
        self.sessions = 0
        self._sock: trio.socket.SocketType | None = None
        self._ident: tuple[int, int] | None = None
        self._pending: list[_Handshake] = []
        self._live: _Live | None = None
        #: refused connections, logged once per (event, peer, reason) then counted
        self.refusals = RefusalLog(self.refusal_log_interval)
        #: one /proc/net/tcp read at a time (a flood of connections costs one thread),
        #: for all the connections waiting when it starts
        self._lookups = trio.Lock()
        self._wanted: list[_Lookup] = []
        #: connections accepted and still in the peer check (at most ``max_checking``)
        self.checking = 0
        self._check_done = trio.Event()

    async def open(self) -> None:
        """Bind and listen (before privileges are dropped)."""
        listener = await _listen(self.config)
        self._sock, self._ident = listener.sock, listener.ident

    def close(self) -> None:
        """Close the listener; remove our unix socket file if it is still ours."""
        if self._sock is not None:
            self._sock.close()
        if self.config.transport == "unix" and self._ident is not None:
            try:
                st = os.stat(self.config.address)
                if (st.st_dev, st.st_ino) == self._ident:
                    os.unlink(self.config.address)
            except OSError:
                pass

    async def serve(self) -> None:
        """Accept connections until cancelled."""
        async with trio.open_nursery() as nursery:
            if self.standalone and self.config.transport == "unix":
                nursery.start_soon(self._keep_socket_file)
            nursery.start_soon(self._flush_refusals)
            while True:
                await self._room_to_check()
                sock = self._sock
                assert sock is not None
                try:
                    conn, addr = await sock.accept()
                except trio.ClosedResourceError:
                    if sock is self._sock:
                        raise
                    continue  # the socket file was re-created: accept on the new listener
                except OSError as err:
                    if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        log.error("accept_failed", error=str(err), action="retrying in 0.1 s")
                        await trio.sleep(0.1)
                    continue
                self.checking += 1
                nursery.start_soon(self._admit, conn, addr)

    async def _room_to_check(self) -> None:
        """Wait until fewer than ``max_checking`` connections are in the
        peer check: a flood of connections costs the agent that many
        descriptors, and waits in the kernel's listen queue meanwhile
        (logged once per interval, as refusals are)."""
        while self.checking >= self.max_checking:
            self.refusals.refused(
                "accept_paused",
                "*",
                f"{self.checking} connections are waiting for their peer check",
                transport=self.config.transport,
                max_checking=self.max_checking,
            )
            self._check_done = trio.Event()
            await self._check_done.wait()

    def _checked(self) -> None:
        self.checking -= 1
        self._check_done.set()

    async def _flush_refusals(self) -> None:
        while True:
            await trio.sleep(self.refusals.interval)
            self.refusals.flush()

    # ------------------------------------------------------------ admission

    async def _peer(self, conn: trio.socket.SocketType, addr: object) -> PeerCheck:
        """Who the peer of a connection accepted from ``addr`` is, and
        whether it is refused before any PDU.  Unix sockets: SO_PEERCRED;
        inet/ipv6: the owner of the connecting socket in /proc/net/tcp{,6}."""
        if self.config.transport != "unix":
            if isinstance(addr, tuple) and len(addr) >= 2:
                host = f"[{addr[0]}]" if ":" in str(addr[0]) else str(addr[0])
                peer = f"{host}:{addr[1]}"
            else:
                host = peer = str(addr)
            try:
                local = conn.getsockname()
            except OSError:
                return PeerCheck(peer, host, "its connection is gone")
            uid = None
            if isinstance(addr, tuple):
                uid = await self._peer_uid(conn.family, addr, local)
            if uid is None:
                return PeerCheck(
                    peer, host, "no local socket owns the connection (/proc/net/tcp): not pmcd on this host"
                )
            peer = f"{peer},uid={uid}"
        else:
            creds = peer_credentials(conn)
            if creds is None:
                return PeerCheck("unix:?", "?", "peer credentials (SO_PEERCRED) unavailable")
            uid = creds.uid
            peer = f"unix:pid={creds.pid},uid={uid}"
        allowed = allowed_uids()
        if uid not in allowed:
            names = ", ".join(sorted(set(allowed.values())))
            return PeerCheck(peer, f"uid={uid}", f"uid {uid} ({user_name(uid)}) is not one of {names}")
        return PeerCheck(peer, f"uid={uid}", None)

    async def _peer_uid(self, family: int, peer: tuple[object, ...], local: tuple[object, ...]) -> int | None:
        """The uid owning the connecting socket (:func:`tcp_peer_uids`): the
        connections that wait while a read of /proc/net/tcp runs are all
        answered by the next one."""
        want = _Lookup(peer, local)
        self._wanted.append(want)
        async with self._lookups:
            if not want.done:
                batch, self._wanted = self._wanted, []
                try:
                    found = await trio.to_thread.run_sync(tcp_peer_uids, family, [(w.peer, w.local) for w in batch])
                    for w, uid in zip(batch, found):
                        w.uid = uid
                finally:
                    for w in batch:
                        w.done = True
        return want.uid

    async def _admit(self, conn: trio.socket.SocketType, addr: object) -> None:
        stream = trio.SocketStream(conn)
        transport = self.config.transport
        refusals = self.refusals
        try:
            try:
                check = await self._peer(conn, addr)
            finally:
                self._checked()
            peer, who = check.peer, check.who
            if check.refusal is not None:
                refusals.refused("peer_refused", who, check.refusal, transport=transport, peer=peer)
                return
            session = Session(pid=os.getpid(), flags=0, require_creds=True)
            entry = _Handshake()
            self._pending.append(entry)
            if len(self._pending) > self.max_pending:
                oldest = self._pending.pop(0)
                oldest.evicted = True
                oldest.scope.cancel()
            why: str | None = "cancelled"
            try:
                with entry.scope:
                    why = await await_creds(stream, session, self.config.creds_timeout)
            finally:
                if entry in self._pending:
                    self._pending.remove(entry)
            if entry.evicted:
                why = f"evicted: more than {self.max_pending} connections waiting for CREDS"
            if why is not None:
                refusals.refused("peer_dropped", who, why, transport=transport, peer=peer)
                return
            assert session.peer_creds is not None
            pmcd_pid = session.peer_creds.from_
            if self._live is not None:
                with trio.move_on_after(self.takeover_grace):
                    await self._live.done.wait()
            if self._live is not None or self.finished.is_set():
                live = self._live
                refusals.refused(
                    "pmcd_refused",
                    who,
                    (
                        f"a pmcd session is live (pmcd pid {live.pmcd_pid}, {live.peer})"
                        if live is not None
                        else "the daemon is exiting"
                    ),
                    transport=transport,
                    peer=peer,
                    pmcd_pid=pmcd_pid,
                )
                return
            await self._serve(stream, session, peer, pmcd_pid)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _serve(self, stream: trio.SocketStream, session: Session, peer: str, pmcd_pid: int) -> None:
        live = self._live = _Live(pmcd_pid, peer)
        self.sessions += 1
        log.info(
            "session_start",
            transport=self.config.transport,
            peer=peer,
            pmcd_pid=pmcd_pid,
            session=self.sessions,
            pdu_version=session.peer_creds.version if session.peer_creds else None,
        )
        reason = "cancelled"
        try:
            reason = await serve_session(
                stream, session, self.active, notready=self.config.notready, on_ready=self.on_ready
            )
        finally:
            for context in session.contexts:  # that pmcd's clients are gone
                self.active.dispatcher.end_context(context)
            self._live = None
            live.done.set()
        log.info(
            "session_end",
            reason=reason,
            pmcd_pid=pmcd_pid,
            session=self.sessions,
            action="listening" if self.standalone else "exiting",
        )
        if not self.standalone:
            self.reason = reason
            self.finished.set()

    # ------------------------------------------------------- unix socket file

    async def _keep_socket_file(self) -> None:
        """pmcd removes an agent's unix socket when it stops or drops the
        agent (CleanupAgent, ShutdownAgent): put a new one in its place at
        once, so the next pmcd (which may start a few milliseconds later)
        can connect.  Woken by inotify on the socket's directory where
        there is one, and every ``socket_check_interval`` seconds anyway.
        A file someone else put there is left alone."""
        path = self.config.address
        watch = _DirectoryWatch.open(_parent_dir(path))
        complained = False
        try:
            while True:
                if watch is not None:
                    with trio.move_on_after(self.socket_check_interval):
                        await watch.wait()
                else:
                    await trio.sleep(self.socket_check_interval)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    continue
                else:
                    if (st.st_dev, st.st_ino) != self._ident and not complained:
                        log.warning("socket_replaced", path=path, action="not ours: leaving it alone")
                        complained = True
                    continue
                try:
                    listener = await _bind_unix(path, None)
                except OSError as err:
                    if not complained:
                        log.error("socket_recreate_failed", path=path, error=str(err), action="retrying")
                        complained = True
                    continue
                old, self._sock, self._ident = self._sock, listener.sock, listener.ident
                complained = False
                if old is not None:
                    old.close()
                log.info("socket_recreated", path=path, reason="removed (pmcd removes it when it stops)")
        finally:
            if watch is not None:
                watch.close()


def _parent_dir(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


class _DirectoryWatch:
    """inotify on a directory (Linux, through ctypes): :meth:`wait` returns
    when a name in it is removed or renamed away."""

    MASK = IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, directory: str) -> _DirectoryWatch | None:
        """None where inotify is not available (the caller polls)."""
        fd = watch_directory(directory, cls.MASK)
        return None if fd is None else cls(fd)

    async def wait(self) -> None:
        await trio.lowlevel.wait_readable(self.fd)
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.fd)
        os.close(self.fd)
