"""``./Install`` and ``./Remove`` into the system pmcd (started by
scripts/install-pcp), with PCP's own pmdaproc.sh.

Every test leaves pmcd.conf and the PMNS as it found them and pmcd serving
its other agents; the module fixture is the safety net (Remove, then the
backups put back and pmcd told)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmda_py.helpfile import HelpFile
from pmda_py.pmapi import TextType, pmid
from tests.install._pcp import (
    PMCD_CONF,
    PMDAS,
    PMNS_DIR,
    PMSIGNAL,
    REPO,
    SYSCONF,
    has_values,
    our_pids,
    pminfo,
    require_root_pcp,
    run,
    wait,
)

pytestmark = [pytest.mark.pcp, pytest.mark.system]

INSTALL, REMOVE = str(REPO / "Install"), str(REPO / "Remove")
CONF = str(REPO / "etc" / "pypmda.conf")
TEST_NAME, TEST_DOMAIN = "pypmdatest", "311"


def _agents(text: str) -> list[str]:
    """pmcd.conf's agent lines, whitespace-normalised, sorted: pmdaproc.sh
    re-sorts the file by domain, so only the set of lines is compared."""
    out = []
    for ln in text.splitlines():
        if ln.startswith("[access]"):
            break
        if ln.strip() and not ln.startswith("#"):
            out.append(" ".join(ln.split()))
    return sorted(out)


def _agent_status() -> dict[str, int]:
    """pmcd.agent.status: agent name -> status (0 = running)."""
    out = pminfo("-f", "pmcd.agent.status").stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r'inst \[\d+ or "([^"]+)"\] value (-?\d+)', out)}


def _pids_named(name: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and (d / "comm").read_text().strip() == name:
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


@pytest.fixture(scope="module")
def system_pmcd() -> Iterator[dict[str, int]]:
    """The system pmcd, its pmcd.conf and PMNS backed up; yields the agents'
    status before the tests and checks it is the same after."""
    require_root_pcp()
    # the installed configs as they were (a machine that had pmda_py before):
    # set aside so every test starts from a clean $PCP_SYSCONF_DIR, put back after
    saved = Path(tempfile.mkdtemp(prefix="pypmda-install-test-"))
    for name in ("pypmda", TEST_NAME):
        if (SYSCONF / name).exists():
            shutil.move(str(SYSCONF / name), str(saved / name))
    # a run that died half way may have left our agents in pmcd.conf: take
    # them out first (loudly), so the tests start from pmcd's own configuration
    for env, name in (({}, "pypmda"), ({"PYPMDA_NAME": TEST_NAME}, TEST_NAME)):
        if any(a.split()[0] == name for a in _agents(PMCD_CONF.read_text())):
            print(f"install tests: removing the {name} agent an earlier run left in {PMCD_CONF}")
            run([REMOVE], env)
    if str(PMDAS / "pypmda-mmv") in PMCD_CONF.read_text():
        print(f"install tests: restoring pmdammv, an earlier run left the MMV drop-in in {PMCD_CONF}")
        run([REMOVE], {"PYPMDA_MMV": "1"})
    conf, root = PMCD_CONF.read_text(), (PMNS_DIR / "root").read_bytes()
    pmns_files = set(os.listdir(PMNS_DIR))
    before = _agent_status()
    assert before and all(v == 0 for v in before.values()), before
    yield before
    for env in ({}, {"PYPMDA_NAME": TEST_NAME}, {"PYPMDA_MMV": "1"}):
        if _agents(PMCD_CONF.read_text()) != _agents(conf):
            run([REMOVE], env)
    if _agents(PMCD_CONF.read_text()) != _agents(conf) or (PMNS_DIR / "root").read_bytes() != root:
        PMCD_CONF.write_text(conf)
        (PMNS_DIR / "root").write_bytes(root)
        subprocess.run([PMSIGNAL, "-a", "-s", "HUP", "pmcd"], check=False)
        time.sleep(2)
    for extra in set(os.listdir(PMNS_DIR)) - pmns_files:
        if extra.startswith(("pypmda", TEST_NAME)):
            (PMNS_DIR / extra).unlink()
    for d in (PMDAS / "pypmda", PMDAS / TEST_NAME):
        (d / ".NeedInstall").unlink(missing_ok=True)
    shutil.rmtree(PMDAS / TEST_NAME, ignore_errors=True)
    for name in ("pypmda", TEST_NAME):  # pmlogconf groups a failed Remove left
        group = PMLOGCONF_GROUP.parent.parent / name
        if "pmda_py" in (group / "summary").read_text() if (group / "summary").exists() else False:
            shutil.rmtree(group)
    for name in ("pypmda", TEST_NAME):
        shutil.rmtree(SYSCONF / name, ignore_errors=True)
        if (saved / name).exists():
            shutil.move(str(saved / name), str(SYSCONF / name))
    shutil.rmtree(saved, ignore_errors=True)
    assert wait(lambda: _agent_status() == before), _agent_status()


def _assert_healthy(before: dict[str, int]) -> None:
    """pmcd serves exactly its original agents, all running, with values."""
    assert wait(lambda: _agent_status() == before), (_agent_status(), before)
    assert has_values("pmcd.version") and has_values("hinv.ncpu")  # pmcd's own DSO and pmdalinux


def _install(env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    r = run([INSTALL], {"PYPMDA_CONFIG": CONF, **(env or {})}, stdin)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_install_fetch_store_remove_twice(system_pmcd: dict[str, int]) -> None:
    conf_before = PMCD_CONF.read_text()
    shutil.rmtree(PMDAS / "pypmda" / "docs", ignore_errors=True)  # Remove keeps the directory: Install must copy them
    for _ in range(2):  # Install twice in a row is clean
        r = _install()
        assert re.search(r"Check pypmda metrics have appeared \.\.\. 20 metrics and \d+ values", r.stdout), r.stdout
        assert "warnings" not in r.stdout
    lines = [ln for ln in PMCD_CONF.read_text().splitlines() if ln.split()[:1] == ["pypmda"]]
    assert len(lines) == 1, lines
    assert re.fullmatch(
        r"pypmda\t310\tpipe\tbinary\s+/var/lib/pcp/pmdas/pypmda/pmdapypmda -d 310\s+"
        r"-h /var/lib/pcp/pmdas/pypmda/help",
        lines[0],
    ), lines
    assert _agents(PMCD_CONF.read_text()) == sorted([*_agents(conf_before), " ".join(lines[0].split())])
    pids = our_pids(str(PMDAS / "pypmda" / "venv"))
    assert len(pids) == 1, pids  # the first install's agent is gone
    # the README beside the agent (systemd's Documentation=) and the docs it links
    assert (PMDAS / "pypmda" / "README.md").read_text() == (REPO / "README.md").read_text()
    assert (PMDAS / "pypmda" / "docs" / "installing.md").read_text() == (REPO / "docs" / "installing.md").read_text()
    out = pminfo("-f", "pypmda").stdout
    assert 'pypmda.simple.color\n    inst [0 or "red"] value' in out
    assert re.search(r'pypmda.loadavg.load\n    inst \[1 or "1 minute"\] value [\d.]+', out), out  # third-party
    assert re.search(r"pypmda.control.pid\n    value \d+", out)
    # pmstore on a storable metric
    r = subprocess.run(["pmstore", "pypmda.simple.numfetch", "42"], capture_output=True, text=True, timeout=30)
    assert "new value=42" in r.stdout, r.stdout + r.stderr
    assert "value 43" in pminfo("-f", "pypmda.simple.numfetch").stdout
    # help: served, and newhelp's help.dir/help.pag built by pmdaproc.sh hold it too
    assert "Help:\nThe cumulative number of pmFetch operations" in pminfo("-T", "pypmda.simple.numfetch").stdout
    hf = HelpFile.open(str(PMDAS / "pypmda" / "help"))
    assert hf.text(pmid(310, 100, 0), TextType.ONELINE | TextType.PMID) == "run queue length averaged over a period"
    # the agent runs as the pcp user, not root
    uid = next(ln for ln in Path(f"/proc/{pids[0]}/status").read_text().splitlines() if ln.startswith("Uid:"))
    assert set(uid.split()[1:]) == {str(_pcp_uid())}
    r = run([REMOVE])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Check pypmda metrics have gone away ... OK" in r.stdout
    assert _agents(PMCD_CONF.read_text()) == _agents(conf_before)  # the line
    assert pminfo("pypmda").returncode != 0 and not (PMNS_DIR / "pypmda").exists()  # the names
    assert wait(lambda: not our_pids(str(PMDAS / "pypmda" / "venv")))  # the process
    _assert_healthy(system_pmcd)


def _pcp_uid() -> int:
    import pwd

    return pwd.getpwnam("pcp").pw_uid


def test_install_socket_answers_like_a_user(system_pmcd: dict[str, int]) -> None:
    """Interactive: pmdaproc.sh's questions answered on stdin (socket, Internet, a port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        r = _install(stdin=f"socket\nInternet\n{port}\n")
        assert "via a pipe or a socket? [pipe]" in r.stdout
        line = next(ln for ln in PMCD_CONF.read_text().splitlines() if ln.startswith("pypmda\t"))
        assert re.fullmatch(
            rf"pypmda\t310\tsocket\tinet {port}\t/var/lib/pcp/pmdas/pypmda/pmdapypmda "
            rf"-d 310 -i {port}\s+-h /var/lib/pcp/pmdas/pypmda/help",
            line,
        ), line
        assert wait(lambda: has_values("pypmda.simple.numfetch"))
    finally:
        assert run([REMOVE]).returncode == 0
    assert "pypmda" not in PMCD_CONF.read_text()
    _assert_healthy(system_pmcd)


