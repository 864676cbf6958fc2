"""A small real-PCP test bed for the integration tests: find PCP, skip
loudly without it (fail when CI=true), run a private pmcd, run dbpmda."""

from __future__ import annotations

import atexit
import errno
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from pmda_py.testing.support import pmda_py_argv

REPO = Path(__file__).resolve().parents[2]
PMDA_PY = pmda_py_argv()
PMCD = "/usr/lib/pcp/bin/pmcd"
NEWHELP = "/usr/lib/pcp/bin/newhelp"
SIMPLE_PY = "/var/lib/pcp/pmdas/simple/pmdasimple.python"
SAMPLE = "/var/lib/pcp/pmdas/sample/pmdasample"
PMDA_PCP_DSO = "/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so"


def require_pcp() -> None:
    """Skip loudly without real PCP; a skip in CI (CI=true) is a failure."""
    missing = [p for p in (PMCD, NEWHELP, SIMPLE_PY, SAMPLE) if not os.path.exists(p)]
    missing += [t for t in ("dbpmda", "pminfo", "pmval", "pmstore", "pmprobe") if shutil.which(t) is None]
    if (
        not os.path.exists("/usr/bin/python3")
        or subprocess.run(["/usr/bin/python3", "-c", "import pcp.pmda"], capture_output=True).returncode
    ):
        missing.append("python3-pcp (pcp.pmda for /usr/bin/python3)")
    if missing:
        msg = f"REAL PCP NOT AVAILABLE ({', '.join(missing)}): run scripts/install-pcp"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {msg}")
        pytest.skip(msg)


def free_port() -> int:
    """A port free on both 127.0.0.1 and ::1 at the moment of asking: a daemon
    told ``-6 PORT`` binds ::1, where a port free on 127.0.0.1 may be taken
    (an earlier connection's local end there)."""
    for _ in range(50):
        with socket.socket() as s4:
            s4.bind(("127.0.0.1", 0))
            port = int(s4.getsockname()[1])
            if not socket.has_ipv6:
                return port
            with socket.socket(socket.AF_INET6) as s6:
                s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    s6.bind(("::1", port))
                except OSError as err:
                    if err.errno == errno.EADDRNOTAVAIL:  # no ::1 here: the v4 port is all there is
                        return port
                    continue
                return port
    raise RuntimeError("no port free on both 127.0.0.1 and ::1 in 50 tries")


def as_nobody(body: Callable[[], int]) -> tuple[int, int | str]:
    """Fork a child that setuid()s to 'nobody' and runs ``body`` (no trio, no
    exec: the venv may be unreadable to nobody); returns the child's uid and
    what ``body`` returned, or the error it raised."""
    nobody = pwd.getpwnam("nobody")
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(rfd)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            os.write(wfd, f"{os.getuid()} {body()}".encode())
        except BaseException as err:
            os.write(wfd, f"{os.getuid()} {type(err).__name__}: {err}".encode())
        finally:
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    uid, _, what = out.partition(" ")
    return int(uid), int(what) if what.isdigit() else what


def foreign_uid_connect(path: str) -> tuple[int, int | str]:
    """As 'nobody', connect to the unix socket ``path``: the uid and how
    many bytes could be read before EOF (or the error)."""

    def connect() -> int:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(path)
        return len(s.recv(100))

    return as_nobody(connect)


def private_pmdas(root: Path) -> Path:
    """A private PCP_PMDAS_DIR with compiled help and config for simple/sample
    (Debian ships only the help sources)."""
    pmdas = root / "pmdas"
    for name, dom in (("simple", 253), ("sample", 29)):
        d = pmdas / name
        d.mkdir(parents=True, exist_ok=True)
        src = Path(f"/var/lib/pcp/pmdas/{name}")
        shutil.copy(src / "help", d / "help")
        text = (src / "help").read_text()
        text = re.sub(rf"^@ {name.upper()}\.", f"@ {dom}.", text, flags=re.M)
        subprocess.run([NEWHELP, "-n", str(src / "root"), "-o", str(d / "help")], input=text, text=True, check=True)
    (pmdas / "simple" / "simple.conf").write_text("sec,min,hour\n")
    (pmdas / "sample" / "dynamic.indom").write_text("10 ten\n20 twenty\n30 thirty-three\n")
    return pmdas


def private_var(root: Path) -> Path:
    """A private PCP_VAR_DIR: PCP's agents (pmdaCache) write their instance
    caches under ``config/pmda``; world-writable, the agents run as pcp."""
    cache = root / "config" / "pmda"
    cache.mkdir(parents=True, exist_ok=True)
    for d in (root, root / "config", cache):
        d.chmod(0o777)
    # pmcpp finds <stdpmid> under $PCP_VAR_DIR/pmns
    if not (root / "pmns").exists():
        (root / "pmns").symlink_to("/var/lib/pcp/pmns")
    return root


def simple_cache(env: dict[str, str]) -> Path:
    """Where pmdasimple.python keeps simple.now's instance ids (pmdaCache)."""
    return Path(env["PCP_VAR_DIR"]) / "config" / "pmda" / "253.1"


