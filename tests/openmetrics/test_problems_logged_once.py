"""A source's problems are logged when they change, not every scrape: a
count that changes from one scrape to the next (the samples dropped past
the limit) is not a change (docs/openmetrics.md, "Logs")."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Callable

import structlog
import trio

from pmda_py.openmetrics.exposition import Limits
from tests.openmetrics.servers import ControlledServer, Route
from tests.openmetrics.test_table import OM_CONTEXT, make_table, write_sources


async def _five_scrapes(tmp_path: Path, name: str, make: Callable[[int], bytes]) -> list[MutableMapping[str, Any]]:
    """The log of a table scraping source ``name``, served ``make(hits)``,
    until it has served five documents."""
    with ControlledServer() as server:
        route = server.routes[name] = Route(make=make)
        write_sources(tmp_path / "config.d", {name: server.url(name) + "\n"})
        table = make_table(tmp_path, interval="0.2", workers="0")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            while route.hits < 5:  # noqa: ASYNC110  # (five documents, each unlike the last)
                await trio.sleep(0.05)
            await table.shutdown()
    return logs


def _over_the_limit(hits: int) -> bytes:
    """A document a few samples over the limit, a few more every scrape."""
    return b"a 1\n" * (Limits().max_samples + hits)


async def test_samples_dropped_past_the_limit_are_logged_once_while_it_lasts(tmp_path: Path) -> None:
    logs = await _five_scrapes(tmp_path, "big", _over_the_limit)
    dropped = [e for e in logs if e["event"] == "openmetrics_parse" and "over the limit" in e.get("problem", "")]
    assert len(dropped) == 1, dropped


def _moving_bad_line(hits: int) -> bytes:
    """A good document with one bad line, a line further down every scrape."""
    return b"".join(f"good_{k} {k}\n".encode() for k in range(hits)) + b"bad{ 1\n" + b"after 2\n"


async def test_a_problem_that_moves_in_the_document_is_logged_once(tmp_path: Path) -> None:
    logs = await _five_scrapes(tmp_path, "moving", _moving_bad_line)
    parse = [e["problem"] for e in logs if e["event"] == "openmetrics_parse" and "problem" in e]
    assert len(parse) == 1 and parse[0].startswith("line "), parse
