"""Coroutines that cannot suspend, run at once.

Most tables' ``async def fetch`` never awaits anything: it computes its
answer and returns.  Such a coroutine cannot reach a checkpoint, so a
deadline (a trio cancel scope, about 50 Python calls and 8-10 us on the
development machine) could never cut it short, and a nursery could never
run it beside another.  :func:`never_suspends` tells such a coroutine by its
code: with no ``yield`` instruction (every ``await``, ``async for`` and
``async with`` compiles to one) it can only return or raise at its first
step.  :func:`finish` runs it to that end.  Anything else -- a coroutine
that awaits, an async generator, an awaitable object of another kind -- is
left to trio's way, under its deadline.
"""

from __future__ import annotations

import dis
from collections.abc import Awaitable
from types import CodeType, CoroutineType
from typing import Any, TypeVar

__all__ = ["MAX_KNOWN", "finish", "never_suspends"]

_T = TypeVar("_T")

#: the instructions at which a coroutine's frame can suspend (3.9-3.10: an
#: await is GET_AWAITABLE + YIELD_FROM; 3.11 on: SEND + YIELD_VALUE)
_YIELDS = frozenset({"YIELD_VALUE", "YIELD_FROM"})

#: code objects remembered (a table's methods: a handful); past this the
#: memory is cleared, so code made afresh per call cannot grow it
MAX_KNOWN = 1024

_known: dict[int, tuple[CodeType, bool]] = {}


def _has_no_yield(code: CodeType) -> bool:
    return not any(ins.opname in _YIELDS for ins in dis.get_instructions(code))


def never_suspends(aw: Awaitable[Any]) -> bool:
    """Whether ``aw`` is a native coroutine whose code has no instruction at
    which it could suspend (so, if it was not awaited already, it was never
    started: a coroutine without a yield never stops half-way)."""
    if type(aw) is not CoroutineType:
        return False
    code = aw.cr_code
    known = _known.get(id(code))
    if known is None or known[0] is not code:
        if len(_known) >= MAX_KNOWN:
            _known.clear()
        known = _known[id(code)] = (code, _has_no_yield(code))
    return known[1]


def finish(coro: Awaitable[_T]) -> _T:
    """Run a coroutine that :func:`never_suspends` to its end: its value, or
    what it raised."""
    step: Any = coro
    try:
        step.send(None)
    except StopIteration as done:
        value: _T = done.value
        return value
    step.close()  # cannot happen: it has no yield
    raise RuntimeError(f"{step.__qualname__} suspended although its code has no yield")
