"""Every PCP error code we know has pmErrStr's text and PCP's symbolic name,
as the installed PCP's ``pmerr -l`` lists them (the dbpmda transcripts and
the logs print these)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pmda_py.errors import PmErr, codename, errstr
from pmda_py.pcpversion import pcp_version
from tests.integration.pcpbed import require_pcp

pytestmark = pytest.mark.pcp

# added after 6.0.3 (in 6.0.4): 6.0.3's pmerr has no entry, our text is 7.x err.c's
_NEWER_THAN_603 = {PmErr.ARG}


def _pmerr_table() -> dict[int, tuple[str, str]]:
    require_pcp()
    pmerr = shutil.which("pmerr")
    assert pmerr, "pmerr is part of the pcp package"
    out = subprocess.run([pmerr, "-l"], capture_output=True, text=True, timeout=30).stdout  # pmerr -l exits 1
    table = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(-\d+)\s+(PM_ERR_\w+)\s+(.*)$", line)
        if m:
            table[int(m.group(1))] = (m.group(2), m.group(3))
    assert len(table) > 50, out
    return table


def test_messages_and_names_match_pmerr() -> None:
    table = _pmerr_table()
    wrong = []
    for err in PmErr:
        if err in _NEWER_THAN_603 and pcp_version() < (6, 0, 4):
            assert int(err) not in table  # 6.0.3: absent; newer PCP: compared below
            continue
        assert int(err) in table, f"{err!r} is not a PCP {len(table)}-code error"
        name, text = table[int(err)]
        if (codename(err), errstr(err)) != (name, text):
            wrong.append((int(err), codename(err), errstr(err), name, text))
    assert not wrong, wrong


def test_every_pcp_code_is_known() -> None:
    table = _pmerr_table()
    missing = {code: name for code, (name, _) in table.items() if code not in {int(e) for e in PmErr}}
    assert not missing, missing


def test_version_follows_pcp_conf() -> None:
    """errstr follows the installed PCP (pcp.conf), so the comparisons above
    are against the PCP the texts were chosen for."""
    require_pcp()
    from pmda_py.pcpversion import parse

    conf = Path(os.environ.get("PCP_CONF", "/etc/pcp.conf")).read_text()
    m = re.search(r"^PCP_VERSION=(\S+)", conf, re.M)
    assert m, "pcp.conf names its PCP_VERSION"
    if "PCP_VERSION" not in os.environ:
        assert pcp_version() == parse(m.group(1))