def test_install_from_environment_name_domain_unix_socket(system_pmcd: dict[str, int]) -> None:
    sock = f"/run/pcp/{TEST_NAME}.socket"
    env = {"PYPMDA_NAME": TEST_NAME, "PYPMDA_DOMAIN": TEST_DOMAIN, "PYPMDA_TRANSPORT": "unix"}
    try:
        r = _install(env)
        assert f"Check {TEST_NAME} metrics have appeared ... 20 metrics" in r.stdout, r.stdout
        line = next(ln for ln in PMCD_CONF.read_text().splitlines() if ln.startswith(f"{TEST_NAME}\t"))
        assert line.startswith(f"{TEST_NAME}\t{TEST_DOMAIN}\tsocket\tunix {sock}\t") and f"-u {sock}" in line, line
        assert wait(lambda: has_values(f"{TEST_NAME}.simple.numfetch"))
        assert f"{TEST_DOMAIN}.0.0" in pminfo("-m", f"{TEST_NAME}.simple.numfetch").stdout
        conf = (SYSCONF / TEST_NAME / f"{TEST_NAME}.conf").read_text()
        assert f"name = {TEST_NAME}\ndomain = {TEST_DOMAIN}\n" in conf and f"mount = {TEST_NAME}.loadavg" in conf
        # the installed directory knows its agent: its own Remove needs no environment
        r = subprocess.run(
            ["./Remove"],
            cwd=PMDAS / TEST_NAME,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env={k: v for k, v in os.environ.items() if not k.startswith("PYPMDA_")},
        )
        assert r.returncode == 0 and f"Check {TEST_NAME} metrics have gone away ... OK" in r.stdout, r.stdout
    finally:
        run([REMOVE], env)
    assert TEST_NAME not in PMCD_CONF.read_text()
    assert not os.path.exists(sock) or not our_pids(str(PMDAS / TEST_NAME))
    _assert_healthy(system_pmcd)


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"PYPMDA_DOMAIN": "511"}, "domain 511 is reserved"),
        ({"PYPMDA_DOMAIN": "0"}, "domain 0 is reserved"),
        ({"PYPMDA_DOMAIN": "2"}, "domain 2 is already used by the pmcd agent"),
        ({"PYPMDA_DOMAIN": "3x"}, "PYPMDA_DOMAIN must be a number"),
        ({"PYPMDA_NAME": "simple"}, "/var/lib/pcp/pmdas/simple belongs to another agent"),
        ({"PYPMDA_NAME": "linux", "PYPMDA_DOMAIN": "312"}, "an agent named linux already has domain 60"),
        ({"PYPMDA_TRANSPORT": "carrier-pigeon"}, "PYPMDA_TRANSPORT must be pipe, inet, ipv6 or unix"),
    ],
)
def test_refused_before_anything_changes(system_pmcd: dict[str, int], env: dict[str, str], why: str) -> None:
    before = PMCD_CONF.read_text()
    r = run([INSTALL], {"PYPMDA_CONFIG": CONF, **env})
    assert r.returncode != 0
    assert why in r.stdout + r.stderr, r.stdout + r.stderr
    assert PMCD_CONF.read_text() == before


