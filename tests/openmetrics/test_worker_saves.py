"""A scraper worker saves its name tables off its trio loop: a save (each
file synced to disk, milliseconds each: thousands after a first round)
never holds up its scrapes; a source that moves to another worker takes
its unsaved tables along, no file written on the way."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from pmda_py.openmetrics import scrape, state
from pmda_py.openmetrics.records import (
    Answer,
    Flush,
    Request,
    ScrapeJob,
    decode_answer,
    encode_request,
    read_frames,
)
from pmda_py.openmetrics.scrape import WorkerOptions


class _Answers:
    """A worker served in-process: the daemon's end of its pipe and its
    answers, as they come."""

    def __init__(self, stream: trio.abc.HalfCloseableStream) -> None:
        self.stream = stream
        self.buf = bytearray()
        self.ready: list[Answer] = []

    @classmethod
    async def start(cls, nursery: trio.Nursery, options: WorkerOptions) -> _Answers:
        """A worker in ``nursery``, once it said it is up."""
        ours, theirs = trio.testing.memory_stream_pair()
        nursery.start_soon(scrape._serve, options, theirs, theirs)
        answers = cls(ours)
        assert (await answers.next()).rid == 0  # up
        return answers

    async def send(self, *requests: Request) -> None:
        await self.stream.send_all(b"".join(encode_request(r) for r in requests))

    async def next(self) -> Answer:
        while not self.ready:
            data = await self.stream.receive_some(1 << 16)
            assert data, "the worker ended"
            self.buf += data
            self.ready += [decode_answer(msg) for msg in read_frames(self.buf)]
        return self.ready.pop(0)

    async def end(self) -> None:
        """EOF: the worker saves what it has and ends."""
        await self.stream.send_eof()


def _source(tmp_path: Path, name: str, body: bytes) -> str:
    doc = tmp_path / f"{name}.txt"
    doc.write_bytes(body)
    conf = tmp_path / f"{name}.url"
    conf.write_text(f"file://{doc}\n")
    return str(conf)


def _options(state_dir: Path) -> WorkerOptions:
    """A worker's options in these tests: its tables saved in ``state_dir``."""
    return WorkerOptions(state_dir=str(state_dir), domain=144, timeout=5.0, keepalive=10.0)


async def test_a_save_does_not_hold_up_the_scrapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's changed name tables are written while it goes on
    scraping: a scrape asked for after a flush is answered while the table
    files are still being written (here: held until that answer came), and
    the flush is answered once the files are there."""
    monkeypatch.setattr(scrape, "_IDLE_FLUSH", 3600.0)  # (no background save meanwhile)
    monkeypatch.setattr(scrape, "_MAX_FLUSH_DELAY", 3600.0)
    gate = threading.Event()
    released: list[bool] = []
    real_write = state.write_state

    def held_write(path: str, data: bytes) -> str | None:
        released.append(gate.wait(5))  # (False: nothing was answered while a file was held)
        return real_write(path, data)

    monkeypatch.setattr(state, "write_state", held_write)
    a = _source(tmp_path, "a", b'x 1\ny{k="v"} 2\n')
    b = _source(tmp_path, "b", b"z 3\n")
    state_dir = tmp_path / "state"
    options = _options(state_dir)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            answers = await _Answers.start(nursery, options)
            await answers.send(ScrapeJob(1, "a", 1, a, False))
            first = await answers.next()
            assert (first.rid, first.reply.outcome) == (1, "ok")
            assert not (state_dir / "144.1.py").exists()  # (saved later, in batches)
            # a flush (every changed table saved), then b is scraped
            await answers.send(Flush(2), ScrapeJob(3, "b", 2, b, False))
            order = []
            for _ in range(2):
                answer = await answers.next()
                order.append(answer.rid)
                assert answer.reply.outcome == "ok", answer.reply.status
                if answer.rid == 3:
                    gate.set()
                else:
                    assert (state_dir / "144.1.py").exists()
            assert order == [3, 2]
            assert released and all(released)
            gate.set()
            await answers.end()
    assert (state_dir / "144.2.py").exists()


async def test_a_moving_source_takes_its_unsaved_tables_along(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A source handed over to another worker: the worker it leaves writes
    no file (saving a moving source's tables, synced to disk, held up
    every hand-over and left half the sources stale for rounds when the
    pool grew) but answers with the tables it had not saved yet; the worker
    taking it over numbers its metrics and instances from them, reading no
    file (there is none yet), and saves them itself."""
    monkeypatch.setattr(scrape, "_IDLE_FLUSH", 3600.0)
    monkeypatch.setattr(scrape, "_MAX_FLUSH_DELAY", 3600.0)
    written: list[str] = []
    real_write = state.write_state

    def write(path: str, data: bytes) -> str | None:
        written.append(Path(path).name)
        return real_write(path, data)

    monkeypatch.setattr(state, "write_state", write)
    a = _source(tmp_path, "a", b'x 1\ny{k="v"} 2\n')
    state_dir = tmp_path / "state"
    options = _options(state_dir)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            old_answers = await _Answers.start(nursery, options)
            new_answers = await _Answers.start(nursery, options)
            await old_answers.send(ScrapeJob(1, "a", 1, a, False))
            before = (await old_answers.next()).reply.digest
            assert before is not None and before.meta is not None
            await old_answers.send(Flush(2, source="a"))
            handed = (await old_answers.next()).reply
            assert written == []  # (no file written on the way)
            assert 1 in handed.tables and len(handed.tables) == 2  # (its metrics' table, y's instances')
            # the document changed: another order, one more instance of y, a new metric
            (tmp_path / "a.txt").write_bytes(b'y{k="w"} 3\nnew 5\ny{k="v"} 2\nx 1\n')
            await new_answers.send(ScrapeJob(1, "a", 1, a, False, tables=handed.tables))
            after = (await new_answers.next()).reply.digest
            assert after is not None and after.meta is not None
            assert not state_dir.exists() or not list(state_dir.iterdir())  # (nothing saved: none read)
            items = dict(zip(after.meta.names, after.meta.items))
            assert {n: items[n] for n in before.meta.names} == dict(zip(before.meta.names, before.meta.items))
            assert after.meta.inst_names[after.meta.names.index("y")] == ["k:v", "k:w"]  # (v keeps number 0)
            await old_answers.end()
            await new_answers.end()
    assert {"144.1.py"} <= set(written)


async def test_an_answer_over_the_frame_limit_fails_only_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A digest the daemon would refuse as over the frame limit (it would
    take the worker for broken and kill it, failing every source of the
    worker) is sent as that source's failure; the worker goes on."""
    limit = 2000
    monkeypatch.setattr(scrape, "frame_limit", lambda max_bytes, max_label_bytes: limit)
    big = _source(tmp_path, "big", b"".join(b'm%d{k="%d"} %d\n' % (k, k, k) for k in range(200)))
    small = _source(tmp_path, "small", b"z 3\n")
    options = _options(tmp_path / "state")
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            answers = await _Answers.start(nursery, options)
            await answers.send(ScrapeJob(1, "big", 1, big, False))
            first = await answers.next()
            assert (first.rid, first.reply.outcome) == (1, "fail")
            assert "unsendable reply" in first.reply.status and f"over the limit of {limit}" in first.reply.status
            await answers.send(ScrapeJob(2, "small", 2, small, False))
            second = await answers.next()
            assert (second.rid, second.reply.outcome) == (2, "ok"), second.reply.status
            await answers.end()
