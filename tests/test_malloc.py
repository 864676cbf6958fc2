"""pmda_py/malloc.py: ``pmda-py run`` keeps large reply buffers in the heap
(glibc mallopt): a 4 MiB buffer comes from the heap after :func:`tune_malloc`,
from a fresh mapping before (checked in a new interpreter, against
/proc/self/maps); :func:`trim_malloc` gives back the free pages inside the
heap that glibc keeps otherwise (resident memory, in a new interpreter)."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys

import pytest

from tests.conftest import require

PROBE = r"""
import ctypes, json, sys
from pmda_py.malloc import tune_malloc

def heap() -> tuple[int, int]:
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            lo, hi = line.split()[0].split("-")
            return int(lo, 16), int(hi, 16)
    return 0, 0

def in_heap(n: int) -> bool:
    buf = bytearray(n)
    addr = ctypes.addressof((ctypes.c_char * n).from_buffer(buf))
    lo, hi = heap()
    return lo <= addr < hi

before = in_heap(4 << 20)
tuned = tune_malloc()
after = in_heap(4 << 20)
print(json.dumps([before, tuned, after]))
"""


def test_large_buffers_come_from_the_heap_once_tuned() -> None:
    require(platform.libc_ver()[0] == "glibc", "glibc (mallopt)")
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    before, tuned, after = (x == "true" for x in out.strip().strip("[]").split(", "))
    assert tuned
    assert not before, "a 4 MiB buffer was in the heap before tuning: the probe cannot tell"
    assert after


def test_without_mallopt_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    from pmda_py import malloc

    def no_libc(name: object) -> object:
        raise OSError("no C library here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert malloc.tune_malloc() is False


TRIM_PROBE = r"""
import json
from pmda_py.malloc import trim_malloc

def rss() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0

blocks = [bytes(2000) * 1 for _ in range(30000)]  # ~60 MB from malloc's heap (above pymalloc's sizes)
for k in range(len(blocks) - 1):
    blocks[k] = b""  # freed, but below the last block: not at the heap's top
full = rss()
trimmed = trim_malloc()
print(json.dumps([full, trimmed, rss()]))
"""


def test_trim_gives_back_the_free_pages_inside_the_heap() -> None:
    require(platform.libc_ver()[0] == "glibc", "glibc (malloc_trim)")
    out = subprocess.run([sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, check=True).stdout
    full, trimmed, after = (int(x) if x.isdigit() else x == "true" for x in out.strip().strip("[]").split(", "))
    assert trimmed is True
    assert full - after > 30_000, (full, after)  # kB: most of the 60 MB freed below the heap's top


def test_without_malloc_trim_nothing_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    from pmda_py import malloc

    def no_libc(name: object) -> object:
        raise OSError("no C library here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert malloc.trim_malloc() is False
