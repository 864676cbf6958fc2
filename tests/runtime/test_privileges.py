"""``-U``: drop to the PCP user after opening the log and the socket (as root)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from pmda_py.errors import PmErr
from pmda_py.testing.client import PmdaClient, PmdaReplyError, open_pipe_pmda, open_socket_pmda
from pmda_py.testing.support import traversable_dir
from pmda_py.wire import ErrorPdu
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
    python, extra = _python_for("pcp")  # the tables are imported after the drop: pcp must read the code
    cmd = [
        python,
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
    async with open_socket_pmda(unix=str(sock), command=cmd, env=extra) as pmda:
        v = await pmda.fetch_values(["ctl.pid"])
        pid = v["ctl.pid"]
        assert _uids(pid) == [pcp.pw_uid] * 4  # real, effective, saved, fs
        st = sock.stat()
        assert (st.st_uid, st.st_gid) == (pcp.pw_uid, pcp.pw_gid)
        assert st.st_mode & 0o777 == 0o660
    # the log was opened as root, before the drop, and is still written to
    assert log.stat().st_uid == 0
    assert "privileges_dropped" in log.read_text()


# ------------------------------------------- issue 19, case 1: nothing of a table as root

PROBE_TABLE = """\
import os
from pmda_py.table import Table, Metric
from pmda_py.pmapi import PmType
print("PROBE import euid", os.geteuid(), flush=True)
class Probe(Table):
    m = Metric('euid', cluster=41, item=0, type=PmType.U32)
    def __init__(self):
        super().__init__()
        print("PROBE init euid", os.geteuid(), flush=True)
    async def startup(self, context):
        print("PROBE startup euid", os.geteuid(), flush=True)
    async def fetch(self, request):
        return {self.m: os.geteuid()}
