"""``-U``: drop to the PCP user after opening the log and the socket (as root)."""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

from pmda_py.testing.client import open_socket_pmda
from tests.conftest import require


def needs_root_and_pcp() -> None:
    require(
        os.geteuid() == 0 and any(p.pw_name == "pcp" for p in pwd.getpwall()),
        "needs root and a 'pcp' user (CI runs as root with PCP installed)",
    )


def _uids(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError("no Uid line")


async def test_drop_to_pcp_after_binding(tmp_path: Path) -> None:
    needs_root_and_pcp()
    os.chmod(tmp_path, 0o755)
    sock = tmp_path / "pmda.sock"
    log = tmp_path / "pmda.log"
    pcp = pwd.getpwnam("pcp")
    cmd = [
        sys.executable,
        "-m",
        "pmda_py",
        "run",
        "-d",
        "253",
        "-u",
        str(sock),
        "-U",
        "pcp",
        "-l",
        str(log),
        "--table",
        "control=ctl",
    ]
    async with open_socket_pmda(unix=str(sock), command=cmd) as pmda:
        v = await pmda.fetch_values(["ctl.pid"])
        pid = v["ctl.pid"]
        assert _uids(pid) == [pcp.pw_uid] * 4  # real, effective, saved, fs
        st = sock.stat()
        assert (st.st_uid, st.st_gid) == (pcp.pw_uid, pcp.pw_gid)
        assert st.st_mode & 0o777 == 0o660
    # the log was opened as root, before the drop, and is still written to
    assert log.stat().st_uid == 0
    assert "privileges_dropped" in log.read_text()
