"""Protocol fuzzer: drive a running PMDA with valid, truncated, oversized,
mis-ordered and random PDUs, and check every answer.

For every input the expected behaviour is known before it is sent:

* a request (FETCH, DESC_REQ, INSTANCE_REQ, TEXT_REQ, RESULT, PMNS_*,
  LABEL_REQ) that decodes gets exactly one reply of its reply type or an
  ERROR; a FETCH reply has as many value sets as PMIDs asked;
* a request that does not decode gets ``ERROR(PM_ERR_IPC)``;
* PROFILE, ATTR, ERROR, CREDS, CONTROL_REQ and unknown types get nothing;
* an impossible length (< 12, or above the PMDA's limit) or a negative type
  makes the PMDA close the channel, as PCP's own agents do.

After each batch a sentinel DESC_REQ is sent; the replies read up to its
answer must be exactly the expected ones, in order, each within the
timeout (a hang is a failure).  The PMDA's RSS is sampled to show memory
stays bounded.

    python -m pmda_py.testing.fuzz --inputs 100000 [--transport pipe|unix] [--seed N] -- CMD...
"""

from __future__ import annotations

import argparse
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Sequence

import attrs

from pmda_py.errors import PmErr, WireFormatError
from pmda_py.pmapi import PM_ID_NULL, indom, pmid
from pmda_py.tables.control import rss_kb
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
    ResultPdu,
    TextReqPdu,
    ValueSet,
    decode_pdu,
)

__all__ = ["Case", "FuzzFailure", "Fuzzer", "generate", "main"]

_REPLIES: dict[int, set[int]] = {
    PduType.FETCH: {PduType.RESULT},
    PduType.DESC_REQ: {PduType.DESC},
    PduType.INSTANCE_REQ: {PduType.INSTANCE},
    PduType.TEXT_REQ: {PduType.TEXT},
    PduType.RESULT: set(),
    PduType.PMNS_IDS: {PduType.PMNS_NAMES},
    PduType.PMNS_NAMES: {PduType.PMNS_IDS},
    PduType.PMNS_CHILD: {PduType.PMNS_NAMES},
    PduType.PMNS_TRAVERSE: {PduType.PMNS_NAMES},
    PduType.LABEL_REQ: {PduType.LABEL},
}


class FuzzFailure(AssertionError):
    """The PMDA broke a rule; the message says which input and how."""


@attrs.frozen
class Case:
    """One input and what must come back."""

    data: bytes
    kind: str  #: short description for reports
    expect: str  #: "reply" | "ipc" | "none" | "close"
    request_type: int = 0
    numpmid: int = 0


def _expect_for(raw: bytes, kind: str) -> Case:
    _length, type_ = struct.unpack_from("!ii", raw) if len(raw) >= 8 else (len(raw), -1)
    if type_ in _REPLIES:
        try:
            pdu = decode_pdu(raw)
        except WireFormatError:
            return Case(raw, kind, "ipc", type_)
        n = len(pdu.pmids) if isinstance(pdu, FetchPdu) else 0
        return Case(raw, kind, "reply", type_, n)
    return Case(raw, kind, "none", type_)


def _names(rng: random.Random) -> str:
    pool = [
        "simple",
        "simple.numfetch",
        "simple.time",
        "simple.time.user",
        "simple.color",
        "nonesuch",
        "simple..x",
        "",
        "ctl",
        "ctl.pid",
        "simple.numfetch.x",
        "\u00e9t\u00e9",
        "a" * 300,
    ]
    return rng.choice(pool)


