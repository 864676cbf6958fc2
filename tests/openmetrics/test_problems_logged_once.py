"""A source's problems are logged when they change, not every scrape: a
count that changes from one scrape to the next (the samples dropped past
the limit) is not a change (docs/openmetrics.md, "Logs")."""

from __future__ import annotations

from pathlib import Path

import structlog
import trio

from pmda_py.openmetrics.exposition import Limits
from tests.openmetrics.servers import ControlledServer, Route
from tests.openmetrics.test_table import OM_CONTEXT, make_table, write_sources


def _over_the_limit(hits: int) -> bytes:
    """A document a few samples over the limit, a few more every scrape."""
    return b"a 1\n" * (Limits().max_samples + hits)


async def test_samples_dropped_past_the_limit_are_logged_once_while_it_lasts(tmp_path: Path) -> None:
    with ControlledServer() as server:
        route = server.routes["big"] = Route(make=_over_the_limit)
        write_sources(tmp_path / "config.d", {"big": server.url("big") + "\n"})
        table = make_table(tmp_path, interval="0.2", workers="0")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            while route.hits < 5:  # noqa: ASYNC110  # (five documents, each dropping more)
                await trio.sleep(0.05)
            await table.shutdown()
    dropped = [e for e in logs if e["event"] == "openmetrics_parse" and "over the limit" in e.get("problem", "")]
    assert len(dropped) == 1, dropped


def _moving_bad_line(hits: int) -> bytes:
    """A good document with one bad line, a line further down every scrape."""
    return b"".join(f"good_{k} {k}\n".encode() for k in range(hits)) + b"bad{ 1\n" + b"after 2\n"


async def test_a_problem_that_moves_in_the_document_is_logged_once(tmp_path: Path) -> None:
    with ControlledServer() as server:
        route = server.routes["moving"] = Route(make=_moving_bad_line)
        write_sources(tmp_path / "config.d", {"moving": server.url("moving") + "\n"})
        table = make_table(tmp_path, interval="0.2", workers="0")
        with structlog.testing.capture_logs() as logs:
            await table.startup(OM_CONTEXT)
            await table.wait_ready()
            while route.hits < 5:  # noqa: ASYNC110  # (five documents, the bad line lower in each)
                await trio.sleep(0.05)
            await table.shutdown()
    parse = [e["problem"] for e in logs if e["event"] == "openmetrics_parse" and "problem" in e]
    assert len(parse) == 1 and parse[0].startswith("line "), parse
