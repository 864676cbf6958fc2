"""Churn: MMV files created, rewritten in place, truncated and deleted while
the harvester is fetching.  No exception escapes, the daemon keeps answering,
and no value ever comes from the wrong metric or instance."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from pmda_py.errors import PmdaError
from pmda_py.mmv.table import MmvTable
from pmda_py.testing.harness import open_table_pmda
from tests.integration.pcpbed import require_pcp

pytestmark = pytest.mark.pcp

REPO = Path(__file__).resolve().parents[2]


def _write(path: Path, metrics: int, instances: int, cluster: int) -> None:
    subprocess.run(
        [
            "/usr/bin/python3",
            str(REPO / "scripts" / "write_mmv.py"),
            str(path),
            "--metrics",
            str(metrics),
            "--instances",
            str(instances),
            "--cluster",
            str(cluster),
        ],
        check=True,
        capture_output=True,
    )


def _check(values: dict[str, object]) -> int:
    """Every value must be item * 1000 + instance (write_mmv's pattern)."""
    checked = 0
    for name, v in values.items():
        if isinstance(v, PmdaError) or v is None:
            continue
        item = int(name.rsplit(".m", 1)[1])
        assert isinstance(v, dict), (name, v)
        for inst, val in v.items():
            assert val == item * 1000 + inst, f"{name}[{inst}] = {val}: a value from the wrong place"
            checked += 1
    return checked


@pytest.mark.slow
async def test_churn_while_fetching(tmp_path: Path) -> None:
    require_pcp()
    src = tmp_path / "src"
    src.mkdir()
    _write(src / "big", 20, 10, 5)
    _write(src / "small", 4, 3, 6)
    d = tmp_path / "mmv"
    d.mkdir()
    shutil.copy(src / "big", d / "app")
    stop = threading.Event()
    ops = {"n": 0}

    def churn() -> None:
        full = (src / "big").read_bytes()
        small = (src / "small").read_bytes()
        k = 0
        while not stop.is_set():
            target = d / "app"
            step = k % 6
            try:
                if step == 0:  # truncate in place (a writer died mid-write)
                    with open(target, "r+b") as f:
                        f.truncate(len(full) // 2)
                elif step == 1:  # rewrite in place, whole
                    with open(target, "r+b") as f:
                        f.write(full)
                elif step == 2:  # delete
                    target.unlink(missing_ok=True)
                elif step == 3:  # a different file under the same name
                    target.write_bytes(small)
                elif step == 4:  # zero-length
                    target.write_bytes(b"")
                else:  # back to the big one, atomically
                    tmp = d / ".app.tmp"
                    tmp.write_bytes(full)
                    os.replace(tmp, target)
            except OSError:
                pass
            k += 1
            ops["n"] = k
            time.sleep(0.002)

    table = MmvTable(dir=str(d), compat="1")
    thread = threading.Thread(target=churn, daemon=True)
    checked = fetches = 0
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        thread.start()
        try:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                try:
                    names = list(await pmda.traverse("mmv.app"))
                except Exception:
                    names = []
                if names:
                    try:
                        values = await pmda.fetch_values(names)
                    except Exception as err:  # a name may vanish between traverse and fetch
                        assert "Unknown" in str(err), err
                        continue
                    checked += _check(values)
                fetches += 1
                await trio.lowlevel.checkpoint()
        finally:
            stop.set()
            thread.join()
        # the daemon still answers normally afterwards (the rescan runs in
        # the scanner thread: the answer is the new file's within moments)
        shutil.copy(src / "big", d / "app")
        os.utime(d)
        final_checked = 0
        give_up = time.monotonic() + 5
        while final_checked != 200 and time.monotonic() < give_up:
            await trio.sleep(0.01)
            try:
                final = await pmda.fetch_values([f"mmv.app.m{i}" for i in range(1, 21)])
            except Exception as err:  # the previous scan's names: not there yet
                assert "Unknown" in str(err), err
                continue
            final_checked = _check(final)
        assert final_checked == 200
    assert ops["n"] > 50 and fetches > 20 and checked > 0, (ops, fetches, checked)