def _valid(rng: random.Random, domain: int) -> bytes:
    k = rng.randrange(14)
    p = pmid(domain, rng.choice([0, 0, 1, 2, 9, 4090]), rng.choice([0, 1, 2, 3, 4, 9]))
    ind = indom(domain, rng.choice([0, 1, 7, 4090]))
    frm = rng.choice([0, 0, 1, 2, 63])
    if k == 0:
        return FetchPdu(
            tuple(p if rng.random() < 0.7 else rng.getrandbits(32) for _ in range(rng.randint(1, 6))), from_=frm
        ).encode()
    if k == 1:
        return DescReqPdu(rng.choice([p, rng.getrandbits(32)]), from_=frm).encode()
    if k == 2:
        form = rng.randrange(3)
        if form == 0:
            return InstanceReqPdu(ind, from_=frm).encode()
        if form == 1:
            return InstanceReqPdu(ind, rng.choice([0, 1, 2, 99, -5]), from_=frm).encode()
        return InstanceReqPdu(ind, -1, rng.choice(["red", "green", "sec", "nope", "x" * 100]), from_=frm).encode()
    if k == 3:
        return TextReqPdu(rng.choice([p, ind]), rng.choice([5, 6, 9, 10, 0, 3, 12, 255]), from_=frm).encode()
    if k == 4:
        vs = (
            ValueSet.of(p, rng.choice([0, 1, 5, 6]), [(rng.choice([-1, 0, 1, 2, 7]), 0)])
            if rng.random() < 0.5
            else ValueSet.of(p, 1, [(-1, rng.getrandbits(32))])
        )
        try:
            return ResultPdu((vs,), from_=frm).encode()
        except (TypeError, ValueError, struct.error):
            return ResultPdu((ValueSet.of(p, 1, [(-1, 1)]),), from_=frm).encode()
    if k == 5:
        return PmnsNamesPdu((_names(rng),), from_=frm).encode()
    if k == 6:
        return PmnsIdsPdu((rng.choice([p, PM_ID_NULL, rng.getrandbits(32)]),), 0, from_=frm).encode()
    if k == 7:
        return PmnsChildPdu(_names(rng), rng.randint(0, 1), from_=frm).encode()
    if k == 8:
        return PmnsTraversePdu(_names(rng), 0, from_=frm).encode()
    if k == 9:
        t = rng.choice([1, 2, 4, 8, 16, 32, 0, 64, 6])
        ident = {2: 0xFFFFFFFF, 4: ind, 32: ind}.get(t, p)
        return LabelReqPdu(ident, t, from_=frm).encode()
    if k == 10:
        entries = tuple(
            ProfileEntry(
                rng.choice([ind, indom(domain, 0)]),
                rng.randint(0, 1),
                tuple(rng.randint(-2, 3) for _ in range(rng.randint(0, 3))),
            )
            for _ in range(rng.randint(0, 2))
        )
        return ProfilePdu(rng.randint(0, 3), rng.randint(0, 1), entries, from_=frm).encode()
    if k == 11:
        return AttrPdu(rng.choice([11, 12, 14, 15, 5, 99]), rng.randbytes(rng.randint(0, 12)), from_=frm).encode()
    if k == 12:
        return ErrorPdu(rng.choice([PmErr.NOTCONN, PmErr.NOTCONN, 0, -1]), from_=frm).encode()
    return CredsPdu.cversion(rng.choice([0, 4]), from_=frm).encode()  # mis-ordered CREDS


def _mutate(rng: random.Random, raw: bytes) -> tuple[bytes, str]:
    b = bytearray(raw)
    how = rng.randrange(6)
    if how == 0 and len(b) > 12:  # bit flips in the body
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(12, len(b))
            b[k] ^= 1 << rng.randrange(8)
        return bytes(b), "bitflip"
    if how == 1 and len(b) > 12:  # truncated body, length adjusted
        b = b[: rng.randrange(12, len(b))]
        struct.pack_into("!i", b, 0, len(b))
        return bytes(b), "truncated"
    if how == 2:  # junk appended, length adjusted
        b += rng.randbytes(rng.randint(1, 40))
        struct.pack_into("!i", b, 0, len(b))
        return bytes(b), "extended"
    if how == 3 and len(b) >= 16:  # a count or length field blown up
        off = rng.randrange(12, len(b) - 3) & ~3
        struct.pack_into("!i", b, off, rng.choice([-1, 0x7FFFFFFF, 0x10000, -0x80000000, 1 << 20]))
        return bytes(b), "huge-count"
    if how == 4:  # random body for a random known type
        body = rng.randbytes(rng.randint(0, 64))
        t = rng.choice([*list(_REPLIES), PduType.PROFILE, PduType.ATTR, PduType.ERROR])
        return struct.pack("!iii", 12 + len(body), t, 0) + body, "random-body"
    body = rng.randbytes(rng.randint(0, 32))  # unknown type
    return struct.pack(
        "!iii", 12 + len(body), rng.choice([0x700A, 0x700B, 0x7014, 0x7099, 0x1234]), 0
    ) + body, "unknown"


def generate(rng: random.Random, domain: int = 253) -> Case:
    """One random non-fatal input."""
    raw = _valid(rng, domain)
    if rng.random() < 0.45:
        raw, kind = _mutate(rng, raw)
    else:
        kind = "valid"
    return _expect_for(raw, kind)