"""

SCRIPT = """\
#!/bin/sh
sleep 30 </dev/null >/dev/null 2>&1 &
echo "# TYPE script_uid gauge"
echo "script_uid $(id -u)"
echo "child_pid $!"
"""


def _groups(pid: int) -> set[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Groups:"):
            return {int(x) for x in line.split()[1:]}
    raise AssertionError("no Groups line")


def _python_for(user: str) -> tuple[str, dict[str, str]]:
    """An interpreter ``user`` can run pmda_py with: ours, or (when ours
    lives where ``user`` cannot read, e.g. under /root) the system's with
    our source and site-packages on PYTHONPATH."""
    import sysconfig

    probe = "import trio, structlog, attrs, pmda_py.runtime.main, pmda_py.openmetrics.scrape"
    repo = str(Path(__file__).resolve().parents[2])
    candidates = [
        (sys.executable, {}),
        ("/usr/bin/python3", {"PYTHONPATH": f"{repo}{os.pathsep}{sysconfig.get_paths()['purelib']}"}),
    ]
    for exe, extra in candidates:
        if _runs_as(user, exe, extra, probe):
            return exe, extra
    # a checkout where ``user`` cannot read (a clone under /root): a copy of
    # the package and the venv's site-packages in a world-readable temporary
    copy = _readable_copy(repo, sysconfig.get_paths()["purelib"])
    extra = {"PYTHONPATH": f"{copy}/src{os.pathsep}{copy}/site"}
    if _runs_as(user, "/usr/bin/python3", extra, probe):
        return "/usr/bin/python3", extra
    require(False, f"no python that user {user} can run pmda_py with")
    raise AssertionError("unreachable")


def _runs_as(user: str, exe: str, extra: dict[str, str], probe: str) -> bool:
    env = {**os.environ, **extra}
    try:
        r = subprocess.run([exe, "-c", probe], user=user, env=env, cwd="/", capture_output=True, timeout=60)
    except OSError:
        return False
    return r.returncode == 0


_COPIES: list[str] = []


def _readable_copy(repo: str, site: str) -> str:
    """pmda_py and the venv's site-packages copied where any user can read
    them (removed when the tests end)."""
    if _COPIES:
        return _COPIES[0]
    import atexit

    top = tempfile.mkdtemp(prefix="pmda_py-readable-")
    atexit.register(shutil.rmtree, top, True)
    os.chmod(top, 0o755)
    skip = shutil.ignore_patterns("__pycache__", "mypy*", "hypothesis*", "pip*", "setuptools*", "_pytest", "ruff*")
    shutil.copytree(os.path.join(repo, "pmda_py"), os.path.join(top, "src", "pmda_py"), ignore=skip)
    shutil.copytree(site, os.path.join(top, "site"), ignore=skip, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644)
    _COPIES.append(top)
    return top


def _descendants(pid: int) -> dict[int, tuple[str, str]]:
    """pid -> (user, command) of every process below ``pid`` (ps)."""
    out = subprocess.run(
        ["ps", "-ww", "-e", "-o", "pid=,ppid=,user:32=,args="], capture_output=True, text=True, check=True
    )
    rows: dict[int, tuple[int, str, str]] = {}
    for line in out.stdout.splitlines():
        fields = line.split(None, 3)
        rows[int(fields[0])] = (int(fields[1]), fields[2], fields[3] if len(fields) > 3 else "")
    found: dict[int, tuple[str, str]] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for p, (pp, user, args) in rows.items():
            if pp == parent and p not in found:
                found[p] = (user, args)
                frontier.append(p)
    return found


async def _fetch_ready(pmda: PmdaClient, names: list[str]) -> dict[str, Any]:
    """fetch_values, waiting for PMDAREADY after a PM_ERR_PMDANOTREADY."""
    for _ in range(20):
        try:
            return dict(await pmda.fetch_values(names))
        except PmdaReplyError as err:
            if err.code != PmErr.PMDANOTREADY:
                raise
            ready = await pmda.receive(timeout=10)
            assert isinstance(ready, ErrorPdu) and ready.code == PmErr.PMDAREADY
    raise AssertionError("never ready")


async def test_nothing_of_a_table_runs_as_root_under_dash_U() -> None:
    """Started as root with ``-U pcp``: the daemon, its OpenMetrics workers
    and their script children run as pcp; table imports, constructors and
    startup() ran as pcp; a root-only file named by a ``file://`` source is
    not exported; every file it created (state under a private
    PCP_VAR_DIR) belongs to pcp.  The log alone is root's: it is opened
    before the drop, as pmdaOpenLog does."""
    needs_root_and_pcp()
    pcp = pwd.getpwnam("pcp")
    python, extra = _python_for("pcp")
    with traversable_dir("pmda_py-privileges-") as root:
        conf, before = _bed(root, pcp)
        log = root / "pmda.log"
        env = {
            **extra,
            "PCP_VAR_DIR": str(root / "var"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "mods"), extra.get("PYTHONPATH", "")])),
        }
        cmd = [python, "-m", "pmda_py", "run", "-c", str(conf), "-U", "pcp", "-l", str(log)]
        async with open_pipe_pmda(cmd, env=env, cwd="/") as pmda:
            v = await _fetch_ready(pmda, ["probe.euid"])
            assert v["probe.euid"] == pcp.pw_uid
            names = ["om.public.public_value", "om.probe.script_uid", "om.probe.child_pid"]
            with trio.fail_after(20):
                while True:  # the sources' metrics appear once scraped
                    try:
                        v = await _fetch_ready(pmda, names)
                    except PmdaReplyError as err:
                        assert err.code == PmErr.NAME, err
                        await trio.sleep(0.2)
                        continue
                    if all(n in v for n in names):
                        break
                    await trio.sleep(0.2)
            assert v["om.public.public_value"] == 7
            assert v["om.probe.script_uid"] == pcp.pw_uid  # the script ran as pcp
            with pytest.raises(PmdaReplyError):  # root's 0600 file is not exported
                await pmda.lookup(["om.secret.secret_value"])
            assert _uids(pmda.pid) == [pcp.pw_uid] * 4
            assert _groups(pmda.pid) == set(os.getgrouplist("pcp", pcp.pw_gid))  # root's groups are gone
            procs = _descendants(pmda.pid)
            workers = [p for p, (_u, a) in procs.items() if "pmda_py.openmetrics.scrape" in a]
            assert len(workers) == 2, procs
            assert all(u == "pcp" for u, _ in procs.values()), procs
            for p in procs:
                assert _uids(p) == [pcp.pw_uid] * 4, (p, procs[p])
            child = int(v["om.probe.child_pid"])  # the script's own child (sleep 30)
            try:
                uids: list[int] | None = _uids(child)
            except FileNotFoundError:  # ended with the script's process group once the script finished
                uids = None
            if uids is not None:
                assert uids == [pcp.pw_uid] * 4
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)  # ours to end: started by this test's daemon
        text = log.read_text()
        for when in ("import", "init", "startup"):
            assert f"PROBE {when} euid {pcp.pw_uid}" in text, text
        assert "PROBE import euid 0" not in text
        assert text.index("privileges_dropped") < text.index("PROBE import")
        created = _created(root, before, log)
        assert any(p.is_file() for p in created), created  # state was written
        for path in created:
            st = path.lstat()
            assert (st.st_uid, st.st_gid) == (pcp.pw_uid, pcp.pw_gid), (path, st.st_uid)
        assert log.stat().st_uid == 0


def _bed(root: Path, pcp: pwd.struct_passwd) -> tuple[Path, set[Path]]:
    """The test's files: a private PCP_VAR_DIR whose config/pmda belongs to
    pcp (as /var/lib/pcp/config/pmda does), the probe table's module, an
    OpenMetrics config directory (a public file:// source, one naming a
    root-only file, a script); returns the config and the paths so far."""
    root.chmod(0o755)
    var = root / "var"
    (var / "config" / "pmda").mkdir(parents=True)
    for d in (var, var / "config", var / "config" / "pmda"):
        os.chown(d, pcp.pw_uid, pcp.pw_gid)
    mods = root / "mods"
    mods.mkdir()
    (mods / "probe_table.py").write_text(PROBE_TABLE)
    confd = root / "config.d"
    confd.mkdir()
    (root / "public.txt").write_text("# TYPE public_value gauge\npublic_value 7\n")
    secret = root / "secret.txt"
    secret.write_text("# TYPE secret_value gauge\nsecret_value 42\n")
    secret.chmod(0o600)  # root's only
    (confd / "public.url").write_text(f"file://{root}/public.txt\n")
    (confd / "secret.url").write_text(f"file://{secret}\n")
    (confd / "probe.sh").write_text(SCRIPT)
    (confd / "probe.sh").chmod(0o755)
    conf = root / "pmda.conf"
    conf.write_text(
        "[pmda]\nname = privs\ndomain = 253\n\n"
        "[table probe]\ntable = probe_table:Probe\nmount = probe\n\n"
        f"[table om]\ntable = openmetrics\nmount = om\ndir = {confd}\ninterval = 0.5\nworkers = 2\n"
    )
    return conf, set(root.rglob("*"))


def _created(root: Path, before: set[Path], log: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p not in before and p != log]


def test_not_root_only_the_same_user() -> None:
    """Not root, ``-U`` of another user is refused with one line (as PCP's
    agents exit when their setgid fails), not ignored; ``-U`` of the user
    the daemon already is runs."""
    needs_root_and_pcp()
    require(any(p.pw_name == "nobody" for p in pwd.getpwall()), "needs a 'nobody' user")
    python, extra = _python_for("nobody")
    env = {**os.environ, **extra}
    uid = pwd.getpwnam("nobody").pw_uid
    with traversable_dir("pmda_py-not-root-") as root:
        root.chmod(0o777)
        for user, code in (("pcp", 1), ("nobody", 0)):
            log = root / f"{user}.log"
            r = subprocess.run(
                [python, "-m", "pmda_py", "run", "-d", "251", "-U", user, "-l", str(log)],
                user="nobody",
                env=env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # (CREDS, when it starts)
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
            assert r.returncode == code, r
            if code:
                why = f"only root can switch users (running as uid {uid})"
                assert r.stderr.splitlines() == [f"pmda-py run: cannot run as pcp: {why}"]
                assert "privilege_drop_failed" in log.read_text()
            else:
                assert r.stderr == "" and " exit " in log.read_text()
