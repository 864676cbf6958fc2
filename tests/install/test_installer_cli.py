"""``pmda-py pmns``, ``help``, ``pmlogconf`` and ``pmcdconf`` as their help
texts and docstrings promise, and a person's mistakes as one line on stderr."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_argv
from pmda_py.tools.installer import main as installer_main
from pmda_py.tools.installer import pmcdconf_main, pmlogconf_main

REPO = Path(__file__).resolve().parents[2]
CONF = """\
# pmcd's agents
pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so
mmv\t70\tpipe\tbinary\t/var/lib/pcp/pmdas/mmv/pmdammv -d 70

[access]
allow hosts localhost : all;
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(pmda_py_argv(*args), cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("cmd", ["pmns", "help", "pmlogconf"])
@pytest.mark.parametrize(("args", "says"), [(["--bogus"], "unrecognized arguments"), (["-d", "x"], "invalid int")])
def test_a_bad_option_names_the_command(cmd: str, args: list[str], says: str, tmp_path: Path) -> None:
    """The table options are parsed as pmda-py run parses them, but the error names the command used."""
    r = _run(cmd, "--table", "simple", *args, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    last = r.stderr.splitlines()[-1]
    assert last.startswith(f"pmda-py {cmd}: error: ") and says in last, r.stderr


@pytest.mark.parametrize("cmd", ["pmns", "help", "pmlogconf"])
def test_output_that_cannot_be_written_is_one_line(cmd: str, tmp_path: Path) -> None:
    """-o names the file in the error, not the temporary it would have been written through."""
    target = tmp_path / "no" / "such" / "dir" / "out"
    r = _run(cmd, "--table", "simple", "-o", str(target), cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"pmda-py {cmd}: cannot write {target}: No such file or directory\n", r.stderr


def test_pmlogconf_output_and_probe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-o writes what stdout would show; the probe is the control table's pid when it is
    mounted, else a static metric."""
    assert pmlogconf_main(["--table", "simple=agent.simple", "--table", "control=agent.control", "-n", "agent"]) == 0
    shown = capsys.readouterr().out
    assert (
        shown.startswith("#pmlogconf-setup 2.0\n") and "probe\tagent.control.pid exists ? include : exclude\n" in shown
    )
    assert shown.endswith("\n\tagent\n")
    assert (
        pmlogconf_main(
            [
                "--table",
                "simple=agent.simple",
                "--table",
                "control=agent.control",
                "-n",
                "agent",
                "-o",
                str(tmp_path / "g"),
            ]
        )
        == 0
    )
    assert (tmp_path / "g").read_text() == shown and capsys.readouterr().out == ""
    assert pmlogconf_main(["--table", "simple=agent.simple", "-n", "agent"]) == 0
    assert "probe\tagent.simple." in capsys.readouterr().out


def _conf(tmp_path: Path) -> Path:
    path = tmp_path / "pmcd.conf"
    path.write_text(CONF)
    path.chmod(0o640)
    return path


def test_pmcdconf_shows_the_agent_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = _conf(tmp_path)
    assert pmcdconf_main([str(conf), "mmv", "70"]) == 0
    assert capsys.readouterr().out == "mmv\t70\tpipe\tbinary\t/var/lib/pcp/pmdas/mmv/pmdammv -d 70\n"
    assert pmcdconf_main([str(conf), "pypmda", "310"]) == 1  # no such agent
    assert capsys.readouterr() == ("", "")


def test_pmcdconf_replaces_or_adds_before_access(tmp_path: Path) -> None:
    conf = _conf(tmp_path)
    assert pmcdconf_main([str(conf), "mmv", "70", "mmv 70 pipe binary /x"]) == 0
    assert conf.read_text() == CONF.replace(
        "mmv\t70\tpipe\tbinary\t/var/lib/pcp/pmdas/mmv/pmdammv -d 70", "mmv 70 pipe binary /x"
    )
    assert pmcdconf_main([str(conf), "pypmda", "310", "pypmda 310 pipe binary /y"]) == 0
    lines = conf.read_text().splitlines()
    assert lines[lines.index("[access]") - 1] == "pypmda 310 pipe binary /y"
    assert conf.stat().st_mode & 0o777 == 0o640  # its mode is kept
    no_access = tmp_path / "plain.conf"
    no_access.write_text("pmcd 2 dso pmcd_init /x\n")
    assert pmcdconf_main([str(no_access), "pypmda", "310", "pypmda 310 pipe binary /y"]) == 0
    assert no_access.read_text() == "pmcd 2 dso pmcd_init /x\npypmda 310 pipe binary /y\n"


def test_pmcdconf_keeps_a_symlinked_conf_a_symlink_and_its_group(tmp_path: Path) -> None:
    """A site may keep pmcd.conf as a link to a managed file, and give it a
    group: the line is changed where the link points (pmdaproc.sh's own
    ``cp`` writes through it), and the file keeps its owner and group, so
    Install then Remove leaves the site as it found it."""
    managed = tmp_path / "site" / "pmcd.conf"
    managed.parent.mkdir()
    managed.write_text(CONF)
    managed.chmod(0o640)
    groups = [g for g in os.getgroups() if g != os.getegid()]
    if os.geteuid() == 0:
        groups.append(65534)
    group = groups[0] if groups else os.getegid()
    os.chown(managed, -1, group)
    link = tmp_path / "pmcd.conf"
    link.symlink_to(managed)
    mmv = "mmv\t70\tpipe\tbinary\t/var/lib/pcp/pmdas/mmv/pmdammv -d 70"
    assert pmcdconf_main([str(link), "mmv", "70", "mmv 70 pipe binary /x"]) == 0
    assert link.is_symlink(), "the link was replaced by a file"
    assert managed.read_text() == CONF.replace(mmv, "mmv 70 pipe binary /x")
    assert pmcdconf_main([str(link), "mmv", "70", mmv]) == 0
    assert link.is_symlink() and managed.read_text() == CONF
    st = managed.stat()
    assert (st.st_mode & 0o777, st.st_gid) == (0o640, group)
    assert sorted(p.name for p in managed.parent.iterdir()) == ["pmcd.conf"]


def test_pmcdconf_refuses_a_domain_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = _conf(tmp_path)
    assert pmcdconf_main([str(conf), "pypmda", "70", "pypmda 70 pipe binary /y"]) == 3
    assert capsys.readouterr().err == "pmda-py pmcdconf: domain 70 is already used by agent mmv\n"
    assert conf.read_text() == CONF


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_pmcdconf_unreadable_file_is_one_line(make: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pmcd.conf"
    if make == "directory":
        path.mkdir()
    assert pmcdconf_main([str(path), "mmv", "70"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pmda-py pmcdconf: cannot read {path}: ") and err.count("\n") == 1, err


def test_pmcdconf_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert pmcdconf_main(["only", "two"]) == 2
    assert capsys.readouterr().err == "usage: pmda-py pmcdconf CONF NAME DOMAIN [LINE]\n"


@pytest.mark.parametrize(
    "text",
    [
        "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",  # /etc/passwd
        "mmv\t70\tpipe\tbinary\t/x\nnot an agent line\n",
        "pmcd 2 dll pmcd_init /x\n",  # a type pmcd does not know
        "pmcd two dso pmcd_init /x\n",
    ],
)
def test_pmcdconf_leaves_a_file_that_is_not_a_pmcd_conf_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """Install runs pmcdconf as root: a path that is not a pmcd.conf (a
    mistyped PCP_PMCDCONF_PATH, /etc/passwd) is refused with its first
    line that is not an agent line, and not one byte of it changes."""
    path = tmp_path / "some.file"
    path.write_text(text)
    assert pmcdconf_main([str(path), "pypmda", "310", "pypmda 310 pipe binary /y"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"pmda-py pmcdconf: {path}:") and "not a pmcd.conf agent line" in err[0]
    assert path.read_text() == text
    assert pmcdconf_main([str(path), "mmv", "70"]) == 1  # shown neither


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["x y", "310"], "'x y' is not an agent name"),
        (["pypmda", "0"], "domain '0' is not a number from 1 to 510"),
        (["pypmda", "511"], "domain '511' is not a number from 1 to 510"),
        (["pypmda", "ten"], "domain 'ten' is not a number from 1 to 510"),
        (["pypmda", "310", "other 310 pipe binary /y"], "is not a pmcd.conf line for agent pypmda at domain 310"),
        (["pypmda", "310", "pypmda 311 pipe binary /y"], "is not a pmcd.conf line for agent pypmda at domain 310"),
        (["pypmda", "310", "pypmda 310 pipe"], "is not a pmcd.conf line for agent pypmda at domain 310"),
        (["pypmda", "310", "pypmda 310 pipe binary /y\nevil 9 pipe binary /z"], "is not a pmcd.conf line"),
    ],
)
def test_pmcdconf_refuses_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], why: str
) -> None:
    conf = _conf(tmp_path)
    assert pmcdconf_main([str(conf), *args]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("pmda-py pmcdconf: ") and why in err[0], err
    assert conf.read_text() == CONF


@pytest.mark.parametrize(
    ("mode", "refused"),
    [(0o755, None), (0o700, None), (0o777, "anyone can write it"), (0o1777, "anyone can write it")],
)
def test_install_takes_tables_only_from_a_directory_others_cannot_write(
    mode: int, refused: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Install copies the *.py beside PYPMDA_CONFIG and imports them as root to
    check the config: from /tmp (or any directory others may write), a
    planted table would run as root.  The check Install runs first."""
    source = tmp_path / "src"
    source.mkdir()
    source.chmod(mode)
    rc = installer_main(["source", str(source)])
    err = capsys.readouterr().err
    if refused is None:
        assert rc == 0 and err == ""
    else:
        assert rc == 1 and len(err.splitlines()) == 1 and refused in err and "run as root" in err


def test_install_checks_the_source_directory_before_copying_its_tables() -> None:
    """The Install script runs that check before its copy of the *.py files."""
    text = (REPO / "pmda_py" / "pcp" / "Install").read_text()
    check = text.index("pmda_py.tools.installer source")
    assert check < text.index("/*.py", check) and check < text.index("installer configure")


def test_a_group_others_share_may_not_write_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import grp
    import pwd

    source = tmp_path / "src"
    source.mkdir()
    own = pwd.getpwuid(os.getuid()).pw_gid
    other = next((g.gr_gid for g in grp.getgrall() if g.gr_gid != own), None)
    if other is None or os.getuid() != 0:
        pytest.skip("needs root and a second group to give the directory to")
    os.chown(source, -1, other)
    source.chmod(0o775)
    assert installer_main(["source", str(source)]) == 1
    assert "can write it (mode 0775)" in capsys.readouterr().err
    os.chown(source, -1, own)  # the owner's own group (a user-private group): fine
    assert installer_main(["source", str(source)]) == 0
