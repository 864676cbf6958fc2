"""glibc's malloc, through ctypes: tuned for large replies
(:func:`tune_malloc`, at the daemon's start) and its free pages given back
after a burst (:func:`trim_malloc`, the OpenMetrics scrapers after a round).
Both do nothing where the C library is not glibc."""

from __future__ import annotations

__all__ = ["MALLOC_MMAP_THRESHOLD", "MALLOC_TRIM_THRESHOLD", "trim_malloc", "tune_malloc"]


#: glibc mallopt() parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: buffers below this come from the heap and are reused, not mapped afresh
MALLOC_MMAP_THRESHOLD = 32 << 20  # glibc's ceiling for the setting on 64-bit hosts
#: free memory kept at the heap's top for the next reply rather than given back
MALLOC_TRIM_THRESHOLD = 64 << 20


def tune_malloc() -> bool:
    """Keep large reply buffers in the heap (glibc): by default a buffer of
    128 KiB or more (a 10 000-value RESULT) is a fresh mapping per fetch,
    page-faulted in and unmapped again, which costs a large fetch about a
    third of its time.  Memory freed at the heap's top is kept up to
    :data:`MALLOC_TRIM_THRESHOLD` for the next fetch.  False where the C
    library is not glibc (nothing changed)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD)
    )


def trim_malloc() -> bool:
    """Give the C heap's free pages back to the system (glibc's
    ``malloc_trim(0)``: free pages anywhere in the heap, not only at its
    top): a process that built its state in a burst (a round of scrapes)
    otherwise keeps the burst's garbage resident.  False where the C
    library is not glibc (nothing done)."""
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    trim(0)
    return True