def test_bad_config_refused_with_file_line_key(system_pmcd: dict[str, int], tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("[pmda]\nname = pypmda\n\n[table simple]\ntable = simple\nmount = pypmda.simple\ndeadline = soon\n")
    installed = SYSCONF / "pypmda" / "pypmda.conf"
    old = installed.read_text() if installed.exists() else None
    before = PMCD_CONF.read_text()
    r = run([INSTALL], {"PYPMDA_CONFIG": str(bad)})
    assert r.returncode != 0
    assert f"{bad}:7: [table simple] deadline: not a number" in r.stderr, r.stderr
    assert PMCD_CONF.read_text() == before
    assert (installed.read_text() if installed.exists() else None) == old


def test_installed_config_kept_or_refused(system_pmcd: dict[str, int]) -> None:
    """Install again without PYPMDA_CONFIG keeps the user's installed config
    as it is; an installed config this version cannot read (an upgrade, a
    typo) is refused with file, line and key, and nothing changes."""
    installed = SYSCONF / "pypmda" / "pypmda.conf"
    before = PMCD_CONF.read_text()
    _install()
    try:
        edited = installed.read_text().replace("[table loadavg]", "# edited by the site\n[table loadavg]")
        installed.write_text(edited)
        r = run([INSTALL])
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"Keeping the installed config {installed}" in r.stdout, r.stdout
        assert installed.read_text() == edited
        assert wait(lambda: has_values("pypmda.loadavg.load"))
        lines = edited.splitlines()
        at = lines.index("[pmda]") + 1
        bad = "\n".join([*lines[:at], "colour = blue", *lines[at:]]) + "\n"
        installed.write_text(bad)
        conf_now = PMCD_CONF.read_text()
        r = run([INSTALL])
        assert r.returncode != 0
        assert f"{installed}:{at + 1}: [pmda] colour: unknown key" in r.stderr, r.stderr
        assert "fix it or set PYPMDA_CONFIG" in r.stderr, r.stderr
        assert PMCD_CONF.read_text() == conf_now and installed.read_text() == bad
    finally:
        assert run([REMOVE]).returncode == 0
    assert _agents(PMCD_CONF.read_text()) == _agents(before)
    _assert_healthy(system_pmcd)


def test_needinstall_picked_up_by_pmcd_rc_script(system_pmcd: dict[str, int]) -> None:
    """PYPMDA_NEEDINSTALL=1 only prepares the PMDA directory; pmcd's rc script
    runs its ./Install </dev/null at the next start, the PCP way."""
    before = PMCD_CONF.read_text()
    r = _install({"PYPMDA_NEEDINSTALL": "1"})
    assert (PMDAS / "pypmda" / ".NeedInstall").exists() and PMCD_CONF.read_text() == before, r.stdout
    # PCP's rc script refuses to stop pmcd while any other process named pmcd
    # runs (a private pmcd of another test run, a chroot's): say so plainly
    system = int(Path("/run/pcp/pmcd.pid").read_text().split()[0])
    others = [p for p in _pids_named("pmcd") if p != system]
    assert not others, f"other pmcd processes {others} would make /etc/init.d/pmcd refuse to restart"
    try:
        rc = subprocess.run(
            ["env", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "/etc/init.d/pmcd", "restart"],  # pmcd's agents' PATH
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            start_new_session=True,
        )
        assert rc.returncode == 0, f"/etc/init.d/pmcd restart: exit {rc.returncode}\n{rc.stdout}{rc.stderr}"
        assert wait(lambda: has_values("pypmda.simple.numfetch"), 60), PMCD_CONF.read_text()
        # the rc script runs the Install in the background, then drops the marker
        assert wait(lambda: not list((PMDAS / "pypmda").glob(".NeedInstall*")), 60)
        assert any(ln.startswith("pypmda\t310\tpipe") for ln in PMCD_CONF.read_text().splitlines())
    finally:
        (PMDAS / "pypmda" / ".NeedInstall").unlink(missing_ok=True)
        assert run([REMOVE]).returncode == 0
    assert _agents(PMCD_CONF.read_text()) == _agents(before)
    _assert_healthy(system_pmcd)


def _write_mmv(path: Path) -> None:
    subprocess.run(
        [
            "/usr/bin/python3",
            str(REPO / "scripts" / "write_mmv.py"),
            str(path),
            "--metrics",
            "3",
            "--instances",
            "2",
            "--name",
            path.name,
        ],
        check=True,
        timeout=60,
    )


def test_mmv_dropin_replaces_and_restores_pmdammv(system_pmcd: dict[str, int]) -> None:
    before = PMCD_CONF.read_text()
    original = [ln for ln in before.splitlines() if ln.split()[:1] == ["mmv"]]
    assert original, "pmdammv is not configured in pmcd.conf"
    mmv_file = Path("/var/lib/pcp/tmp/mmv/pmdapyinstall")
    _write_mmv(mmv_file)
    try:
        r = run([INSTALL], {"PYPMDA_MMV": "1"})
        assert r.returncode == 0, r.stdout + r.stderr
        line = next(ln for ln in PMCD_CONF.read_text().splitlines() if ln.split()[:1] == ["mmv"])
        assert line == "mmv\t70\tpipe\tbinary\t\t/var/lib/pcp/pmdas/pypmda-mmv/pmdammv -d 70", line
        assert wait(lambda: len(our_pids(str(PMDAS / "pypmda-mmv" / "venv"))) == 1)
        assert wait(lambda: has_values("mmv.pmdapyinstall.m2"))
        assert 'inst [1 or "inst1"] value 2001' in pminfo("-f", "mmv.pmdapyinstall.m2").stdout
        assert "value 1" in pminfo("-f", "mmv.control.files").stdout
    finally:
        r = run([REMOVE], {"PYPMDA_MMV": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        assert PMCD_CONF.read_text() == before  # pmcd's original configuration, byte for byte
        assert wait(lambda: not our_pids(str(PMDAS / "pypmda-mmv" / "venv")))
        assert wait(lambda: has_values("mmv.pmdapyinstall.m2"))  # pmdammv serves the file again
        _assert_healthy(system_pmcd)
    finally:
        mmv_file.unlink(missing_ok=True)


UNIT = REPO / "systemd" / "pypmda.service"


def _unit() -> dict[str, str]:
    return dict(re.findall(r"^(\w+)=(.*)$", UNIT.read_text(), re.M))


def test_systemd_unit_verifies(system_pmcd: dict[str, int], tmp_path: Path) -> None:
    unit = _unit()
    assert unit["User"] == "pcp" and unit["NoNewPrivileges"] == "yes" and unit["ProtectSystem"] == "strict"
    assert unit["Before"] == "pmcd.service" and " -u " in unit["ExecStart"]
    assert unit["Type"] == "notify" and unit["NotifyAccess"] == "main"  # READY=1 once the socket is there
    if shutil.which("systemd-analyze") is None:
        why = "systemd-analyze is not installed (Debian package systemd; scripts/install-pcp installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    _install({"PYPMDA_NEEDINSTALL": "1"})  # the unit's interpreter and config exist from here on
    (PMDAS / "pypmda" / ".NeedInstall").unlink()
    r = subprocess.run(["systemd-analyze", "verify", str(UNIT)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "pypmda.service" not in r.stderr, r.stderr


def test_systemd_unit_command_line_with_pmcd_socket_line(system_pmcd: dict[str, int]) -> None:
    """The documented switch to the unit (docs/installing.md): Install once (files, names), start the
    unit's ExecStart verbatim as its User/Group with its UMask (no systemd
    here), and give the system pmcd a socket line without a command."""
    unit = _unit()
    before = PMCD_CONF.read_text()
    _install()
    cmd = unit["ExecStart"].split()
    sock = Path(cmd[cmd.index("-u") + 1])
    umask = int(unit["UMask"], 8)
    sock.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={unit['User']}", f"--regid={unit['Group']}", "--init-groups", *cmd],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd="/",
        preexec_fn=lambda: os.umask(umask),
    )
    try:
        assert wait(sock.exists, 15), proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
        st = sock.stat()
        assert st.st_uid == _pcp_uid() and st.st_mode & 0o007 == 0  # pmcd (user pcp) only
        line = f"pypmda\t310\tsocket\tunix {sock}"
        time.sleep(1.1)  # pmcd notices a changed pmcd.conf by its mtime
        r = run(
            [
                str(PMDAS / "pypmda" / "venv" / "bin" / "python"),
                "-m",
                "pmda_py",
                "pmcdconf",
                str(PMCD_CONF),
                "pypmda",
                "310",
                line,
            ]
        )
        assert r.returncode == 0, r.stderr
        subprocess.run([PMSIGNAL, "-a", "-s", "HUP", "pmcd"], check=True, timeout=30)

        def served_by_unit() -> bool:
            out = pminfo("-f", "pypmda.control.pid").stdout
            return f"value {proc.pid}\n" in out

        assert wait(served_by_unit, 30), pminfo("-f", "pypmda.control.pid").stdout
        out = pminfo("-f", "pypmda.simple.color", "pypmda.loadavg.load").stdout
        assert 'inst [1 or "green"]' in out and 'inst [15 or "15 minute"]' in out
        uid = next(ln for ln in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if ln.startswith("Uid:"))
        assert set(uid.split()[1:]) == {str(_pcp_uid())}
        # pmcd's own pipe agent is gone: the unit's daemon is the only one
        assert wait(lambda: our_pids(str(PMDAS / "pypmda" / "venv")) == [proc.pid])
    finally:
        r = run([REMOVE])
        try:
            # --standalone: pmcd letting the agent go does not end the daemon; it
            # listens for the next pmcd (socket file put back) until systemd stops it
            time.sleep(2)
            outlived_pmcd = proc.poll() is None and wait(sock.exists, 5)
            proc.send_signal(signal.SIGTERM)
            status = proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sock.unlink(missing_ok=True)
    assert outlived_pmcd and status == 0
    assert r.returncode == 0 and "Check pypmda metrics have gone away ... OK" in r.stdout, r.stdout + r.stderr
    assert _agents(PMCD_CONF.read_text()) == _agents(before)
    _assert_healthy(system_pmcd)


PMLOGCONF_GROUP = Path("/var/lib/pcp/config/pmlogconf/pypmda/summary")


def test_pmlogger_records_the_agent_with_the_stock_configuration(system_pmcd: dict[str, int], tmp_path: Path) -> None:
    """After ./Install, pmlogconf (as pmlogger's default config.default is
    made) has the agent's group, enabled by its probe, and a stock pmlogger
    with that configuration records the agent's metrics; ./Remove takes the
    group away again."""
    assert not PMLOGCONF_GROUP.exists()
    try:
        r = _install()
        assert f"Installed the pmlogconf group {PMLOGCONF_GROUP}" in r.stdout, r.stdout
        assert PMLOGCONF_GROUP.read_text().startswith("#pmlogconf-setup 2.0\n")
        config = tmp_path / "config.default"
        r = subprocess.run(["pmlogconf", "-c", "-q", str(config)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        text = config.read_text()
        assert re.search(r"^#\+ pypmda/summary:y:", text, re.M), text  # the group, enabled
        assert re.search(r"^log advisory on default \{\n\tpypmda\n\}", text, re.M), text
        archive = tmp_path / "archive"
        r = subprocess.run(
            [
                "pmlogger",
                "-c",
                str(config),
                "-s",
                "3",
                "-t",
                "1sec",
                "-l",
                str(tmp_path / "pmlogger.log"),
                str(archive),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr + (tmp_path / "pmlogger.log").read_text()
        dump = subprocess.run(
            ["pmdumplog", str(archive), "pypmda.simple.numfetch", "pypmda.loadavg.load"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        # records of the agent's metrics, values included (pmdumplog's format)
        assert re.search(r"\(pypmda\.simple\.numfetch\): value \d+", dump.stdout), dump.stdout + dump.stderr
        assert re.search(r'\(pypmda\.loadavg\.load\):\n\s+inst \[1 or "1 minute"\] value', dump.stdout), dump.stdout
    finally:
        r = run([REMOVE])
    assert r.returncode == 0 and "Removed the pmlogconf group" in r.stdout, r.stdout + r.stderr
    assert not PMLOGCONF_GROUP.exists() and not PMLOGCONF_GROUP.parent.exists()
    _assert_healthy(system_pmcd)
