"""A minimal blocking pipe driver for benchmarks: start a PMDA as pmcd does,
answer its CREDS, then send pre-encoded requests and read whole reply
frames with plain os.read/os.write.  It costs the same for every PMDA."""

from __future__ import annotations

import os
import random
import statistics
import struct
import subprocess
import time
from collections.abc import Sequence

from pmda_py.wire import CredsPdu, ProfilePdu


class PipeDriver:
    def __init__(self, cmd: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.r = self.proc.stdout.fileno()
        self.w = self.proc.stdin.fileno()
        creds = self.read_pdu()
        if struct.unpack_from("!i", creds, 4)[0] != 0x700C:
            raise RuntimeError("PMDA did not send CREDS first")
        os.write(self.w, CredsPdu.cversion(0, from_=os.getpid()).encode())
        os.write(self.w, ProfilePdu().encode())

    def read_pdu(self) -> bytes:
        buf = bytearray()
        while len(buf) < 4:
            chunk = os.read(self.r, 4 - len(buf))
            if not chunk:
                raise EOFError("PMDA closed the pipe")
            buf += chunk
        length = struct.unpack_from("!i", buf)[0]
        while len(buf) < length:
            chunk = os.read(self.r, min(1 << 20, length - len(buf)))
            if not chunk:
                raise EOFError("PMDA closed the pipe")
            buf += chunk
        return bytes(buf)

    def request(self, data: bytes) -> bytes:
        os.write(self.w, data)
        return self.read_pdu()

    def time(self, data: bytes, iterations: int, warmup: int = 50) -> list[float]:
        for _ in range(warmup):
            self.request(data)
        out = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            self.request(data)
            out.append(time.perf_counter() - t0)
        return out

    def cpu_seconds(self) -> float:
        """CPU time the PMDA's process has used so far (Linux: the
        scheduler's nanosecond count, /proc/PID/schedstat; NaN elsewhere)."""
        try:
            with open(f"/proc/{self.proc.pid}/schedstat", encoding="ascii") as f:
                return int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return float("nan")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def taking_turns(
    drivers: dict[str, PipeDriver],
    req: bytes,
    budget: float,
    max_iter: int,
    *,
    warmup: int = 5,
    min_rounds: int = 15,
    cpu: dict[str, float] | None = None,
) -> dict[str, float]:
    """p50 in seconds of ``req`` on each driver, the drivers taking turns
    (one request each per round, for about ``budget`` seconds each), so that
    every driver sees the same machine (a shared machine's load drifts).
    The order of a round is shuffled (the same seeded order for every run),
    so no driver always follows the same one (whose work cooled the caches,
    or left a core awake).  With ``cpu``, also the CPU seconds each PMDA's
    process used per request (its own work, whatever the wake-ups of the
    round trip cost)."""
    for d in drivers.values():
        for _ in range(warmup):
            d.request(req)
    used = {name: d.cpu_seconds() for name, d in drivers.items()}
    out: dict[str, list[float]] = {name: [] for name in drivers}
    end = time.perf_counter() + budget * len(drivers)
    rounds = 0
    order = list(drivers.items())
    shuffle = random.Random(len(order)).shuffle
    while rounds < max_iter and (rounds < min_rounds or time.perf_counter() < end):
        shuffle(order)
        for name, d in order:
            t0 = time.perf_counter()
            d.request(req)
            out[name].append(time.perf_counter() - t0)
        rounds += 1
    if cpu is not None:
        for name, d in drivers.items():
            cpu[name] = (d.cpu_seconds() - used[name]) / rounds
    return {name: statistics.median(xs) for name, xs in out.items()}
