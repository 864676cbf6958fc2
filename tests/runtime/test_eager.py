"""Coroutines that cannot suspend run without a cancel scope or a nursery
(pmda_py/runtime/eager.py), and everything else still runs under its
table's deadline: the classification by code on every form of await, and
TrioRunner's call and gather on tables of each kind side by side."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any

import pytest
import trio

from pmda_py.dispatch import TableTimeout
from pmda_py.runtime import eager
from pmda_py.runtime.eager import finish, never_suspends
from pmda_py.runtime.pump import TrioRunner
from pmda_py.table import Table


async def returns() -> int:
    return 7


async def raises() -> int:
    raise ValueError("from the table")


async def calls_plain_code() -> list[int]:
    def inner() -> int:
        return 1

    squares = [i * i for i in range(3)]
    gen = sum(i for i in range(3))  # a generator's yield is its own code's, not this one's
    return [*squares, gen, inner()]


async def awaits(x: Awaitable[Any]) -> None:
    await x


async def sleeps_for(seconds: float) -> None:
    await trio.sleep(seconds)


async def awaits_in_a_branch_never_taken(x: Awaitable[Any], go: bool) -> int:
    if go:
        await x
    return 1


async def async_for(x: Any) -> None:
    async for _ in x:
        pass


async def async_with(x: Any) -> None:
    async with x:
        pass


async def agen() -> AsyncIterator[int]:
    yield 1


class Awaitable7:
    def __await__(self) -> Generator[Any, None, int]:
        return returns().__await__()


def test_a_coroutine_without_an_await_never_suspends() -> None:
    for fn in (returns, raises, calls_plain_code):
        coro = fn()
        assert never_suspends(coro), fn.__name__
        coro.close()


def test_every_form_of_await_may_suspend() -> None:
    made: list[Any] = [
        awaits(Awaitable7()),
        awaits_in_a_branch_never_taken(Awaitable7(), False),
        async_for(None),
        async_with(None),
    ]
    for coro in made:
        assert not never_suspends(coro), coro.__qualname__
        coro.close()
    gen = agen()
    assert not never_suspends(gen)  # type: ignore[arg-type]  # an async generator is not a coroutine
    assert not never_suspends(Awaitable7())  # another kind of awaitable: trio's way


def test_finish_returns_the_value_or_raises_the_error() -> None:
    assert finish(returns()) == 7
    assert finish(calls_plain_code()) == [0, 1, 4, 3, 1]
    with pytest.raises(ValueError, match="from the table"):
        finish(raises())


def test_the_memory_of_code_objects_has_a_bound() -> None:
    for k in range(eager.MAX_KNOWN + 50):
        space: dict[str, Any] = {}
        exec(f"async def made{k}():\n    return {k}\n", space)  # a new code object each time
        coro = space[f"made{k}"]()
        assert never_suspends(coro)
        assert finish(coro) == k
        assert len(eager._known) <= eager.MAX_KNOWN


def test_code_at_the_address_of_code_that_went_away_is_looked_at_anew() -> None:
    # Code objects are remembered by their id (hashing one reads all of its
    # constants and names at every call); a code object freed and another
    # made at its address must not inherit its answer.
    inner = returns()
    coro = awaits(inner)
    code = awaits.__code__  # the coroutine's code (a yield: it may suspend)
    gone = returns.__code__  # stands for a code object that was at its address: no yield
    eager._known[id(code)] = (gone, True)
    try:
        assert not never_suspends(coro)
        assert never_suspends(coro) is False  # and the entry is now its own
        assert eager._known[id(code)][0] is code
    finally:
        coro.close()
        inner.close()


class Named(Table):
    name = "t"

    def metrics(self) -> list[Any]:
        return []


def counting_deadlines(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every deadline the runner opens (trio.move_on_after, as pump.py calls it)."""
    opened: list[float] = []
    real = trio.move_on_after

    def move_on_after(seconds: float) -> trio.CancelScope:
        opened.append(seconds)
        return real(seconds)

    monkeypatch.setattr(trio, "move_on_after", move_on_after)  # as pump.py looks it up, at each call
    return opened


async def test_call_runs_a_coroutine_that_cannot_suspend_without_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = counting_deadlines(monkeypatch)
    runner = TrioRunner()
    table = Named()
    assert await runner.call(table, "fetch", returns) == 7
    with pytest.raises(ValueError, match="from the table"):
        await runner.call(table, "fetch", raises)
    assert opened == []
    # one that awaits gets its deadline, and overrunning it is a TableTimeout
    table.deadline = 0.05
    assert await runner.call(table, "fetch", lambda: awaits_in_a_branch_never_taken(sleeps_for(0), True)) == 1
    with pytest.raises(TableTimeout, match=r"Named.fetch overran 0.05s"):
        await runner.call(table, "fetch", lambda: sleeps_for(5))
    assert opened == [0.05, 0.05]


async def test_gather_answers_every_kind_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = counting_deadlines(monkeypatch)
    runner = TrioRunner()
    fast, slow, stuck = Named(), Named(), Named()
    slow.deadline, stuck.deadline = 2.0, 0.05
    order: list[str] = []

    async def plain(tag: str) -> str:
        order.append(tag)
        return tag

    async def sleeps(tag: str, seconds: float) -> str:
        order.append(tag + " starts")
        await trio.sleep(seconds)
        order.append(tag + " ends")
        return tag

    def bad() -> Awaitable[object]:
        raise KeyError("before any coroutine")

    calls: list[tuple[Table, str, Callable[[], Awaitable[object]]]] = [
        (slow, "fetch", lambda: sleeps("slow", 0.01)),
        (fast, "fetch", lambda: plain("a")),
        (stuck, "fetch", lambda: sleeps("stuck", 5)),
        (fast, "fetch", raises),
        (fast, "fetch", bad),
        (fast, "fetch", lambda: plain("b")),
    ]
    with trio.fail_after(3):
        results = await runner.gather(calls)
    assert results[0] == "slow" and results[1] == "a" and results[5] == "b"
    assert isinstance(results[2], TableTimeout) and "overran 0.05s" in str(results[2])
    assert isinstance(results[3], ValueError) and isinstance(results[4], KeyError)
    assert order[:2] == ["a", "b"]  # the ones that cannot suspend ran at once, in order
    assert sorted(opened) == [0.05, 2.0]  # a deadline for each one that could suspend, none for the others
    # a single table that awaits: no nursery, still its deadline
    opened.clear()
    assert await runner.gather([(slow, "fetch", lambda: sleeps("alone", 0))]) == ["alone"]
    assert opened == [2.0]


async def test_an_async_check_that_cannot_suspend_runs_at_once_and_one_that_can_keeps_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = counting_deadlines(monkeypatch)
    runner = TrioRunner()
    runs: list[str] = []

    class Quick(Named):
        async def check(self) -> None:
            runs.append("quick")

    class Slow(Named):
        check_deadline = 0.05

        async def check(self) -> None:
            runs.append("slow")
            await trio.sleep(5)

    await runner.check(Quick())
    assert runs == ["quick"] and opened == []
    with trio.fail_after(3), pytest.raises(TableTimeout, match=r"Slow\.check overran"):
        await runner.check(Slow())
    assert runs == ["quick", "slow"] and opened == [0.05]
