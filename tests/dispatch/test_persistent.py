"""``InDom(persistent=True)``: instance ids survive restarts, reordering and
removal of names (kept in the state directory as ``DOMAIN.SERIAL`` in
pmdaCache's own format); a file libpcp would not load is logged and left as
it is, never moved or overwritten."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from structlog.testing import capture_logs

from pmda_py.pmapi import indom
from pmda_py.pmdacache import parse
from pmda_py.testing.client import open_pipe_pmda
from pmda_py.testing.harness import open_table_pmda
from tests.conftest import REPO
from tests.tables.persist import Names

DOMAIN = 250


async def _ids(names: str, state: Path | None) -> dict[str, int]:
    async with open_table_pmda(Names(names), mount="n", domain=DOMAIN, state_dir=str(state) if state else None) as pmda:
        return {e.name: e.inst for e in await pmda.instance(indom(DOMAIN, 7))}


async def test_ids_survive_restart_reorder_and_removal(tmp_path: Path) -> None:
    first = await _ids("a,b,c", tmp_path)
    assert first == {"a": 0, "b": 1, "c": 2}
    assert await _ids("c,x,a", tmp_path) == {"c": 2, "x": 3, "a": 0}
    assert await _ids("b", tmp_path) == {"b": 1}  # a, c, x gone for now
    assert await _ids("y,x,c", tmp_path) == {"y": 4, "x": 3, "c": 2}  # never an old id for a new name
    saved = (tmp_path / f"{DOMAIN}.7").read_bytes()
    assert saved.splitlines()[0] == b"2 0 2147483647"
    assert [(e.inst, e.name) for e in parse(saved).entries] == [(0, "a"), (1, "b"), (2, "c"), (3, "x"), (4, "y")]


def _listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


async def test_without_a_state_dir_ids_follow_the_order(tmp_path: Path) -> None:
    assert await _ids("a,b", None) == {"a": 0, "b": 1}
    assert await _ids("b,a", None) == {"b": 0, "a": 1}
    assert _listing(tmp_path) == []


async def test_unreadable_cache_is_logged_and_left_in_place(tmp_path: Path) -> None:
    """Files libpcp would not load either (and the old pmda_py format): the
    ids are served, the file stays byte for byte, nothing is moved aside."""
    old_format = "# pmda_py instance cache: id name\n0 a\nx b\n"
    for bad in ("\x00\xff garbage\n", "3 1 x\n", "2 0 2147483647\n\n", "2 0 2147483647\n0 5 [61\n", old_format):
        cache = tmp_path / f"{DOMAIN}.7"
        cache.write_text(bad, errors="surrogateescape")
        with capture_logs() as logs:
            assert await _ids("p,q", tmp_path) == {"p": 0, "q": 1}
        problem = next(e for e in logs if e["event"] == "instance_cache_problem")
        assert problem["indom"] == f"{DOMAIN}.7" and "left in place" in problem["problem"]
        assert cache.read_text(errors="surrogateescape") == bad
        assert _listing(tmp_path) == [f"{DOMAIN}.7"]
        cache.unlink()


async def test_old_pmda_py_files_are_converted_with_their_ids(tmp_path: Path) -> None:
    cache = tmp_path / f"{DOMAIN}.7"
    cache.write_text("# pmda_py instance cache: id name\n0 red\n3 blue sky\n")
    assert await _ids("blue sky,green", tmp_path) == {"blue sky": 3, "green": 4}
    parsed = parse(cache.read_bytes())
    assert parsed.problem is None
    assert [(e.inst, e.name) for e in parsed.entries] == [(0, "red"), (3, "blue sky"), (4, "green")]


async def test_a_libpcp_file_keeps_its_ids_and_inactive_entries(tmp_path: Path) -> None:
    cache = tmp_path / f"{DOMAIN}.7"
    cache.write_text("2 0 2147483647\n0 1795502587 sec\n4 1795502588 min\n")
    assert await _ids("min,hour", tmp_path) == {"min": 4, "hour": 5}
    lines = cache.read_text().splitlines()
    assert lines[:2] == ["2 0 2147483647", "0 1795502587 sec"]  # inactive: kept with its stamp
    assert [line.split(" ", 2)[::2] for line in lines[2:]] == [["4", "min"], ["5", "hour"]]


async def test_unwritable_state_dir_is_logged_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with capture_logs() as logs:
        assert await _ids("a,b", tmp_path / "file" / "sub") == {"a": 0, "b": 1}
    assert any(e["event"] == "instance_cache_unsaved" for e in logs), logs


async def test_daemon_restart_with_names_in_another_order(tmp_path: Path) -> None:
    """The daemon itself (``pmda-py run -c``, state in ``--state-dir``)."""
    state = tmp_path / "state"
    seen = []
    for names in ("red,green,blue", "blue,violet,red,green"):
        conf = tmp_path / "pmda.conf"
        conf.write_text(
            f"[pmda]\ndomain = {DOMAIN}\npythonpath = {REPO}\n\n"
            f"[table n]\ntable = tests.tables.persist:Names\nmount = n\nnames = {names}\n"
        )
        argv = [
            sys.executable,
            "-m",
            "pmda_py",
            "run",
            "-c",
            str(conf),
            "-l",
            str(tmp_path / "log"),
            "--state-dir",
            str(state),
        ]
        async with open_pipe_pmda(argv, cwd="/", env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")}) as pmda:
            seen.append({e.name: e.inst for e in await pmda.instance(indom(DOMAIN, 7))})
            values = (await pmda.fetch_values(["n.value"]))["n.value"]
            assert values == {i: len(n) for n, i in seen[-1].items()}
    assert seen[0] == {"red": 0, "green": 1, "blue": 2}
    assert seen[1] == {"blue": 2, "violet": 3, "red": 0, "green": 1}
