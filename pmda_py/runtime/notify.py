"""Telling systemd the agent is ready (``Type=notify``): once a standalone
socket-mode daemon (its own unit, ``systemd/pypmda.service``) listens,
``READY=1`` goes to ``$NOTIFY_SOCKET`` (the protocol of sd_notify(3),
written here: one datagram on a unix socket, a name starting with ``@``
being in the abstract namespace), so a pmcd ordered after the unit finds the
agent's socket in place.  Best effort: no ``NOTIFY_SOCKET``, or a send that
fails, costs nothing but a log line.

An agent pmcd starts inherits pmcd's own ``NOTIFY_SOCKET`` (pmcd.service is
``Type=notify`` with ``NotifyAccess=all``, and pmcd starts its agents before
it says it is ready): a word from the agent there would speak for pmcd's
unit.  Such an agent never notifies, and :func:`forget_notify_socket` takes
the variable away from it and from whatever it starts."""

from __future__ import annotations

import os
import socket

import structlog

__all__ = ["forget_notify_socket", "notify_ready"]

log = structlog.get_logger("pmda_py.runtime")


def notify_ready(status: str) -> bool:
    """Send ``READY=1`` (and ``STATUS=status``) to systemd's notification
    socket, if this process was given one; whether it was sent.  The
    variable is removed, so no child of ours (an OpenMetrics worker, a
    script) speaks for the agent."""
    address = os.environ.pop("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address[0] == "@":
        address = "\0" + address[1:]
    elif not address.startswith("/"):
        log.warning("notify_failed", address=address, error="not a unix socket path")
        return False
    message = f"READY=1\nSTATUS={status}".encode("utf-8", "replace")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.settimeout(1.0)
            sock.sendto(message, address)
    except OSError as err:
        log.warning("notify_failed", address=address.replace("\0", "@"), error=str(err))
        return False
    return True


def forget_notify_socket() -> None:
    """Drop an inherited ``NOTIFY_SOCKET`` (an agent started by pmcd: the
    variable is pmcd's unit's, see the module)."""
    os.environ.pop("NOTIFY_SOCKET", None)
