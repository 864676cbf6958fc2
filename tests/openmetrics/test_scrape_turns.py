"""A scraper digests the documents of a round on the trio loop, one per
turn of it: replies that come together would otherwise be digested in one
turn, and a pmcd request that came meanwhile would wait behind all of them
(the daemon scrapes on its own loop until it needs a worker); a large
document is parsed off the loop, never ingested there."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from pmda_py.openmetrics.exposition import Limits, Parsed
from pmda_py.openmetrics.scrape import Scraper


async def test_a_round_s_documents_are_digested_one_per_turn_of_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 6
    for k in range(n):  # file:// documents: read at once, so every scrape reaches its digest in the same turn
        doc = tmp_path / f"doc{k}.txt"
        doc.write_text(f'm{k} {k}\nother{{x="{k}"}} 1\n')
        (tmp_path / f"s{k}.url").write_text(f"file://{doc}\n")
    scraper = Scraper(str(tmp_path / "state"), 144, Limits(), timeout=5)
    events: list[str] = []
    digest = scraper._digest

    def recorded(*args: Any) -> Any:
        events.append("digest")
        return digest(*args)

    monkeypatch.setattr(scraper, "_digest", recorded)

    r, w = os.pipe()
    os.write(w, b"a request")  # there when the round starts

    async def pmcd_request() -> None:  # the daemon's channel, waiting for its next request
        await trio.lowlevel.wait_readable(r)
        events.append("answered")

    replies = []

    async def one(k: int) -> None:
        replies.append(await scraper.scrape(f"s{k}", k + 1, str(tmp_path / f"s{k}.url"), False))

    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as round_:
                round_.start_soon(pmcd_request)
                for k in range(n):
                    round_.start_soon(one, k)
    finally:
        await scraper.aclose()
        os.close(r)
        os.close(w)
    assert [r.outcome for r in replies] == ["ok"] * n, [r.status for r in replies]
    assert events.count("digest") == n
    # every document was ready at once: the request waited for one digest at most
    # (the first one's, in the same turn), not for the round's
    assert events.index("answered") <= 1, events


async def test_a_large_document_is_parsed_in_a_thread_and_ingested_on_the_loop(tmp_path: Path) -> None:
    """What runs off the loop (``run_cpu``, a thread in the daemon) is the
    parse alone: the source's model, which the daemon answers from, is only
    written on the loop."""
    doc = tmp_path / "doc.txt"
    doc.write_text("".join(f'm{k}{{x="{k}"}} {k}\n' for k in range(50)))
    (tmp_path / "s.url").write_text(f"file://{doc}\n")
    seen: list[tuple[str, int]] = []
    scraper: Scraper

    async def run_cpu(fn: Callable[[], Parsed]) -> Parsed:
        parsed = await trio.to_thread.run_sync(fn)
        seen.append((type(parsed).__name__, len(scraper.sources["s"].model.metrics)))
        return parsed

    scraper = Scraper(str(tmp_path / "state"), 144, Limits(), timeout=5, run_cpu=run_cpu)
    scraper.inline_bytes = 100  # the document is larger
    try:
        reply = await scraper.scrape("s", 1, str(tmp_path / "s.url"), False)
    finally:
        await scraper.aclose()
    assert reply.outcome == "ok", reply.status
    assert seen == [("Parsed", 0)]  # parsed in the thread; the model untouched by it
    assert len(scraper.sources["s"].model.metrics) == 50  # ingested after, on the loop
