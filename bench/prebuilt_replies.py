"""The floor of the pipe benchmarks: a process that does no work at all.

    python bench/prebuilt_replies.py REPLIES.json

Speaks first (a CREDS PDU, as a PMDA does), then answers each request
whose bytes are a key of REPLIES.json (hex -> hex) with the recorded reply,
using blocking os.read/os.write.  bench/pdu_latency.py records our daemon's
replies and runs this beside it, so its figures show what the pipe and the
process wake-ups cost by themselves.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import sys


def main() -> int:
    with open(sys.argv[1], encoding="ascii") as f:
        replies = {bytes.fromhex(k): bytes.fromhex(v) for k, v in json.load(f).items()}
    try:
        fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ, as the daemon does
    except OSError:
        pass
    os.write(1, struct.pack("!iiiii", 20, 0x700C, 0, 1, 0x01000000))  # CREDS: one credential
    while True:
        head = b""
        while len(head) < 4:
            chunk = os.read(0, 4 - len(head))
            if not chunk:
                return 0
            head += chunk
        length = struct.unpack("!i", head)[0]
        body = head
        while len(body) < length:
            chunk = os.read(0, length - len(body))
            if not chunk:
                return 0
            body += chunk
        reply = replies.get(body)
        if reply is None:
            continue  # CREDS and PROFILE from the driver: no reply
        view = memoryview(reply)
        while view:
            view = view[os.write(1, view) :]


if __name__ == "__main__":
    raise SystemExit(main())
