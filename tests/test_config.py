"""pmda_py.config: what the config file and the command line promise -- the
``[pmda]`` keys, ``[table NAME]`` sections with their options, the command
line over the file, and every mistake a person can make reported on one line
naming the file, the line and the key."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pmda_py.config import Config, ConfigFileError, TableSpec, load_file, parse_args


@pytest.fixture(autouse=True)
def _pcp_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The defaults that come from pcp.conf, pinned (no PCP needed)."""
    monkeypatch.setenv("PCP_CONF", str(tmp_path / "no-pcp.conf"))
    for var, sub in (
        ("PCP_LOG_DIR", "log"),
        ("PCP_VAR_DIR", "var"),
        ("PCP_TMP_DIR", "tmp"),
        ("PCP_PMDAS_DIR", "pmdas"),
    ):
        monkeypatch.setenv(var, str(tmp_path / sub))


def _conf(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pypmda.conf"
    path.write_text(text)
    return str(path)


FULL = """\
[pmda]
name = site
domain = 400
log_format = json
log_level = WARNING          ; case does not matter
labels = {"site": "lab", "rack": 7}
state_dir = /var/tmp/ids
helpfile = /tmp/help
user = pcp
creds_timeout = 5
load_timeout = 12.5
standalone = yes
bind = 0.0.0.0
pythonpath = sub

[table q]
table = mypkg.queues:Queues
mount = site.queues
deadline = 1.5
MaxDepth = 20                ; a table's options keep their case
colour = red

[table simple]
mount = site.simple
"""


def test_every_key_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = _conf(tmp_path, FULL)
    fields = load_file(path)
    assert fields == {
        "config_path": path,
        "name": "site",
        "domain": 400,
        "log_format": "json",
        "log_level": "warning",
        "domain_labels": {"site": "lab", "rack": 7},
        "state_dir": "/var/tmp/ids",
        "helpfile": "/tmp/help",
        "username": "pcp",
        "creds_timeout": 5.0,
        "load_timeout": 12.5,
        "standalone": True,
        "bind_address": "0.0.0.0",
        "python_path": (str(tmp_path / "sub"),),
        "tables": (
            TableSpec("q", "mypkg.queues:Queues", "site.queues", 1.5, {"MaxDepth": "20", "colour": "red"}),
            TableSpec("simple", "simple", "site.simple"),
        ),
    }
    q = fields["tables"][0]
    assert q.source == f"{path}:17: [table q] table: "  # where a table that fails to load is named


def test_command_line_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = _conf(tmp_path, FULL)
    config = parse_args(["-c", path, "-d", "401", "-n", "other", "--log-level", "debug", "-t", "control=x.ctl"])
    assert (config.domain, config.name, config.log_level, config.log_format) == (401, "other", "debug", "json")
    assert [t.mount for t in config.tables] == ["site.queues", "site.simple", "x.ctl"]  # -t adds to the file's
    assert config.logfile == str(tmp_path / "log" / "pmcd" / "other.log")
    assert config.state_dir == "/var/tmp/ids"


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = parse_args([])
    assert config == Config(
        logfile=str(tmp_path / "log" / "pmcd" / "pypmda.log"),
        state_dir=str(tmp_path / "var" / "config" / "pmda"),
        mmv_dir=str(tmp_path / "tmp" / "mmv"),
        tables=(TableSpec("simple", "simple", "pypmda.simple"), TableSpec("control", "control", "pypmda.control")),
    )
    assert config.transport == "pipe"


@pytest.mark.parametrize(
    ("argv", "transport", "address"),
    [
        (["-u", "/run/pmda.sock"], "unix", "/run/pmda.sock"),
        (["-i", "4444"], "inet", "4444"),
        (["-6", "4445"], "ipv6", "4445"),
        (["-p"], "pipe", ""),
    ],
)
def test_transports(argv: list[str], transport: str, address: str) -> None:
    config = parse_args(argv)
    assert (config.transport, config.address) == (transport, address)


def test_table_argument_mounts_at_the_class_name_by_default() -> None:
    config = parse_args(["-t", "mypkg.mod:Queues", "-t", "simple=a.b"])
    assert [(t.table, t.mount) for t in config.tables] == [("mypkg.mod:Queues", "Queues"), ("simple", "a.b")]


def test_compat_modes_mount_one_table() -> None:
    mmv = parse_args(["--mmv-compat", "--mmv-dir", "/tmp/m", "--mmv-allowed-users", "pcp"])
    assert (mmv.name, mmv.domain, mmv.mmv_compat, mmv.domain_labels) == ("mmv", 70, True, {"agent": "mmv"})
    assert mmv.tables == (
        TableSpec("mmv", "mmv", "mmv", None, {"compat": "1", "dir": "/tmp/m", "allowed_users": "pcp"}),
    )
    om = parse_args(["--openmetrics-compat", "--openmetrics-dir", "/tmp/o", "--openmetrics-workers", "0"])
    assert (om.name, om.domain, om.domain_labels) == ("openmetrics", 144, {"agent": "openmetrics"})
    assert om.tables == (
        TableSpec("openmetrics", "openmetrics", "openmetrics", None, {"dir": "/tmp/o", "workers": "0"}),
    )


BAD_FILES = [
    # (text, line, section, key, what the message says)
    ("[pmda]\ncolour = red\n", 2, "pmda", "colour", "unknown key (expected one of bind, creds_timeout"),
    ("[pmda]\ndomain = ten\n", 2, "pmda", "domain", "not a number: 'ten'"),
    ("[pmda]\n\ndomain = 511\n", 3, "pmda", "domain", "domain 511 out of range 1-510"),
    ("[pmda]\nlabels = {bad\n", 2, "pmda", "labels", "not JSON"),
    ("[pmda]\nlabels = [1]\n", 2, "pmda", "labels", "must be a JSON object"),
    ("[pmda]\nlog_format = xml\n", 2, "pmda", "log_format", "must be console or json"),
    ("[pmda]\nlog_level = loud\n", 2, "pmda", "log_level", "unknown level 'loud'"),
    ("[pmda]\nname = 9lives\n", 2, "pmda", "name", "bad PMDA name '9lives'"),
    ("[pmda]\ncreds_timeout = 0\n", 2, "pmda", "creds_timeout", "0 out of range (0, 300] seconds"),
    ("[pmda]\nload_timeout = soon\n", 2, "pmda", "load_timeout", "not a number: 'soon'"),
    ("[pmda]\nstandalone = maybe\n", 2, "pmda", "standalone", "not a boolean: 'maybe'"),
    ("[pmda]\npythonpath = nowhere\n", 2, "pmda", "pythonpath", "not a directory: 'nowhere'"),
    ("[pmda]\n[tables x]\nmount = a\n", 2, "tables x", "", "unknown section (expected [pmda] or [table NAME])"),
    ("[table x]\ntable = simple\n", 1, "table x", "", "missing key 'mount'"),
    ("[table x]\nmount = a..b\n", 2, "table x", "mount", "bad mount point 'a..b'"),
    ("[table x]\nmount = a\ndeadline = soon\n", 3, "table x", "deadline", "not a number"),
    ("[table x]\nmount = a\ndeadline = 5\n", 3, "table x", "deadline", "must be between 0 and 5 seconds"),
]


@pytest.mark.parametrize(("text", "line", "section", "key", "message"), BAD_FILES, ids=[b[4][:24] for b in BAD_FILES])
def test_a_mistake_is_one_line_naming_file_line_and_key(
    tmp_path: Path, text: str, line: int, section: str, key: str, message: str
) -> None:
    path = _conf(tmp_path, text)
    with pytest.raises(ConfigFileError) as caught:
        parse_args(["-c", path])
    err = caught.value
    assert (err.path, err.line, err.section, err.key) == (path, line, section, key)
    where = f"{path}:{line}: [{section}] " + (f"{key}: " if key else "")
    assert str(err).startswith(where + message), str(err)
    assert "\n" not in str(err)


def test_a_file_configparser_refuses_is_one_line_with_its_line(tmp_path: Path) -> None:
    path = _conf(tmp_path, "[pmda]\nname = a\nname = b\n")
    with pytest.raises(ConfigFileError) as caught:
        load_file(path)
    assert caught.value.line == 3
    assert str(caught.value).startswith(f"{path}:3: ") and "\n" not in str(caught.value)


def test_unreadable_and_binary_files(tmp_path: Path) -> None:
    missing = str(tmp_path / "absent.conf")
    with pytest.raises(ConfigFileError, match=r"absent\.conf: cannot read: No such file or directory$"):
        load_file(missing)
    binary = tmp_path / "bin.conf"
    binary.write_bytes(b"[pmda]\nname = \xff\n")
    with pytest.raises(ConfigFileError, match=r"bin\.conf: not UTF-8 text"):
        load_file(str(binary))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-d", "0"], "pmda-py run: domain 0 out of range 1-510"),
        (["--bind", "0.0.0.0"], "pmda-py run: --bind needs -i or -6"),
        (["-u", "/s", "--bind", "::"], "pmda-py run: --bind needs -i or -6"),
    ],
)
def test_command_line_mistakes_exit_with_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args(argv)
    assert caught.value.code == message


def test_command_line_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--mmv-allowed-users", "pcp"], ["--creds-timeout", "301"], ["-t", "=x"], ["-i", "1", "-u", "/s"]):
        with pytest.raises(SystemExit) as caught:
            parse_args(argv)
        assert caught.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("usage: pmda-py run") and "pmda-py run: error: " in err, err


def test_bind_with_a_port(tmp_path: Path) -> None:
    assert parse_args(["-i", "4444", "--bind", "0.0.0.0"]).bind_address == "0.0.0.0"
    assert os.path.isabs(parse_args(["-c", _conf(tmp_path, "[pmda]\n")]).state_dir)


def test_the_shipped_file_documents_every_key() -> None:
    """etc/pypmda.conf's comment block names each [pmda] key the parser takes."""
    from pmda_py.config import _PMDA_KEYS

    text = (Path(__file__).parent.parent / "etc" / "pypmda.conf").read_text()
    documented = {m.group(1) for m in re.finditer(r"(?m)^#   (\w+)\s", text)}
    assert documented >= _PMDA_KEYS, sorted(_PMDA_KEYS - documented)