class PrivatePmcd:
    """pmcd on its own port, config, PMNS, run dir and log; stopped by pid."""

    def __init__(
        self,
        root: Path,
        agents: list[str],
        pmns: str,
        env: dict[str, str] | None = None,
        debug: str = "",
        agent_timeout: int = 10,
    ) -> None:
        """``debug``: pmcd's ``-D`` options (e.g. ``pdu``), logged to ``pmcd.log``;
        ``agent_timeout``: pmcd's ``-t`` (its own default is 5 s)."""
        self.root = root
        self.debug = debug
        self.agent_timeout = agent_timeout
        self.port = free_port()
        self.conf = root / "pmcd.conf"
        self.pmns = root / "root"
        self.log = root / "pmcd.log"
        self.run_dir = root / "run"
        self.run_dir.mkdir(exist_ok=True)
        self.sock = root / "pmcd.socket"
        self.env = {
            **os.environ,
            "PCP_RUN_DIR": str(self.run_dir),
            "PMCD_ROOT_AGENT": "0",
            "PMCD_RESTART_AGENTS": "0",
            **(env or {}),
        }
        self.pmns.write_text(pmns)
        self.write_conf(agents)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_conf(self, agents: list[str]) -> None:
        lines = [
            f"pmcd 2 dso pmcd_init {PMDA_PCP_DSO}",
            *agents,
            "",
            "[access]",
            'allow "local:*" : all;',
            "allow localhost : all;",
            "allow 127.0.0.1 : all;",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self, wait_for: str = "pmcd.version", timeout: float = 20.0) -> PrivatePmcd:
        """Start pmcd in its own process group (its agents with it) and wait
        for ``wait_for``; a start judged failed kills the group before the
        error is raised.  Every started pmcd is also killed at interpreter
        exit (:func:`kill_leftovers`), whatever happens to the test."""
        self.proc = subprocess.Popen(
            [
                PMCD,
                "-f",
                "-A",
                "-i",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-s",
                str(self.sock),
                "-c",
                str(self.conf),
                "-n",
                str(self.pmns),
                "-l",
                str(self.log),
                "-t",
                str(self.agent_timeout),
                "-q",
                "10",
                *(["-D", self.debug] if self.debug else []),
            ],
            env=self.env,
            cwd=self.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _LIVE.add(self)
        STARTED_GROUPS.append(self.proc.pid)
        try:
            self.wait(wait_for, timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait(self, metric: str, timeout: float = 20.0, desc_only: bool = False) -> None:
        """Wait until ``metric`` answers; ``desc_only`` asks only for its
        descriptor, so the agent sees no FETCH (keeps value sequences equal)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if desc_only:
                r = self.tool("pminfo", "-d", metric, check=False)
                if r.returncode == 0 and "Data Type:" in r.stdout:
                    return
            else:
                r = self.tool("pmprobe", "-v", metric, check=False)
                if r.returncode == 0 and re.search(r" [1-9]\d* ", r.stdout):
                    return
            time.sleep(0.2)
        raise AssertionError(f"private pmcd: {metric} never became available; log:\n{self.log_text()}")

    def tool(self, name: str, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [name, "-h", self.host, *args], capture_output=True, text=True, env=self.env, check=check, timeout=timeout
        )

    def reconfigure(self, agents: list[str], wait_for: str, desc_only: bool = False) -> None:
        self.write_conf(agents)
        time.sleep(1.1)  # pmcd compares mtimes with 1 s granularity on some filesystems
        os.utime(self.conf)
        assert self.proc is not None
        self.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        self.wait(wait_for, desc_only=desc_only)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to pmcd and its agents (the process group), SIGKILL to
        whatever is left after 10 s."""
        _LIVE.discard(self)
        proc = self.proc
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            # pmcd is gone; its agents may still be on their way out
            deadline = time.monotonic() + wait
            while _group_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not _group_alive(proc.pid):
                break
        if proc.poll() is None:
            proc.kill()
            proc.wait()


_LIVE: set[PrivatePmcd] = set()
#: process groups of every private pmcd started in this process
STARTED_GROUPS: list[int] = []


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@atexit.register
def kill_leftovers() -> list[int]:
    """Stop every private pmcd still running (an interrupted or crashed
    test); return the process groups that are still alive after that."""
    for pmcd in list(_LIVE):
        pmcd.stop()
    return [g for g in STARTED_GROUPS if _group_alive(g)]


def run_dbpmda(script: str, pmns: str | None = None, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    args = ["dbpmda", "-e"] + (["-n", pmns] if pmns else [])
    r = subprocess.run(
        args, input=script, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout
    )
    return r.stdout + r.stderr


def mask(text: str, *patterns: str) -> str:
    """Mask memory addresses and the given regexes (replaced by <masked>)."""
    text = re.sub(r"dump from 0x[0-9a-f]+", "dump from ADDR", text)
    for p in patterns:
        text = re.sub(p, "<masked>", text, flags=re.M)
    return text


def mask_simple_times(text: str) -> str:
    """Mask what changes between runs of the simple PMDA in a dbpmda
    transcript: CPU times (simple.time.*), the time of day (simple.now) and
    the old CPU time in a store dialogue.  Each mask is narrow: value lines
    of those metrics only."""
    out: list[str] = []
    in_now = in_time = False
    for line in text.splitlines():
        if line.startswith("  253.2.4 (simple.now)"):
            in_now, in_time = True, False
        elif line.startswith(("  253.1.2 (simple.time.user)", "  253.1.3 (simple.time.sys)")):
            in_now, in_time = False, True
        elif line.startswith("   value ") and in_time:
            line = "   value <cpu time>"
        elif line.startswith("    inst") and in_now:
            line = line.split(" value ")[0] + " value <time of day>"
        elif re.match(r"^253\.1\.2: \S+ -> 1$", line):
            line = "253.1.2: <cpu time> -> 1"
        else:
            in_now = in_time = False
        out.append(line)
    return "\n".join(out)
