"""Each ``pmda-py run`` option and ``[pmda]`` key has its documented effect
on a running daemon (not only on the parsed Config), and each mistake a
person can make with them is one line on stderr and a non-zero exit, never
a traceback.  The transport options' parsing is in tests/test_config.py,
``--load-timeout``'s in test_table_load.py, ``-U``'s in test_privileges.py."""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
from pathlib import Path

import pytest
import trio

from pmda_py.pcpversion import pcp_conf
from pmda_py.pmapi import LabelType, TextType, pmid
from pmda_py.testing.client import PmdaReplyError, UnexpectedReply, open_pipe_pmda, open_socket_pmda
from pmda_py.testing.support import pmda_py_argv
from tests.conftest import require, run_pmda_py

NEWHELP = os.path.join(pcp_conf().get("PCP_BINADM_DIR", "/usr/lib/pcp/bin"), "newhelp")

#: a table whose one metric has no text of its own: the help file's is served
BARE = """\
from pmda_py.table import Table, Metric
from pmda_py.pmapi import PmType

class Bare(Table):
    def __init__(self):
        self.m = Metric("m", cluster=0, item=0, type=PmType.U32)

    async def fetch(self, request):
        return {self.m: 7}
"""


def _pythonpath(first: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(first), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The agent on a pipe whose pmcd goes away at once (EOF)."""
    return run_pmda_py(["run", *args], cwd, env)


# ------------------------------------------------------------ mistakes


def _listening(family: socket.AddressFamily, host: str) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((host, 0))
    s.listen(1)
    return s


MISTAKES = [
    # (arguments, files, what the one line says)
    (["-i", "0"], {}, "pmda-py run: -i '0': not a port (a number 1-65535 or a service name)"),
    (["-i", "65536"], {}, "pmda-py run: -i '65536': not a port"),
    (["-6", "no-such-service"], {}, "pmda-py run: -6 'no-such-service': not a port"),
    (["-i", "{port}", "--bind", "192.0.2.1"], {}, "cannot open the inet channel (192.0.2.1 port {port}): "),
    (["-i", "{port}", "--bind", "no-such-host.invalid"], {}, "cannot open the inet channel (no-such-host.invalid"),
    (["-6", "{port}", "--bind", "127.0.0.1"], {}, "cannot open the ipv6 channel (127.0.0.1 port {port}): "),
    (["-u", "{tmp}/no/such/dir/sock"], {}, "cannot open the unix channel ({tmp}/no/such/dir/sock): "),
    (["-U", "no-such-user"], {}, "pmda-py run: cannot run as no-such-user: no such user"),
    (["-n", "9lives"], {}, "pmda-py run: -n '9lives': bad PMDA name"),
    (["-c", "{tmp}"], {}, "pmda-py run: bad config: {tmp}: cannot read: not a regular file"),
    (["-c", "{tmp}/absent.conf"], {}, "{tmp}/absent.conf: cannot read: No such file or directory"),
    (["-c", "c.conf"], {"c.conf": "[pmda]\nlog_level = critical\n"}, "[pmda] log_level: unknown level 'critical'"),
    (
        ["--openmetrics-compat", "--openmetrics-dir", "{tmp}", "--openmetrics-interval=-1"],
        {},
        "argument --openmetrics-interval: '-1' is not a number of seconds above 0",
    ),
    (
        ["--openmetrics-compat", "--openmetrics-dir", "{tmp}", "--openmetrics-timeout", "nan"],
        {},
        "argument --openmetrics-timeout: 'nan' is not a number of seconds above 0",
    ),
    (
        ["--openmetrics-compat", "--openmetrics-dir", "{tmp}", "--openmetrics-workers=-1"],
        {},
        "argument --openmetrics-workers: not a whole number 0 or more: '-1'",
    ),
    (
        ["-c", "om.conf"],
        {"om.conf": "[table om]\ntable = openmetrics\nmount = om\ndir = .\ninterval = -1\n"},
        "table om (openmetrics): ValueError: interval: '-1' is not a number of seconds above 0",
    ),
]


@pytest.mark.parametrize(
    ("args", "files", "expect"),
    MISTAKES,
    ids=[
        "port-0",
        "port-too-big",
        "unknown-service",
        "bind-not-ours",
        "bind-unresolvable",
        "bind-other-family",
        "socket-dir-missing",
        "unknown-user",
        "bad-name",
        "config-is-a-directory",
        "config-missing",
        "log-level-critical",
        "om-interval",
        "om-timeout",
        "om-workers",
        "om-interval-in-file",
    ],
)
def test_a_mistake_is_one_line_and_exit_1(tmp_path: Path, args: list[str], files: dict[str, str], expect: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    port = str(_free_port())
    fill = {"{port}": port, "{tmp}": str(tmp_path)}
    for k, v in fill.items():
        args = [a.replace(k, v) for a in args]
        expect = expect.replace(k, v)
    r = _run([*args, "-d", "251", "-l", str(tmp_path / "pmda.log")], tmp_path)
    assert r.returncode in (1, 2), r  # 2: argparse's usage error
    assert r.stdout == ""  # stdout is the PDU channel
    lines = r.stderr.splitlines()
    if r.returncode == 2:  # argparse: the usage, then one line
        assert lines[0].startswith("usage: pmda-py run"), r.stderr
        lines = [line for line in lines if line.startswith("pmda-py run: error: ")]
    assert len(lines) == 1 and expect in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    log = tmp_path / "pmda.log"
    assert "Traceback" not in (log.read_text() if log.exists() else "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("flag", "family", "host"), [("-i", socket.AF_INET, "127.0.0.1"), ("-6", socket.AF_INET6, "::1")]
)
def test_port_in_use_is_one_line(tmp_path: Path, flag: str, family: socket.AddressFamily, host: str) -> None:
    with _listening(family, host) as taken:
        port = taken.getsockname()[1]
        r = _run([flag, str(port), "-d", "251", "-l", str(tmp_path / "pmda.log")], tmp_path)
    transport = "inet" if flag == "-i" else "ipv6"
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"pmda-py run: cannot open the {transport} channel ({host} port {port}): [Errno 98] Address already in use"
    ]


# ------------------------------------------------------------ effects


@pytest.mark.parametrize("debug", [[], ["-D", "appl0"], ["--debug", "pdu"]])
async def test_debug_option_turns_on_debug_logging(tmp_path: Path, debug: list[str]) -> None:
    """pmdaGetOpt's ``-D``: any value turns on the debug log lines (a
    NOTICE's end of context is one)."""
    log = tmp_path / "pmda.log"
    cmd = pmda_py_argv("run", "-d", "251", "-l", str(log), "-t", "control=ctl", *debug)
    async with open_pipe_pmda(cmd) as pmda:
        level = (await pmda.fetch_values(["ctl.log.level"]))["ctl.log.level"]
        await pmda.end_context()
        await pmda.fetch_values(["ctl.pid"])  # the notice was read before this was answered
    assert level == ("debug" if debug else "info")
    assert (" end_context " in log.read_text()) is bool(debug)


@pytest.mark.parametrize("pipe", ["-p", "--pipe"])
async def test_pipe_option_is_the_pipe(tmp_path: Path, pipe: str) -> None:
    cmd = pmda_py_argv("run", pipe, "-d", "251", "-l", str(tmp_path / "pmda.log"), "-t", "control=ctl")
    async with open_pipe_pmda(cmd) as pmda:
        assert (await pmda.fetch_values(["ctl.pid"]))["ctl.pid"] == pmda.pid


@pytest.mark.parametrize("how", ["-h", "--helpfile", "key"])
async def test_helpfile_texts_are_served(tmp_path: Path, how: str) -> None:
    """``-h FILE`` / ``--helpfile`` / ``helpfile =``: newhelp's output answers
    the TEXT of a metric that has none of its own."""
    require(os.access(NEWHELP, os.X_OK), f"needs PCP's newhelp ({NEWHELP})")
    (tmp_path / "bare.py").write_text(BARE)
    (tmp_path / "help.src").write_text("@ 251.0.0 one line from the help file\nLong text from the help file.\n")
    await trio.run_process([NEWHELP, "-o", str(tmp_path / "help"), str(tmp_path / "help.src")])
    args = ["-d", "251", "-l", str(tmp_path / "pmda.log"), "-t", "bare:Bare=b"]
    if how == "key":
        (tmp_path / "p.conf").write_text(f"[pmda]\nhelpfile = {tmp_path / 'help'}\n")
        args += ["-c", str(tmp_path / "p.conf")]
    else:
        args += [how, str(tmp_path / "help")]
    async with open_pipe_pmda(pmda_py_argv("run", *args), env=_pythonpath(tmp_path)) as pmda:
        assert await pmda.oneline(pmid(251, 0, 0)) == "one line from the help file"
        assert await pmda.text(pmid(251, 0, 0), TextType.HELP | TextType.PMID) == "Long text from the help file."
        assert (await pmda.fetch_values(["b.m"]))["b.m"] == 7


async def test_log_keys_of_the_file(tmp_path: Path) -> None:
    """``log_format = json`` and ``log_level`` take effect; the command line wins."""
    log = tmp_path / "pmda.log"
    conf = tmp_path / "p.conf"
    conf.write_text("[pmda]\nlog_format = json\nlog_level = debug\n[table control]\nmount = ctl\n")
    cmd = pmda_py_argv("run", "-d", "251", "-l", str(log), "-c", str(conf))
    async with open_pipe_pmda(cmd) as pmda:
        assert (await pmda.fetch_values(["ctl.log.level"]))["ctl.log.level"] == "debug"
        await pmda.end_context()
        await pmda.fetch_values(["ctl.pid"])
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(e["level"] == "debug" and e["event"] == "end_context" for e in events)
    log.unlink()
    conf.write_text("[pmda]\nlog_level = warning\n[table control]\nmount = ctl\n")
    async with open_pipe_pmda(cmd) as pmda:
        assert (await pmda.fetch_values(["ctl.log.level"]))["ctl.log.level"] == "warning"
    assert " start " not in (log.read_text() if log.exists() else "")  # an info line
    async with open_pipe_pmda([*cmd, "--log-level", "info"]) as pmda:
        assert (await pmda.fetch_values(["ctl.log.level"]))["ctl.log.level"] == "info"
    assert " start " in log.read_text() and not log.read_text().startswith("{")


async def test_state_dir_key_keeps_the_instance_caches(tmp_path: Path) -> None:
    """``state_dir =``: the instance-id caches (DOMAIN.SERIAL) are written there;
    ``--state-dir`` wins over it."""
    conf = tmp_path / "p.conf"
    simple = tmp_path / "simple.conf"  # the simple table's own config: its "now" indom (serial 1) is cached
    simple.write_text("sec,min,hour\n")
    conf.write_text(f"[pmda]\nstate_dir = {tmp_path / 'ids'}\n[table simple]\nmount = s\nconfig = {simple}\n")
    base = pmda_py_argv("run", "-d", "251", "-l", str(tmp_path / "pmda.log"), "-c", str(conf))
    for cmd, where in ((base, "ids"), ([*base, "--state-dir", str(tmp_path / "other")], "other")):
        async with open_pipe_pmda(cmd) as pmda:
            assert len((await pmda.fetch_values(["s.color"]))["s.color"]) == 3
        assert [p.name for p in (tmp_path / where).iterdir()] == ["251.1"], where
    assert [p.name for p in (tmp_path / "ids").iterdir()] == ["251.1"]  # not written by the second run


async def test_load_timeout_key(tmp_path: Path) -> None:
    """``load_timeout =``: a table whose import takes longer is left out, the others served."""
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(30)\n")
    conf = tmp_path / "p.conf"
    conf.write_text(
        "[pmda]\nload_timeout = 1\n[table slow]\ntable = slow:T\nmount = slow\n[table control]\nmount = ctl\n"
    )
    cmd = pmda_py_argv("run", "-d", "251", "-l", str(tmp_path / "pmda.log"), "-c", str(conf))
    with (tmp_path / "stderr").open("w") as err:
        async with open_pipe_pmda(cmd, env=_pythonpath(tmp_path), stderr=err, timeout=15) as pmda:
            with trio.fail_after(10):
                while True:  # PMDAREADY may come first: requests until the tables are there
                    try:
                        v = await pmda.fetch_values(["ctl.pid"])
                        break
                    except (PmdaReplyError, UnexpectedReply):
                        await trio.sleep(0.2)
            assert v["ctl.pid"] == pmda.pid
    said = (tmp_path / "stderr").read_text()
    assert "import did not finish within 1 s" in said, said


async def test_name_option_names_log_mounts_and_label(tmp_path: Path) -> None:
    """``-n NAME``: the default log ($PCP_LOG_DIR/pmcd/NAME.log), the default
    tables' mounts (NAME.simple, NAME.control) and the domain label agent=NAME."""
    env = {"PCP_LOG_DIR": str(tmp_path / "log"), "PCP_VAR_DIR": str(tmp_path / "var")}
    async with open_pipe_pmda(pmda_py_argv("run", "-d", "251", "-n", "site"), env=env) as pmda:
        assert (await pmda.fetch_values(["site.control.pid"]))["site.control.pid"] == pmda.pid
        assert "site.simple.numfetch" in await pmda.traverse("site")
        assert (await pmda.labels_dict(251, LabelType.DOMAIN))["agent"] == '"site"'
    assert " exit " in (tmp_path / "log" / "pmcd" / "site.log").read_text()


async def test_user_key_drops_privileges(tmp_path: Path) -> None:
    """``user = pcp`` does what ``-U pcp`` does."""
    from tests.runtime.test_privileges import _python_for, _uids, needs_root_and_pcp

    needs_root_and_pcp()
    os.chmod(tmp_path, 0o755)
    conf = tmp_path / "p.conf"
    conf.write_text("[pmda]\nuser = pcp\n[table control]\nmount = ctl\n")
    sock = tmp_path / "pmda.sock"
    python, extra = _python_for("pcp")
    cmd = [python, "-m", "pmda_py", "run", "-d", "251", "-u", str(sock), "-l", str(tmp_path / "pmda.log")]
    async with open_socket_pmda(unix=str(sock), command=[*cmd, "-c", str(conf)], env=extra) as pmda:
        pid = (await pmda.fetch_values(["ctl.pid"]))["ctl.pid"]
        assert _uids(pid) == [pwd.getpwnam("pcp").pw_uid] * 4


@pytest.mark.parametrize("planted", ["file", "symlink", "directory"])
def test_unix_path_that_is_not_a_socket_is_left_alone(tmp_path: Path, planted: str) -> None:
    """``-u PATH`` removes a socket left there, never anything else (the
    agent is root here; a mistyped path must not cost a file)."""
    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    path = tmp_path / "pmda.sock"
    if planted == "file":
        path.write_text("keep me too\n")
    elif planted == "symlink":
        path.symlink_to(precious)
    else:
        path.mkdir()
    r = _run(["-u", str(path), "-d", "251", "-l", str(tmp_path / "pmda.log")], tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"pmda-py run: cannot open the unix channel ({path}): [Errno 17] exists and is not a socket (left alone): "
        f"'{path}'"
    ]
    assert precious.read_text() == "keep me\n"
    assert os.path.lexists(path)
    if planted == "file":
        assert path.read_text() == "keep me too\n"


async def test_unix_socket_left_by_a_previous_run_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "pmda.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the name stays: nobody listens there
    cmd = pmda_py_argv("run", "-u", str(path), "-d", "251", "-l", str(tmp_path / "pmda.log"), "-t", "control=ctl")
    async with open_socket_pmda(unix=str(path), command=cmd) as pmda:
        assert (await pmda.fetch_values(["ctl.pid"]))["ctl.pid"] > 0
