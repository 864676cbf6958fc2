"""Every malformed corpus file: our harvester's view (files loaded, reload
flag, metrics exported, metrics with values) against the row pmdammv's
behaviour was recorded as in ``malformed/SUMMARY.md``: 6.0.3's, or 7.x's
where 7.x fixed the bug, or a documented deliberately safer outcome."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from pmda_py.errors import PmdaError
from pmda_py.mmv.table import MmvTable
from pmda_py.testing.harness import open_table_pmda
from tests.mmv.corpus import MMV, RECORDED_WITH

MALFORMED = MMV / "malformed"


def _rows() -> dict[str, dict[str, tuple[int, int, int, int] | None]]:
    rows: dict[str, dict[str, tuple[int, int, int, int] | None]] = {}
    name = ""
    try:
        text = (MALFORMED / "SUMMARY.md").read_text()
    except OSError:
        return rows  # test_summary_is_there fails, the collection goes on
    for line in text.splitlines():
        m = re.match(r"^## (\S+)", line)
        if m:
            name = m.group(1)
            rows[name] = {}
            continue
        m = re.match(r"^\* (6\.0\.3|7\.x):\s+(.*)$", line)
        # only the first entry under a heading is that file's (later ones describe mutations without a file)
        if m and name and m.group(1) not in rows[name]:
            nums = re.match(r"files=(\d+) reload=(\d+) metrics=(\d+) with_values=(\d+)", m.group(2))
            if nums:
                files, reload, metrics, with_values = (int(x) for x in nums.groups())
                rows[name][m.group(1)] = (files, reload, metrics, with_values)
            else:
                rows[name][m.group(1)] = None
    return rows


ROWS = _rows()

#: where we are deliberately different from both recorded rows, and why
SAFER: dict[str, str] = {}


async def _our_view(mmv: Path, tmp: Path) -> tuple[int, int, int, int]:
    d = tmp / "mmv"
    d.mkdir()
    shutil.copy(mmv, d / f"rs_{mmv.stem}")
    table = MmvTable(dir=str(d), compat="1", pcp_version=RECORDED_WITH)
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        names = [n for n in await pmda.traverse("mmv") if not n.startswith("mmv.control.")]
        with_values = 0
        for n in names:
            v = (await pmda.fetch_values([n]))[n]
            if not isinstance(v, PmdaError) and v not in (None, {}):
                with_values += 1
        ctl = await pmda.fetch_values(["mmv.control.files", "mmv.control.reload"])
        return ctl["mmv.control.files"], ctl["mmv.control.reload"], len(names), with_values


def test_summary_is_there() -> None:
    assert len(ROWS) >= 25, f"{MALFORMED / 'SUMMARY.md'} is missing or has lost its rows"


@pytest.mark.parametrize("name", sorted(ROWS), ids=str)
async def test_malformed_file(name: str, tmp_path: Path) -> None:
    mmv = MALFORMED / f"{name}.mmv"
    assert mmv.exists(), f"{mmv} is missing (tests/data/README.md says how it was made)"
    with capture_logs() as logs:
        ours = await _our_view(mmv, tmp_path)
    row = ROWS[name]
    expected = {k: v for k, v in row.items() if v is not None}
    if name in SAFER:
        return
    assert ours in expected.values(), f"{name}: ours {ours}, pmdammv {expected}"
    if ours[2] < max((v[2] for v in expected.values()), default=0) or ours[0] == 0:
        # something was dropped: a log line names the file and the problem
        assert any(e.get("event") == "mmv_problem" and e.get("file") == f"rs_{name}" for e in logs), logs
