"""One agent, two implementations, one instance cache: PCP's pmdasimple.python
(libpcp_pmda's pmdaCache) and ``pmda-py run --table simple=simple -d 253``
take turns under one private pmcd and one PCP_VAR_DIR.  pmdasimple's
``config/pmda/253.1`` survives our run with its ids (and is never moved
aside), and pmdasimple reads ours back with the same ids.  Instance names
and ids are read through pmcd (``pminfo -f simple.now``) each time."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_line
from tests.integration.pcpbed import SIMPLE_PY, PrivatePmcd, simple_cache

pytestmark = pytest.mark.pcp

PMNS = "root {\n    simple\t253:*:*\n}\n"


@pytest.fixture
def bed(pcp_env: dict[str, str]) -> Iterator[tuple[Path, dict[str, str]]]:
    """A private copy of PCP_PMDAS_DIR (simple.conf is changed) and a root."""
    root = Path(tempfile.mkdtemp(prefix="pmda_py-cache-"))
    root.chmod(0o755)
    pmdas = root / "pmdas"
    shutil.copytree(pcp_env["PCP_PMDAS_DIR"], pmdas)
    for d in (pmdas, pmdas / "simple"):
        d.chmod(0o755)
    try:
        yield root, {**pcp_env, "PCP_PMDAS_DIR": str(pmdas)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _now(pmcd: PrivatePmcd) -> dict[str, int]:
    pmcd.wait("simple.now")
    out = pmcd.tool("pminfo", "-f", "simple.now").stdout
    return {name: int(inst) for inst, name in re.findall(r'inst \[(\d+) or "([^"]+)"\]', out)}


def _entries(path: Path) -> list[tuple[int, int, str]]:
    lines = path.read_text().splitlines()
    assert lines[0] == "2 0 2147483647", lines
    return [(int(i), int(s), n) for i, s, n in (line.split(" ", 2) for line in lines[1:])]


@pytest.mark.slow
def test_pmdasimple_and_pmda_py_keep_each_others_ids(bed: tuple[Path, dict[str, str]]) -> None:
    root, env = bed
    conf = Path(env["PCP_PMDAS_DIR"]) / "simple" / "simple.conf"
    cache = simple_cache(env)
    theirs = f"simple 253 pipe binary /usr/bin/python3 {SIMPLE_PY} -d 253"
    log = root / "pmda-py.log"
    # no --state-dir: the default is $PCP_VAR_DIR/config/pmda, pmdaCache's place
    ours = "simple 253 pipe binary " + pmda_py_line("run", "--table", "simple=simple", "-d", "253", "-l", log)

    conf.write_text("hour,min\n")
    pmcd = PrivatePmcd(root, [theirs], PMNS, env=env).start("simple.numfetch")
    try:
        assert _now(pmcd) == {"hour": 0, "min": 1}
        written_by_pmdasimple = _entries(cache)
        owner = (cache.stat().st_uid, cache.stat().st_gid, cache.stat().st_mode)
        assert [(i, n) for i, _, n in written_by_pmdasimple] == [(0, "hour"), (1, "min")]

        conf.write_text("sec,min\n")  # hour goes away, sec is new
        os.utime(conf, (1, 1))  # (pmdasimple notices by the file's mtime; we read it at start)
        pmcd.reconfigure([ours], "simple.numfetch")
        assert _now(pmcd) == {"sec": 2, "min": 1}
        after_us = _entries(cache)
        assert after_us[0] == written_by_pmdasimple[0]  # inactive: kept, its stamp too
        assert [(i, n) for i, _, n in after_us] == [(0, "hour"), (1, "min"), (2, "sec")]
        assert sorted(os.listdir(cache.parent)) == ["253.1"]  # nothing moved aside, no temporaries left
        # still pmdasimple's to rewrite in place (it runs as the PCP user, we may be root)
        assert (cache.stat().st_uid, cache.stat().st_gid, cache.stat().st_mode) == owner

        conf.write_text("sec,min,hour\n")
        pmcd.reconfigure([theirs], "simple.numfetch")
        assert _now(pmcd) == {"sec": 2, "min": 1, "hour": 0}  # pmdasimple read our file

        conf.write_text("hour,sec\n")
        pmcd.reconfigure([ours], "simple.numfetch")
        assert _now(pmcd) == {"hour": 0, "sec": 2}
    finally:
        pmcd.stop()
    assert "instance_cache_problem" not in log.read_text()