def fatal_cases(max_length: int = 64 * 1024 * 1024) -> list[Case]:
    """Inputs after which PCP's agents (and ours) close the channel."""
    return [
        Case(struct.pack("!iii", 8, PduType.FETCH, 0), "length<12", "close"),
        Case(struct.pack("!iii", -1, PduType.FETCH, 0), "negative length", "close"),
        Case(struct.pack("!iii", max_length + 1, PduType.FETCH, 0), "length>limit", "close"),
        Case(struct.pack("!iii", 0x7FFFFFFF, PduType.DESC_REQ, 0), "length 2^31-1", "close"),
        Case(struct.pack("!iiii", 16, -5, 0, 0), "negative type", "close"),
    ]


class Fuzzer:
    """Talks to one PMDA process over a pipe or a unix socket (blocking I/O
    with deadlines: a PMDA that does not answer in ``timeout`` s is hung)."""

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        transport: str = "pipe",
        sock_path: str | None = None,
        timeout: float = 5.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.timeout = timeout
        self.sock: socket.socket | None = None
        full_env = {**os.environ, **(env or {})}
        if transport == "pipe":
            self.proc = subprocess.Popen(list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=full_env)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.rfd, self.wfd = self.proc.stdout.fileno(), self.proc.stdin.fileno()
        else:
            assert sock_path is not None
            self.proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, env=full_env)
            deadline = time.monotonic() + 10
            while True:
                try:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(sock_path)
                    break
                except OSError as err:
                    s.close()
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        self.proc.kill()
                        self.proc.wait()
                        raise FuzzFailure(f"cannot connect to {sock_path}: {err.strerror or err}") from None
                    time.sleep(0.05)
            self.sock = s
            self.rfd = self.wfd = s.fileno()
        self.buf = bytearray()
        try:
            creds = self.read_pdu()
        except EOFError:
            self.close()
            raise FuzzFailure("the PMDA closed its channel before sending CREDS") from None
        if struct.unpack_from("!i", creds, 4)[0] != PduType.CREDS:
            raise FuzzFailure("the PMDA did not send CREDS first")
        self.write(CredsPdu.cversion(0, from_=1).encode())
        self.sent = 0
        self.replies = 0

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            _, w, _ = select.select([], [self.wfd], [], self.timeout)
            if not w:
                raise FuzzFailure("the PMDA stopped reading (write blocked)")
            n = os.write(self.wfd, view[:65536])
            view = view[n:]

    def read_pdu(self) -> bytes:
        deadline = time.monotonic() + self.timeout
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack_from("!i", self.buf)[0]
                if n < 12:
                    raise FuzzFailure(f"the PMDA sent a PDU of length {n}")
                if len(self.buf) >= n:
                    frame = bytes(self.buf[:n])
                    del self.buf[:n]
                    return frame
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.rfd], [], [], max(0.0, left))
            if not r:
                raise FuzzFailure(f"no reply within {self.timeout}s: the PMDA hangs")
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def rss_kb(self) -> int:
        return rss_kb(self.proc.pid)

    def run_batch(self, cases: Sequence[Case], rng: random.Random, sentinel_pmid: int) -> None:
        stream = b"".join(c.data for c in cases)
        # write in random chunk sizes: PDUs split at arbitrary points
        pos = 0
        while pos < len(stream):
            step = rng.choice([1, 3, 7, 64, 1000, len(stream)])
            self.write(stream[pos : pos + step])
            pos += step
        self.write(DescReqPdu(sentinel_pmid, from_=0).encode())
        self.sent += len(cases) + 1
        for c in cases:
            if c.expect == "none":
                continue
            try:
                frame = self.read_pdu()
            except EOFError:
                raise FuzzFailure(f"the PMDA closed the channel after a {c.kind} input: {c.data[:64].hex()}") from None
            self.replies += 1
            rtype = struct.unpack_from("!i", frame, 4)[0]
            if c.expect == "ipc":
                if frame != ErrorPdu(PmErr.IPC).encode():
                    raise FuzzFailure(
                        f"{c.kind} {c.data[:64].hex()}: expected ERROR(PM_ERR_IPC), got {frame[:24].hex()}"
                    )
                continue
            ok = _REPLIES[c.request_type] | {PduType.ERROR}
            if rtype not in ok:
                raise FuzzFailure(
                    f"{c.kind} request {PduType(c.request_type).name} {c.data[:64].hex()} answered with type {rtype:#x}"
                )
            try:
                reply = decode_pdu(frame)
            except WireFormatError as err:
                raise FuzzFailure(f"the PMDA sent an undecodable reply: {err}: {frame[:64].hex()}") from None
            if isinstance(reply, ResultPdu) and len(reply.vsets) != c.numpmid:
                raise FuzzFailure(f"FETCH of {c.numpmid} PMIDs answered with {len(reply.vsets)} value sets")
        frame = self.read_pdu()
        self.replies += 1
        if struct.unpack_from("!i", frame, 4)[0] not in (PduType.DESC, PduType.ERROR) or (
            len(frame) == 32 and struct.unpack_from("!I", frame, 12)[0] != sentinel_pmid
        ):
            raise FuzzFailure(f"out of order: expected the sentinel's DESC, got {frame[:32].hex()}")

    def expect_close(self, case: Case) -> None:
        self.write(case.data)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                frame = self.read_pdu()
            except EOFError:
                return
            except FuzzFailure:
                break
            raise FuzzFailure(f"{case.kind}: expected a close, got a reply {frame[:24].hex()}")
        raise FuzzFailure(f"{case.kind}: the PMDA neither closed nor answered")

    def close(self) -> int:
        try:
            if self.sock is not None:
                self.sock.close()
            elif self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise FuzzFailure("the PMDA did not exit after EOF") from None


