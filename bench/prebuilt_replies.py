"""The floor of the pipe benchmarks: a process that does no work at all.

    python bench/prebuilt_replies.py REPLIES.json [--trio] [--splice]

Speaks first (a CREDS PDU, as a PMDA does), then answers each request
whose bytes are a key of REPLIES.json (hex -> hex) with the recorded reply,
using blocking os.read/os.write.  bench/pdu_latency.py records our daemon's
replies and runs this beside it, so its figures show what the pipe and the
process wake-ups cost by themselves.  With ``--trio`` it waits for each
request as our daemon does (a non-blocking read; trio's wait_readable when
the pipe is empty): what trio's event loop adds to the floor.  With
``--splice`` each reply of 64 KiB or more is sent as our daemon sends a large
fast-path reply: spliced into the pipe from a memfd holding it (no copy by
the writer), the floor of that transport.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import sys
from collections.abc import Awaitable, Callable

SPLICE_MIN = 64 * 1024


def in_memfd(reply: bytes) -> int:
    """A memfd holding ``reply`` (never written again: no hold needed)."""
    fd = os.memfd_create("reply")
    os.write(fd, reply)
    return fd


async def serve(
    replies: dict[bytes, bytes], read: Callable[[int], Awaitable[bytes]], memfds: dict[bytes, int] | None = None
) -> int:
    os.write(1, struct.pack("!iiiii", 20, 0x700C, 0, 1, 0x01000000))  # CREDS: one credential
    while True:
        head = b""
        while len(head) < 4:
            chunk = await read(4 - len(head))
            if not chunk:
                return 0
            head += chunk
        length = struct.unpack("!i", head)[0]
        body = head
        while len(body) < length:
            chunk = await read(length - len(body))
            if not chunk:
                return 0
            body += chunk
        reply = replies.get(body)
        if reply is None:
            continue  # CREDS and PROFILE from the driver: no reply
        fd = memfds.get(body) if memfds else None
        if fd is not None:
            sent = 0
            while sent < len(reply):
                try:
                    sent += os.splice(fd, 1, len(reply) - sent, offset_src=sent)
                except BlockingIOError:
                    select.select([], [1], [])
            continue
        view = memoryview(reply)
        while view:
            view = view[os.write(1, view) :]


async def blocking_read(n: int) -> bytes:
    return os.read(0, n)


def main() -> int:
    with open(sys.argv[1], encoding="ascii") as f:
        replies = {bytes.fromhex(k): bytes.fromhex(v) for k, v in json.load(f).items()}
    try:
        fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ, as the daemon does
    except OSError:
        pass
    memfds = None
    if "--splice" in sys.argv[2:]:
        memfds = {req: in_memfd(rep) for req, rep in replies.items() if len(rep) >= SPLICE_MIN}
    if "--trio" not in sys.argv[2:]:
        coro = serve(replies, blocking_read, memfds)
        try:
            coro.send(None)  # never suspends: plain blocking I/O
        except StopIteration as done:
            return int(done.value)
        raise RuntimeError("the blocking floor suspended")

    import trio

    os.set_blocking(0, False)

    async def trio_read(n: int) -> bytes:
        while True:
            try:
                return os.read(0, n)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(0)

    return trio.run(serve, replies, trio_read)


if __name__ == "__main__":
    raise SystemExit(main())
