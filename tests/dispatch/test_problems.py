"""A table's problems reach the log a bounded number of times: each distinct
one once (again an hour later, with how many repeats there were), at most
MAX_PROBLEMS distinct ones per table at a time, each text of the table's
making cut to MAX_TEXT characters; other tables' problems are still logged,
and the statistics still count every occurrence."""

from __future__ import annotations

from collections import Counter
from collections.abc import MutableMapping
from typing import Any

import structlog

from pmda_py.dispatch.mounts import Mount
from pmda_py.dispatch.problems import MAX_PROBLEMS, MAX_TEXT, REPEAT_AFTER, ProblemLog
from pmda_py.pmapi import PmType, pmid
from pmda_py.table import FetchRequest, FetchResult, Metric, Table
from pmda_py.testing.fixtures import PmdaFactory
from pmda_py.testing.harness import dispatcher_of


class Careless(Table):
    """``bad`` metrics answered with text for a U32; fetching ``boom`` raises
    an exception whose message is ``message``."""

    def __init__(self, bad: int, message: str = "boom", cluster: int = 0) -> None:
        self.bad = [Metric(f"m{k}", cluster=cluster, item=k, type=PmType.U32) for k in range(bad)]
        self.boom = Metric("boom", cluster=cluster + 1, item=0, type=PmType.U32)
        self.message = message

    def metrics(self) -> list[Metric]:
        return [*self.bad, self.boom]

    async def fetch(self, request: FetchRequest) -> FetchResult:
        if self.boom in request.metrics:
            raise RuntimeError(self.message)
        return dict.fromkeys(request.metrics, "not a number")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _problems(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    """The lines about tables (not the session's notices)."""
    return [line for line in logs if str(line["event"]).startswith("table_")]


def _events(logs: list[MutableMapping[str, Any]]) -> Counter[str]:
    return Counter(str(line["event"]) for line in _problems(logs))


async def test_a_table_failing_at_every_fetch_logs_each_problem_once_an_hour(table_pmda: PmdaFactory) -> None:
    table = Careless(100)
    clock = Clock()
    async with table_pmda(Mount(table, "careless", "careless")) as pmda:
        dispatcher = dispatcher_of(pmda)
        dispatcher.problems = ProblemLog(clock)
        with structlog.testing.capture_logs() as logs:
            for _ in range(20):
                await pmda.fetch([pmid(253, 0, k) for k in range(100)])
                await pmda.fetch([pmid(253, 1, 0)])
        assert _events(logs) == {"table_bad_value": 100, "table_exception": 1}
        assert dispatcher.stats.table_errors["careless"] == 20 * 100 + 20  # every one counted
        assert {line["metric"] for line in _problems(logs) if line["event"] == "table_bad_value"} == {
            f"careless.m{k}" for k in range(100)
        }

        clock.now += REPEAT_AFTER - 1
        with structlog.testing.capture_logs() as logs:
            await pmda.fetch([pmid(253, 1, 0)])
        assert _problems(logs) == []  # not an hour yet
        clock.now += 1
        with structlog.testing.capture_logs() as logs:
            await pmda.fetch([pmid(253, 1, 0)])
            await pmda.fetch([pmid(253, 1, 0)])
        assert [(line["event"], line.get("repeats")) for line in _problems(logs)] == [("table_exception", 20)]


async def test_past_its_bound_a_table_s_new_problems_are_counted_once_and_others_still_logged(
    table_pmda: PmdaFactory,
) -> None:
    many, other = Careless(MAX_PROBLEMS + 50), Careless(1, cluster=2)
    async with table_pmda(Mount(many, "many", "many"), Mount(other, "other", "other")) as pmda:
        with structlog.testing.capture_logs() as logs:
            for _ in range(3):
                await pmda.fetch([pmid(253, 0, k) for k in range(MAX_PROBLEMS + 50)])
            await pmda.fetch([pmid(253, 2, 0)])  # the other table's bad metric
    by_table = Counter((str(line["event"]), str(line.get("table"))) for line in _problems(logs))
    assert by_table[("table_bad_value", "many")] == MAX_PROBLEMS
    assert by_table[("table_problems_not_logged", "many")] == 1
    assert by_table[("table_bad_value", "other")] == 1
    said = next(line for line in _problems(logs) if line["event"] == "table_problems_not_logged")
    assert said["not_logged"] == 1 and said["remembered"] == MAX_PROBLEMS


async def test_a_huge_exception_message_is_cut(table_pmda: PmdaFactory) -> None:
    table = Careless(1, message="x" * 1_000_000)
    async with table_pmda(Mount(table, "huge", "huge")) as pmda:
        with structlog.testing.capture_logs() as logs:
            await pmda.fetch([pmid(253, 1, 0)])
    (line,) = _problems(logs)
    assert line["event"] == "table_exception"
    assert len(line["error"]) < MAX_TEXT + 64
    assert line["error"].endswith("(1000014 characters)")  # "RuntimeError: " + the message