def run_fuzz(
    cmd: Sequence[str],
    inputs: int,
    seed: int,
    *,
    transport: str = "pipe",
    sock_path: str | None = None,
    domain: int = 253,
    batch: int = 50,
    report: bool = False,
) -> dict[str, int]:
    """Send ``inputs`` random inputs in batches; raise FuzzFailure on the first broken rule."""
    rng = random.Random(seed)
    fz = Fuzzer(cmd, transport=transport, sock_path=sock_path)
    kinds: dict[str, int] = {}
    t0 = time.monotonic()
    rss_start = rss_peak = 0
    try:
        done = 0
        while done < inputs:
            cases = [generate(rng, domain) for _ in range(min(batch, inputs - done))]
            for c in cases:
                kinds[f"{c.kind}/{c.expect}"] = kinds.get(f"{c.kind}/{c.expect}", 0) + 1
            fz.run_batch(cases, rng, pmid(domain, 0, 0))
            done += len(cases)
            if done == min(inputs, 2000):
                rss_start = fz.rss_kb()
            rss_peak = max(rss_peak, fz.rss_kb())
            if report and done % 10000 < batch:
                print(
                    f"{done} inputs, {fz.replies} replies, RSS {fz.rss_kb()} kB, {time.monotonic() - t0:.0f}s",
                    flush=True,
                )
        rss_end = fz.rss_kb()
        if fz.close() != 0:
            raise FuzzFailure("the PMDA exited with a non-zero status after EOF")
    except BaseException:
        if fz.proc.poll() is None:
            fz.proc.kill()
            fz.proc.wait()
        raise
    return {
        "inputs": inputs,
        "replies": fz.replies,
        "rss_start_kb": rss_start,
        "rss_end_kb": rss_end,
        "rss_peak_kb": rss_peak,
        "seconds": int(time.monotonic() - t0),
        **kinds,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m pmda_py.testing.fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--inputs", type=int, default=100000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--transport", choices=["pipe", "unix"], default="pipe")
    p.add_argument("--socket", help="unix socket path the command listens on (with --transport unix)")
    p.add_argument("--domain", type=int, default=253)
    p.add_argument("cmd", nargs="+", help="the PMDA command")
    ns = p.parse_args(argv)
    if ns.transport == "unix" and not ns.socket:
        p.error("--transport unix needs --socket PATH")
    if ns.inputs < 0:
        p.error(f"--inputs {ns.inputs}: not a count")
    try:
        res = run_fuzz(
            ns.cmd, ns.inputs, ns.seed, transport=ns.transport, sock_path=ns.socket, domain=ns.domain, report=True
        )
        for k, v in res.items():
            print(f"{k}: {v}")
        for case in fatal_cases():
            fz = Fuzzer(ns.cmd, transport=ns.transport, sock_path=ns.socket)
            fz.expect_close(case)
            fz.close()
            print(f"fatal input '{case.kind}': clean close")
    except FuzzFailure as err:
        print(f"FAIL: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # the command does not start, the socket never answers
        print(f"{p.prog}: {err.filename or ns.cmd[0]}: {err.strerror or err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
