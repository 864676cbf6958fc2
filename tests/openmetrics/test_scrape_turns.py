"""A scraper digests the small documents of a round on the trio loop, one
per turn of it: replies that come together would otherwise be digested in
one turn, and a pmcd request that came meanwhile would wait behind all of
them (the daemon scrapes on its own loop until it needs a worker)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from pmda_py.openmetrics.exposition import Limits
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
