"""``pmda-py run`` keeps large reply buffers in the heap (glibc mallopt):
a 4 MiB buffer comes from the heap after :func:`tune_malloc`, from a fresh
mapping before (checked in a new interpreter, against /proc/self/maps)."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys

import pytest

from tests.conftest import require

PROBE = r"""
import ctypes, json, sys
from pmda_py.runtime.malloc import tune_malloc

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
    from pmda_py.runtime import malloc

    def no_libc(name: object) -> object:
        raise OSError("no C library here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert malloc.tune_malloc() is False
