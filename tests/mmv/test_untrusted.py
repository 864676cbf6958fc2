"""MMV files are written by other users: what they write cannot block the
agent, cannot make it read more than the sections a header names, cannot
make a request open every file, and (with ``allowed_users``) a file of
another owner is never served, checked on the descriptor read."""

from __future__ import annotations

import builtins
import functools
import os
import re
import shutil
import struct
import subprocess
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import trio

from pmda_py.config import parse_args
from pmda_py.errors import PmdaError
from pmda_py.mmv.table import MmvTable
from pmda_py.mmv.table.state import ScanState
from pmda_py.testing.client import PmdaClient, open_pipe_pmda
from pmda_py.testing.harness import open_table_pmda
from pmda_py.testing.support import pmda_py_argv
from tests.conftest import require
from tests.mmv.corpus import MMV
from tests.mmv.v2file import put_head, put_u64_metrics

SIMPLE = (MMV / "qa_v1_simple.mmv").read_bytes()  # cluster 123, 208 bytes


def _with_cluster(data: bytes, cluster: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("=i", out, 36, cluster)
    return bytes(out)


async def _file_values(pmda: PmdaClient, prefix: str) -> dict[str, Any]:
    names = list(await pmda.traverse(prefix))
    return await pmda.fetch_values(names) if names else {}


async def _eventually(pmda: PmdaClient, prefix: str, want_present: bool) -> dict[str, Any]:
    """The file's values once the scanner thread has (or has not) got it."""
    for _ in range(300):
        try:
            got = await _file_values(pmda, prefix)
        except Exception:
            got = {}
        if bool(got) == want_present:
            return got
        await trio.sleep(0.01)
    raise AssertionError(f"{prefix}: never {'there' if want_present else 'gone'}")


@pytest.mark.slow
async def test_a_symlink_retargeted_to_a_fifo_does_not_block_the_daemon(tmp_path: Path) -> None:
    """Issue case 3: the daemon answers every request at once (pmdammv's
    rescan triggers included) after a loaded file's target became a FIFO."""
    d, elsewhere = tmp_path / "mmv", tmp_path / "elsewhere"
    d.mkdir()
    elsewhere.mkdir()
    (elsewhere / "real").write_bytes(SIMPLE)
    (d / "app").symlink_to(elsewhere / "real")
    cmd = pmda_py_argv("run", "--mmv-compat", "--mmv-dir", str(d), "-l", str(tmp_path / "log"))
    async with open_pipe_pmda(cmd, timeout=3) as pmda:
        before = await _file_values(pmda, "mmv.app")
        assert before and not any(isinstance(v, PmdaError) for v in before.values()), before
        os.mkfifo(elsewhere / "fifo")
        os.replace(elsewhere / "fifo", elsewhere / "real")  # no change in the MMV directory itself
        with trio.fail_after(5):  # a blocked daemon answers nothing
            for _ in range(20):
                files = (await pmda.fetch_values(["mmv.control.files"]))["mmv.control.files"]
                try:
                    await pmda.fetch_values(list(before))
                except Exception:
                    pass
                await trio.sleep(0.05)
        assert files == 0


async def test_a_sparse_gigabyte_tail_costs_nothing(tmp_path: Path) -> None:
    """Issue case 9: a valid file extended to 1 GiB with truncate (no disk
    used): scan and fetches read only what the header names."""
    d = tmp_path / "mmv"
    d.mkdir()
    (d / "app").write_bytes(SIMPLE)
    async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
        want = await _file_values(pmda, "mmv.app")
    assert want
    os.truncate(d / "app", 1 << 30)
    tracemalloc.start()
    try:
        table = MmvTable(dir=str(d), compat="1")
        async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
            for _ in range(5):
                assert await _file_values(pmda, "mmv.app") == want
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert table.last_scan is not None and table.last_scan.read_bytes < 64 * 1024
    assert peak < 32 << 20, f"{peak} bytes allocated for a 208-byte MMV file with a sparse tail"


async def test_a_request_opens_only_the_file_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue case 9: with 40 files, fetching one file's metric opens that
    file only (pmdammv's per-request generation checks are the scanner
    thread's sweep, here set far apart)."""
    d = tmp_path / "mmv"
    d.mkdir()
    for k in range(40):
        (d / f"f{k:02d}").write_bytes(_with_cluster(SIMPLE, 200 + k))
    opened: list[str] = []
    real_os_open, real_open = os.open, builtins.open

    def os_open(path: Any, *args: Any, **kw: Any) -> int:
        opened.append(os.fsdecode(path))
        return real_os_open(path, *args, **kw)

    def b_open(path: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(path, (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(path))
        return real_open(path, *args, **kw)

    table = MmvTable(dir=str(d), compat="1", sweep="600")
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        names = list(await pmda.traverse("mmv.f07"))
        assert names and (await pmda.fetch_values(["mmv.control.files"]))["mmv.control.files"] == 40
        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(builtins, "open", b_open)
        for _ in range(20):
            await pmda.fetch_values(names[:1])
        monkeypatch.undo()
    ours = [p for p in opened if p.startswith(str(d))]
    assert {os.path.basename(p) for p in ours} <= {"f07"}, sorted(set(ours))[:5]
    assert len(ours) <= 20


async def test_a_rescan_runs_off_the_request_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan that takes long (held here) does not hold requests: they are
    answered from the previous scan, and the new one lands when done."""
    d = tmp_path / "mmv"
    d.mkdir()
    (d / "a").write_bytes(_with_cluster(SIMPLE, 301))
    table = MmvTable(dir=str(d), compat="1", inline_scan="0")  # every scan in the thread, as for a large directory
    entered, release = threading.Event(), threading.Event()
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        assert await _file_values(pmda, "mmv.a")
        real = table._scan_state

        def held() -> ScanState:
            entered.set()
            release.wait(10)
            return real()

        monkeypatch.setattr(table, "_scan_state", held)
        (d / "b").write_bytes(_with_cluster(SIMPLE, 302))
        try:
            assert await _file_values(pmda, "mmv.a")  # noticed the change, started the scan
            assert await trio.to_thread.run_sync(entered.wait, 5), "no scan started"
            with trio.fail_after(2):
                for _ in range(10):  # answered while the scan is held
                    assert (await pmda.fetch_values(["mmv.control.files"]))["mmv.control.files"] == 1
        finally:
            release.set()
        assert await _eventually(pmda, "mmv.b", True)
        assert (await pmda.fetch_values(["mmv.control.files"]))["mmv.control.files"] == 2


async def test_owner_is_checked_on_the_descriptor_each_fetch(tmp_path: Path) -> None:
    """``allowed_users``: a loaded file (behind a symlink, outside the
    watched directory) given to another user is not served from the next
    fetch on; a symlink retargeted to another owner's file is not served."""
    require(os.geteuid() == 0, "needs root to give a file to another user")
    d, elsewhere = tmp_path / "mmv", tmp_path / "elsewhere"
    d.mkdir()
    elsewhere.mkdir()
    (elsewhere / "mine").write_bytes(SIMPLE)
    (elsewhere / "theirs").write_bytes(SIMPLE)
    os.chown(elsewhere / "theirs", 4242, 4242)
    (d / "app").symlink_to(elsewhere / "mine")
    table = MmvTable(dir=str(d), compat="1", allowed_users=str(os.geteuid()), sweep="600")
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        good = await _file_values(pmda, "mmv.app")
        assert good and not any(isinstance(v, PmdaError) for v in good.values())
        os.chown(elsewhere / "mine", 4242, 4242)  # no event in the watched directory
        now = await pmda.fetch_values(list(good))
        assert all(isinstance(v, PmdaError) for v in now.values()), now
        os.chown(elsewhere / "mine", os.geteuid(), os.getegid())
        os.symlink(elsewhere / "theirs", d / ".new")
        os.replace(d / ".new", d / "app")  # retargeted
        assert await _eventually(pmda, "mmv.app", False) == {}


def test_allowed_users_can_be_set_in_compat_mode() -> None:
    config = parse_args(["--mmv-compat", "--mmv-allowed-users", "root,4242", "-l", "/dev/null"])
    assert config.tables[0].options["allowed_users"] == "root,4242"
    assert "allowed_users" not in parse_args(["--mmv-compat", "-l", "/dev/null"]).tables[0].options
    with pytest.raises(SystemExit):  # a flag that would do nothing
        parse_args(["--mmv-allowed-users", "root", "-l", "/dev/null"])


def test_the_sections_named_are_all_that_is_read(tmp_path: Path) -> None:
    """Every corpus file: the parse of what FileRegions read is the parse of
    the whole file, and no more than the file's named sections and the
    strings they point at are read."""
    from pmda_py.mmv.layout import MmvFormatError
    from pmda_py.mmv.reader import MmvFile
    from pmda_py.mmv.regions import FileRegions
    from tests.mmv.corpus import corpus_files

    for path in corpus_files():
        data = path.read_bytes()
        big = tmp_path / path.name
        shutil.copy(path, big)
        with open(big, "r+b") as f:
            f.truncate(len(data) + (1 << 30))
        fd = os.open(big, os.O_RDONLY)
        try:
            try:
                whole: Any = MmvFile.from_buffer(data)
            except MmvFormatError as err:
                whole = str(err)
            img = FileRegions.load(functools.partial(os.pread, fd), os.fstat(fd).st_size)
            try:
                parsed: Any = MmvFile.from_buffer(img)
            except MmvFormatError as err:
                parsed = str(err)
        finally:
            os.close(fd)
            big.unlink()
        if isinstance(whole, MmvFile):
            assert isinstance(parsed, MmvFile), (path.name, parsed)
            assert (parsed.indoms, parsed.metrics, parsed.values, parsed.labels) == (
                whole.indoms,
                whole.metrics,
                whole.values,
                whole.labels,
            ), path.name
        assert img.read_bytes <= len(data) + 8192, (path.name, img.read_bytes)


async def test_rescans_leave_no_garbage_behind(tmp_path: Path) -> None:
    """Scans run with the cyclic collector paused and freeze what exists
    after (no collection pause stalls a reply): so a replaced scan and the
    dispatcher's replaced index must be freed by reference counting alone,
    or they would be frozen alive and never freed: no cyclic garbage, and
    no growth of the frozen objects over rescans."""
    import gc

    d = tmp_path / "mmv"
    d.mkdir()
    for k in range(20):
        (d / f"f{k:02d}").write_bytes(_with_cluster(SIMPLE, 400 + k))
    (d / "cut").write_bytes(SIMPLE[:100])  # refused: its sections run past its end
    (d / "toc").write_bytes(SIMPLE[:24] + struct.pack("=i", 5000) + SIMPLE[28:])  # refused: a TOC of 5000
    table = MmvTable(dir=str(d), compat="1", sweep="600")
    gc.unfreeze()  # what earlier tests left (frozen by their scans) is not this test's
    gc.collect()
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        counts = []
        for i in range(6):
            g = table.generation
            (d / f"zz{i % 2}").write_bytes(_with_cluster(SIMPLE, 500 + i % 2))
            for _ in range(500):
                await pmda.fetch_values(["mmv.control.files"])  # takes the scan, reindexes
                if table.generation != g:
                    break
                await trio.sleep(0.01)
            assert table.generation != g
            await pmda.traverse("mmv")
            counts.append(gc.get_freeze_count())
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.unfreeze()
            unreachable = gc.collect()
            ours = sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("pmda_py")})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert unreachable >= 0 and not ours, ours
    assert counts[-1] <= counts[1] * 1.2, counts


async def test_without_inotify_the_directory_mtime_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where inotify is missing (or out of watches) a new file is still
    noticed: the directory's mtime, one stat per request, as pmdammv."""
    from pmda_py.mmv.watch import DirWatch

    monkeypatch.setattr(DirWatch, "open", classmethod(lambda cls, directory: None))
    d = tmp_path / "mmv"
    d.mkdir()
    (d / "a").write_bytes(_with_cluster(SIMPLE, 601))
    table = MmvTable(dir=str(d), compat="1", sweep="600")
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        assert table._watch is None
        assert await _file_values(pmda, "mmv.a")
        (d / "b").write_bytes(_with_cluster(SIMPLE, 602))
        assert await _eventually(pmda, "mmv.b", True)


async def test_a_file_naming_too_much_is_refused_cheaply(tmp_path: Path) -> None:
    """A header whose sections add up to more than 64 MiB (a VALUES section
    of 4 M entries, inside a sparse 1 GiB file) or a TOC of more than 1024
    entries: the file is refused with a log line naming it, and nothing of
    the claimed sections is read."""
    from structlog.testing import capture_logs

    from pmda_py.mmv.layout import HEADER, TOC
    from pmda_py.mmv.reader import MmvFile

    mf = MmvFile.from_buffer(SIMPLE)
    data = bytearray(SIMPLE)
    for t in range(struct.unpack_from("=i", data, 24)[0]):
        off = HEADER.size + TOC.size * t
        ttype, _count, sec = TOC.unpack_from(data, off)
        if ttype == 4:  # VALUES
            TOC.pack_into(data, off, ttype, 4 << 20, sec)
    d = tmp_path / "mmv"
    d.mkdir()
    (d / "huge").write_bytes(bytes(data))
    os.truncate(d / "huge", 1 << 30)
    (d / "tocs").write_bytes(SIMPLE[:24] + struct.pack("=i", 5000) + SIMPLE[28:])
    (d / "good").write_bytes(_with_cluster(SIMPLE, 700))
    assert mf.values
    tracemalloc.start()
    try:
        with capture_logs() as logs:
            table = MmvTable(dir=str(d), compat="1")
            async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
                assert await _file_values(pmda, "mmv.good")
                names = await pmda.traverse("mmv")
                assert not any(n.startswith(("mmv.huge.", "mmv.tocs.")) for n in names), names
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    problems = {e["file"]: e["problem"] for e in logs if e["event"] == "mmv_problem"}
    assert "64" in problems["huge"] or str(64 << 20) in problems["huge"], problems
    assert "TOC count 5000" in problems["tocs"], problems
    assert table.last_scan is not None and table.last_scan.read_bytes < 64 * 1024
    assert peak < 32 << 20, peak


def test_an_unknown_allowed_user_is_refused_at_start(tmp_path: Path) -> None:
    """A name in ``--mmv-allowed-users`` that is no user is one line on
    stderr and exit 1 at start (it would leave every file out, the agent
    running and exporting nothing); names and uids that resolve start it."""
    base = ["--mmv-compat", "--mmv-dir", str(tmp_path), "-l", str(tmp_path / "mmv.log")]
    r = subprocess.run(
        pmda_py_argv("run", *base, "--mmv-allowed-users", "root,no-such-user-here"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # (CREDS, when it starts)
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1, r
    (line,) = r.stderr.splitlines()
    assert line.startswith("pmda-py run: ") and "allowed_users: no such user 'no-such-user-here'" in line, line
    ok = subprocess.run(
        pmda_py_argv("run", *base, "--mmv-allowed-users", "root,4242"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and ok.stderr == "", ok


def test_the_timers_are_the_documented_ones() -> None:
    """docs/mmv.md: a request waits at most ``rescan_wait`` (5 ms) for a
    rescan, a directory scanned in under ``inline_scan`` (2 ms) is rescanned
    before the request, the sweep runs every ``sweep`` (1 s); options set them."""
    t = MmvTable(dir="/nonexistent")
    assert (t.rescan_wait, t.inline_scan, t.sweep_interval) == (0.005, 0.002, 1.0)
    t = MmvTable(dir="/nonexistent", rescan_wait="0.1", inline_scan="0", sweep="30")
    assert (t.rescan_wait, t.inline_scan, t.sweep_interval) == (0.1, 0.0, 30.0)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("sweep", "x", "not a number: 'x'"),
        ("sweep", "-1", "'-1' is not a number of seconds above 0"),
        ("sweep", "0", "'0' is not a number of seconds above 0"),
        ("rescan_wait", "nan", "'nan' is not a number of seconds 0 or more"),
        ("inline_scan", "-2", "'-2' is not a number of seconds 0 or more"),
    ],
)
def test_a_bad_timer_names_itself(key: str, value: str, why: str) -> None:
    """A timer that is not seconds is refused with its name and value (a
    negative sweep would spin the scanner thread)."""
    with pytest.raises(ValueError, match=f"^{key}: {re.escape(why)}$"):
        MmvTable(dir="/nonexistent", **{key: value})


def _strings_file(path: Path, n: int, gap: int, cluster: int = 9, tail: int = 0) -> None:
    """A v2 file: indom 1 of ``n`` instances and STRING metric ``s`` over it,
    whose values' texts lie past the file's sections, one every ``gap``
    bytes (``gap`` 4096: each on a page of its own, page after page), in a
    sparse tail (plus ``tail`` bytes more)."""
    tocs = 5
    off_indoms = 40 + 16 * tocs
    off_insts = off_indoms + 32
    off_metrics = off_insts + 24 * n
    off_values = off_metrics + 48
    off_strings = off_values + 32 * n
    size = off_strings + 256 * (n + 1)
    buf = bytearray(size)
    toc = [(1, 1, off_indoms), (2, n, off_insts), (3, 1, off_metrics), (4, n, off_values), (5, n + 1, off_strings)]
    put_head(buf, toc, cluster)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, n, off_insts, 0, 0)
    buf[off_strings] = ord("s")
    struct.pack_into("=QIiIIiIQQ", buf, off_metrics, off_strings, 1, 6, 3, 0, 1, 0, 0, 0)  # STRING, instant
    text = -(-size // 4096) * 4096
    for k in range(n):
        name = b"i%d" % k
        so = off_strings + 256 * (k + 1)
        buf[so : so + len(name)] = name
        struct.pack_into("=QIiQ", buf, off_insts + 24 * k, off_indoms, 0, k, so)
        struct.pack_into("=QqQQ", buf, off_values + 32 * k, 0, text + k * gap, off_metrics, off_insts + 24 * k)
    path.write_bytes(bytes(buf))
    os.truncate(path, text + n * gap + tail)


async def test_texts_on_page_after_page_cost_one_read_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch reads what the values point at once: 4 000 STRING values
    whose texts lie on consecutive pages of a sparse tail cost 4 000 pages
    (16 MiB), and the reply comes at once (regions that touched were merged
    by reading them again, 4 000 times: 32 GiB, 20 s and more)."""
    d = tmp_path / "mmv"
    d.mkdir()
    _strings_file(d / "app", 4000, 4096)
    table = MmvTable(dir=str(d), compat="1")
    reads: list[int] = []
    real = os.pread

    def pread(fd: int, n: int, off: int) -> bytes:
        reads.append(n)
        return real(fd, n, off)

    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        assert list(await pmda.traverse("mmv.app")) == ["mmv.app.s"]
        monkeypatch.setattr(os, "pread", pread)  # (the table reads through os.pread)
        with trio.fail_after(10):
            got = await pmda.fetch_values(["mmv.app.s"])
        monkeypatch.undo()
    assert len(got["mmv.app.s"]) == 4000 and set(got["mmv.app.s"].values()) == {""}, got
    assert sum(reads) < 20 << 20, sum(reads)


async def test_a_file_pointing_at_too_much_costs_only_its_metric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values whose texts are spread over more than the text budget: the
    metric is refused (PM_ERR_GENERIC) with one log line, before any text
    is read (the values section is all a fetch reads of the file; it read
    128 MiB of text, a third of a second, each fetch), and another file's
    metric in the same fetch is answered."""
    from structlog.testing import capture_logs

    from pmda_py.mmv.layout import TEXT_BUDGET

    d = tmp_path / "mmv"
    d.mkdir()
    n = TEXT_BUDGET // 4096 + 100
    _strings_file(d / "app", n, 4096)
    (d / "good").write_bytes(_with_cluster(SIMPLE, 700))
    table = MmvTable(dir=str(d), compat="1", sweep="600")
    reads: list[int] = []
    real = os.pread

    def pread(fd: int, size: int, off: int) -> bytes:
        reads.append(size)
        return real(fd, size, off)

    with capture_logs() as logs:
        async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
            good = list(await pmda.traverse("mmv.good"))
            for _ in range(3):
                monkeypatch.setattr(os, "pread", pread)
                with trio.fail_after(10):
                    got = await pmda.fetch_values(["mmv.app.s", *good])
                monkeypatch.undo()
    assert isinstance(got["mmv.app.s"], PmdaError) and "Generic" in str(got["mmv.app.s"]), got["mmv.app.s"]
    assert good and not any(isinstance(got[x], PmdaError) for x in good), got
    lines = [e for e in logs if e["event"] == "mmv_problem" and e["file"] == "app"]
    assert len(lines) == 1 and str(TEXT_BUDGET) in lines[0]["problem"], lines
    assert 0 < sum(reads) < 3 * (32 * n + 8192), sum(reads)  # the values sections, 3 fetches


async def test_scattered_texts_are_read_exactly_and_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts 64 KiB apart: each costs one read of its own 255 bytes, not a
    page or two; so many of them that the reads would cost more than the
    text budget (each read charged as a page more) are refused before any
    is read, where they cost one 4 KiB read each, 30 MiB a fetch."""
    from pmda_py.mmv.layout import READ_CHARGE, TEXT_BUDGET

    real = os.pread
    for n, refused in ((1000, False), (TEXT_BUDGET // (255 + READ_CHARGE) + 10, True)):
        d = tmp_path / f"mmv{n}"
        d.mkdir()
        _strings_file(d / "app", n, 65536)
        reads: list[int] = []

        def pread(fd: int, size: int, off: int, reads: list[int] = reads) -> bytes:
            reads.append(size)
            return real(fd, size, off)

        async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
            assert list(await pmda.traverse("mmv.app")) == ["mmv.app.s"]
            monkeypatch.setattr(os, "pread", pread)
            with trio.fail_after(10):
                got = (await pmda.fetch_values(["mmv.app.s"]))["mmv.app.s"]
            monkeypatch.undo()
        texts = [r for r in reads if r == 255]
        if refused:
            assert isinstance(got, PmdaError) and "Generic" in str(got), got
            assert not texts and sum(reads) < 32 * n + 8192, (len(texts), sum(reads))
        else:
            assert isinstance(got, dict) and len(got) == n and set(got.values()) == {""}, got
            assert len(texts) == n and sum(reads) < 32 * n + 8192 + 255 * n, sum(reads)


def _far_slots_file(path: Path, m: int, v: int, cluster: int = 9) -> None:
    """A v2 file: indom 1 of 2 instances and ``m`` U64 metrics over it, each
    with its two value records at slot k and slot v - m + k of a values
    section of ``v`` records (the records between name no metric)."""
    tocs = 5
    off_indoms = 40 + 16 * tocs
    off_insts = off_indoms + 32
    off_metrics = off_insts + 24 * 2
    off_values = off_metrics + 48 * m
    off_strings = off_values + 32 * v
    buf = bytearray(off_strings + 256 * (m + 2))
    toc = [(1, 1, off_indoms), (2, 2, off_insts), (3, m, off_metrics), (4, v, off_values), (5, m + 2, off_strings)]
    put_head(buf, toc, cluster)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, 2, off_insts, 0, 0)
    for i in range(2):
        so = off_strings + 256 * (m + i)
        buf[so : so + 2] = b"i%d" % i
        struct.pack_into("=QIiQ", buf, off_insts + 24 * i, off_indoms, 0, i, so)
    for k, mo in enumerate(put_u64_metrics(buf, m, off_metrics, off_strings)):
        for slot, inst in ((k, 0), (v - m + k, 1)):
            struct.pack_into("=QqQQ", buf, off_values + 32 * slot, 1000 + k, 0, mo, off_insts + 24 * inst)
    path.write_bytes(bytes(buf))


async def test_metrics_at_both_ends_of_a_big_values_section_copy_it_once(tmp_path: Path) -> None:
    """64 metrics, each with a value at the start and at the end of an
    8 MiB values section: a fetch of them reads the section once and takes
    each metric's values from it without copying it (each metric copied
    the section up to its last value: 64 x 8 MiB here, 7 s a fetch with
    200 metrics over 64 MiB, past pmcd's timeout)."""
    d = tmp_path / "mmv"
    d.mkdir()
    m, v = 64, 1 << 18
    _far_slots_file(d / "app", m, v)
    async with open_table_pmda(MmvTable(dir=str(d), compat="1"), mount="mmv", domain=70) as pmda:
        names = list(await pmda.traverse("mmv.app"))
        assert len(names) == m
        tracemalloc.start()
        try:
            with trio.fail_after(30):
                got = await pmda.fetch_values(names)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert all(got[f"mmv.app.m{k}"] == {0: 1000 + k, 1: 1000 + k} for k in range(m)), got
    assert peak < 32 * v + (4 << 20), f"{peak} bytes allocated to fetch from an {32 * v}-byte values section"


@pytest.mark.parametrize("how", ["one indom, instances over a sparse tail", "many indoms, the same instances"])
def test_indoms_naming_too_many_instances_are_refused(tmp_path: Path, how: str) -> None:
    """The instances indoms point at are outside what the TOC's 64 MiB
    limit counts (anywhere in the file, and shared by any number of
    indoms): more than 64 MiB of instance records in all refuse the file,
    before an indom's instances are read."""
    from pmda_py.mmv.layout import INDOM, MAX_INSTANCES, MmvFormatError
    from pmda_py.mmv.reader import MmvFile
    from pmda_py.mmv.regions import FileRegions

    src = (MMV / "reg_v2_longnames.mmv").read_bytes()
    ind = MmvFile.from_buffer(src).indoms[0]
    data = bytearray(src)
    serial, _icount, _ioff, short, helpt = INDOM.unpack_from(data, ind.offset)
    if how.startswith("one"):
        INDOM.pack_into(data, ind.offset, serial, MAX_INSTANCES // 24 + 1, len(src), short, helpt)
        size = len(src) + (1 << 30)
    else:  # every record of the INDOMS section names the same 40 000 instances (all but the first are then refused)
        many = MAX_INSTANCES // (24 * 40000) + 1
        first = len(data)
        data += bytes(24 * 40000)
        for k in range(many):
            data += INDOM.pack(serial + k, 40000, first, short, helpt)
        toc = next(40 + 16 * t for t in range(4) if struct.unpack_from("=I", data, 40 + 16 * t)[0] == 1)
        struct.pack_into("=IIQ", data, toc, 1, many, len(data) - INDOM.size * many)
        size = len(data)
    path = tmp_path / "f"
    path.write_bytes(bytes(data))
    os.truncate(path, size)
    read = 0

    def read_at(n: int, off: int) -> bytes:
        nonlocal read
        read += n
        assert read < 256 << 20, "read more than 256 MiB"
        return os.pread(fd, n, off)

    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(MmvFormatError, match=f"instances \\(limit {MAX_INSTANCES}\\)"):
            MmvFile.from_buffer(FileRegions.load(read_at, size))
    finally:
        os.close(fd)
