"""Without PCP: replay the golden captures (real dbpmda <-> real PMDAs) through
a fake PMDA that answers each request with the PMDA's recorded replies, and
check that our dbpmda prints the transcript real dbpmda printed
(``*.dbpmda.out``), and sends the very requests real dbpmda sent."""

from __future__ import annotations

import difflib
import io
import json
import re
from pathlib import Path

import pytest
import trio
import trio.testing

from pmda_py.namespace import Namespace, load
from pmda_py.testing.dbpmda import DbpmdaSession, run_script
from pmda_py.wire import PduReader
from tests.conftest import PDUS

REPO = Path(__file__).resolve().parents[2]


def _pmns_for(name: str) -> Namespace:
    """The PMNS the captures used (PCP's simple/sample root, flattened into
    tests/data/pmns so this test needs no PCP installation)."""
    which = "sample" if name.startswith("dbpmda_sample") else "simple"
    return load(str(REPO / "tests" / "data" / "pmns" / f"{which}.pmns"))


class FakePmda:
    """Answers requests with the recorded replies, checking each request."""

    def __init__(self, capture: Path) -> None:
        self.items = [json.loads(line) for line in capture.read_text().splitlines() if line.strip()]
        self.k = 0
        self.mismatches: list[str] = []

    async def serve(self, stream: trio.abc.Stream) -> None:
        reader = PduReader()
        await self._send_replies(stream)  # CREDS from the PMDA
        while self.k < len(self.items):
            frame = reader.next_frame()
            if frame is None:
                data = await stream.receive_some(65536)
                if not data:
                    return
                reader.receive_data(data)
                continue
            want = bytes.fromhex(self.items[self.k]["hex"])
            if self.items[self.k]["dir"] != "to_pmda" or not _same_request(frame, want):
                self.mismatches.append(f"#{self.k + 1}: sent {frame[:40].hex()} expected {want[:40].hex()}")
            self.k += 1
            await self._send_replies(stream)

    async def _send_replies(self, stream: trio.abc.Stream) -> None:
        while self.k < len(self.items) and self.items[self.k]["dir"] == "from_pmda":
            await stream.send_all(bytes.fromhex(self.items[self.k]["hex"]))
            self.k += 1


def _same_request(got: bytes, want: bytes) -> bool:
    if got[4:8] == want[4:8] == bytes.fromhex("0000700c"):  # CREDS: pid differs
        return got[12:] == want[12:]
    if got[4:8] == want[4:8] == bytes.fromhex("00007001"):  # store RESULT: timestamp copied from the fetch
        return got[:12] == want[:12] and got[20:] == want[20:]
    return got == want


def _normalise(text: str) -> str:
    text = re.sub(r"dump from 0x[0-9a-f]+", "dump from ADDR", text)
    lines = [ln for ln in text.splitlines() if not ln.startswith(("open ", "Start ", "Connect to PMDA"))]
    return "\n".join(lines)


@pytest.mark.parametrize("name", ["dbpmda_simple", "dbpmda_simple_python", "dbpmda_sample"])
async def test_replay_matches_recorded_transcript(name: str) -> None:
    script = (PDUS / f"{name}.dbpmda.in").read_text()
    recorded = (PDUS / f"{name}.dbpmda.out").read_text()
    fake = FakePmda(PDUS / f"{name}.jsonl")
    out, err = io.StringIO(), io.StringIO()
    session = DbpmdaSession(out, err, _pmns_for(name), echo=True)

    async with trio.open_nursery() as nursery:

        async def connector(kind: str, target: object) -> trio.abc.Stream:
            ours, theirs = trio.testing.memory_stream_pair()
            nursery.start_soon(fake.serve, theirs)
            return ours

        session.connector = connector
        # the scripts name a proxy that only existed on the capture machine: make it "exist"
        script = re.sub(r"^open pipe \S+", "open pipe /bin/sh", script, count=1, flags=re.M)
        with trio.fail_after(30):  # a request the capture does not answer would hang
            await run_script(script.splitlines(keepends=True), session)
        nursery.cancel_scope.cancel()
    assert fake.mismatches == []
    # dbpmda writes warnings to stderr; the recording interleaved them into the
    # echoed command line ("fetch 29.0.999 Warning: ...\nsample.long.one"): undo that
    expected: list[str] = []
    carry = ""
    for ln in _normalise(recorded).splitlines():
        m = re.match(r"^(.*?)Warning: PMID \(\S+\) is not defined in the PMNS$", ln)
        if m:
            carry += m.group(1)
            continue
        expected.append(carry + ln)
        carry = ""
    ours = _normalise(out.getvalue()).splitlines()
    diff = list(difflib.unified_diff(expected, ours, "real dbpmda (recorded)", "pmda-py dbpmda", lineterm="", n=1))
    assert not diff, "\n".join(diff[:60])
    assert len(ours) > 100
