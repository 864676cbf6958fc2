"""``pmda-py pmns``, ``pmda-py help`` and the config installer: the PMNS
fragment passes ``pminfo -n`` (as pmdaproc.sh checks it), newhelp builds the
help text without a complaint and the daemon's help file reader finds every
entry, and bad configs are refused with file, line and key."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pmda_py.config import parse_args
from pmda_py.helpfile import HelpFile
from pmda_py.pmapi import TextType, indom, pmid
from pmda_py.runtime.loader import load_table
from pmda_py.testing.support import pmda_py_argv
from pmda_py.tools.installer import configured_text, main
from tests.install._pcp import NEWHELP, REPO, require_pcp

PMDA_PY = pmda_py_argv()
CONF = REPO / "etc" / "pypmda.conf"


def _pminfo(d: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # as pmdaproc.sh runs it: no derived metrics
    return subprocess.run(
        ["pminfo", *args],
        cwd=d,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PCP_DERIVED_CONFIG": ""},
    )


def _pmda_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PMDA_PY, *args], capture_output=True, text=True, timeout=60, cwd=REPO)


def _expected_names(conf: Path) -> dict[str, tuple[int, int]]:
    config = parse_args(["-c", str(conf), "-l", "/dev/null"])
    out = {}
    for spec in config.tables:
        table = load_table(spec, config)
        for metric in table.metrics():
            out[f"{spec.mount}.{metric.name}"] = (metric.cluster, metric.item)
    return out


def _pmda_dir(tmp_path: Path, conf: Path, domain: int = 310) -> Path:
    """What Install writes in the PMDA directory: domain.h, pmns, root."""
    d = tmp_path / "pmda"
    d.mkdir()
    (d / "domain.h").write_text(f"#define PYPMDA {domain}\n")
    r = _pmda_py("pmns", "-c", str(conf), "--symdom", "PYPMDA", "--under", "pypmda", "-o", str(d / "pmns"))
    assert r.returncode == 0, r.stderr
    (d / "root").write_text('#include "domain.h"\nroot { pypmda }\n#include "pmns"\n')
    return d


def test_pmns_fragment_static_leaves() -> None:
    out = _pmda_py("pmns", "-c", str(CONF), "--symdom", "PYPMDA").stdout
    assert out.startswith("pypmda {\n")
    assert "    numfetch\tPYPMDA:0:0\n" in out and "    load\tPYPMDA:100:0\n" in out
    assert "*" not in out  # nothing dynamic in the default tables


@pytest.mark.pcp
def test_pmns_passes_pminfo_like_pmdaproc(tmp_path: Path) -> None:
    require_pcp()
    d = _pmda_dir(tmp_path, CONF)
    # pmdaproc.sh: pminfo -N root (and -n after SYMDOM -> domain)
    r = _pminfo(d, "-N", "root", "pypmda")
    assert r.returncode == 0, r.stderr
    expected = _expected_names(CONF)
    assert set(r.stdout.split()) == set(expected)
    r = _pminfo(d, "-n", "root", "-m", "pypmda")
    got = {name: pm for name, _, pm in (ln.partition(" PMID: ") for ln in r.stdout.splitlines())}
    assert got == {n: f"310.{c}.{i}" for n, (c, i) in expected.items()}


@pytest.mark.pcp
def test_pmns_dynamic_subtree(tmp_path: Path) -> None:
    """A dynamic table (MMV) below the PMDA name is a DOMAIN:*:* entry."""
    require_pcp()
    conf = tmp_path / "dyn.conf"
    conf.write_text(
        "[pmda]\nname = pypmda\n[table control]\nmount = pypmda.control\n"
        f"[table mmv]\ntable = mmv\nmount = pypmda.mmv\ndir = {tmp_path}\n"
    )
    r = _pmda_py("pmns", "-c", str(conf), "--symdom", "PYPMDA")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^pypmda \{\n    control\n    mmv\tPYPMDA:\*:\*\n\}", r.stdout, re.M), r.stdout
    d = _pmda_dir(tmp_path, conf, 311)
    r = _pminfo(d, "-n", "root", "-m", "pypmda")
    assert r.returncode == 0, r.stderr
    assert "pypmda.control.requests PMID: 311.4090.0" in r.stdout
    help_src = _pmda_py("help", "-c", str(conf)).stdout
    assert "@ pypmda.control.requests " in help_src and "mmv" not in help_src.split("\n", 1)[1]


def test_pmns_refuses_mounts_outside_the_agent(tmp_path: Path) -> None:
    conf = tmp_path / "out.conf"
    conf.write_text("[pmda]\nname = pypmda\n[table simple]\nmount = elsewhere.simple\n")
    r = _pmda_py("pmns", "-c", str(conf), "--under", "pypmda")
    assert r.returncode == 1
    assert "table simple is mounted at 'elsewhere.simple', outside 'pypmda'" in r.stderr


@pytest.mark.pcp
def test_help_builds_with_newhelp_and_is_read_back(tmp_path: Path) -> None:
    require_pcp()
    d = _pmda_dir(tmp_path, CONF)
    src = _pmda_py("help", "-c", str(CONF), "--symdom", "PYPMDA").stdout
    assert "@ PYPMDA.0 " in src and "@ pypmda.simple.numfetch Number of pmFetch operations.\n" in src
    # as pmdaproc.sh does it: SYMDOM. -> domain, then newhelp -n root
    text = re.sub(r"^@ PYPMDA\.", "@ 310.", src, flags=re.M)
    r = subprocess.run(
        [NEWHELP, "-n", "root", "-v", "2", "-o", "help"], cwd=d, input=text, capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr  # no truncated entries, no split lines
    hf = HelpFile.open(str(d / "help"))
    config = parse_args(["-c", str(CONF), "-l", "/dev/null"])
    for spec in config.tables:
        table = load_table(spec, config)
        for metric in table.metrics():
            if metric.oneline:
                got = hf.text(pmid(310, metric.cluster, metric.item), TextType.ONELINE | TextType.PMID)
                assert got == metric.oneline, f"{spec.mount}.{metric.name}"
        for ind in table.indoms():
            if ind.oneline:
                assert hf.text(indom(310, ind.serial), TextType.ONELINE | TextType.INDOM) == ind.oneline
    long = hf.text(pmid(310, 0, 0), TextType.HELP | TextType.PMID)
    assert long is not None and long.startswith("The cumulative number of pmFetch operations")


def test_help_entries_escape_and_fit_newhelp() -> None:
    from pmda_py.tools.installer import _help_entry

    entry = _help_entry("x.y", "one\nline", "@ not an entry\n# not a comment\n" + "word " * 600)
    lines = entry.rstrip("\n").splitlines()
    assert lines[0] == "@ x.y one line"
    assert lines[1] == " @ not an entry" and lines[2] == " # not a comment"
    assert all(len(ln) < 127 for ln in lines) and len(entry.encode()) < 1024
    assert lines[-1] == "[...]"


def test_configured_text_sets_name_domain_and_mounts() -> None:
    text = CONF.read_text()
    out = configured_text(text, "other", 400)
    assert "\nname = other\ndomain = 400\n" in out
    assert "mount = other.simple" in out and "mount = other.loadavg" in out and "pypmda" not in out.split("[pmda]")[1]
    bare = configured_text("[table simple]\nmount = pypmda.simple\n", "x", 12)
    assert bare.startswith("[pmda]\nname = x\ndomain = 12\n") and "mount = x.simple" in bare
    # a key called name in a table section is an option, left alone
    assert "name = keep" in configured_text("[table t]\ntable = simple\nname = keep\nmount = pypmda.t\n", "x", 3)


def test_configure_installs_good_config(tmp_path: Path) -> None:
    dest_dir = tmp_path / "etc"
    dest_dir.mkdir()
    shutil.copy(REPO / "etc" / "example_table.py", dest_dir)
    dest = dest_dir / "foo.conf"
    assert main(["configure", str(CONF), str(dest), "foo", "311"]) == 0
    config = parse_args(["-c", str(dest), "-l", "/dev/null"])
    assert (config.name, config.domain) == ("foo", 311)
    assert {t.mount for t in config.tables} == {"foo.simple", "foo.control", "foo.loadavg"}
    assert config.python_path == (str(dest_dir),)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (
            "[pmda]\nname = pypmda\n\n[table simple]\nmount = pypmda.simple\ndeadline = 9\n",
            ":6: [table simple] deadline: ",
        ),
        ("[pmda]\ndomain = 511\n", ":2: [pmda] domain: domain 511 out of range"),
        ("[pmda]\npythonpath = nowhere\n", ":2: [pmda] pythonpath: not a directory"),
        ("[pmda]\n[table t]\ntable = no_such_module:T\nmount = pypmda.t\n", ":3: [table t] table: "),
        ("[pmda]\ncolour = red\n", ":2: [pmda] colour: unknown key"),
    ],
)
def test_configure_refuses_bad_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, where: str
) -> None:
    src, dest = tmp_path / "bad.conf", tmp_path / "dest.conf"
    src.write_text(body)
    dest.write_text("# the good one\n")
    assert main(["configure", str(src), str(dest), "pypmda", "310"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{src}{where}" in err[0], err
    assert dest.read_text() == "# the good one\n"  # untouched
    assert not (tmp_path / "dest.conf.new").exists()


def _names_sample() -> list[str]:
    """Names of one part from letters, digits and _ (what a Metric takes),
    every length up to 3 over a small alphabet: the odd ones included."""
    alphabet = "aZ9_"
    out = [""]
    names: list[str] = []
    for _ in range(3):
        out = [p + c for p in out for c in alphabet]
        names += out
    return names


def test_pmns_refuses_names_a_pmns_file_cannot_hold(tmp_path: Path) -> None:
    """A table may name a metric ``load.1min`` or ``_x`` (the daemon serves
    it), but a PMNS file with it does not load: Install would fail in
    pmnsadd, or pmcd with it.  ``pmda-py pmns`` says which name, once."""
    mod = tmp_path / "oddnames.py"
    for name in ["load.1min", "_x", "a.9", "load._"]:
        mod.write_text(
            "from pmda_py.table import Metric, Table\nfrom pmda_py.pmapi import PmType\n"
            "class T(Table):\n    def metrics(self):\n"
            f"        return [Metric('ok', cluster=0, item=0, type=PmType.U32), "
            f"Metric({name!r}, cluster=0, item=1, type=PmType.U32)]\n"
            "    async def fetch(self, request):\n        return {}\n"
        )
        r = subprocess.run(
            [*PMDA_PY, "pmns", "--table", "oddnames:T=pypmda.odd"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"},
        )
        assert r.returncode == 1 and r.stdout == "", (name, r.stdout)
        (line,) = r.stderr.splitlines()
        assert f"metric name 'pypmda.odd.{name}'" in line, line


@pytest.mark.pcp
def test_the_names_pmns_refuses_are_those_libpcp_cannot_read(tmp_path: Path) -> None:
    """The rule is libpcp's: for every name of the sample, real pminfo loads
    a PMNS file holding it exactly when the writer takes it."""
    from pmda_py.namespace.base import unwritable_name

    require_pcp()
    disagree = []
    for name in _names_sample():
        f = tmp_path / "root"
        f.write_text(f"root {{\n    t\n}}\n\nt {{\n    {name}\t253:0:0\n}}\n")
        loads = _pminfo(tmp_path, "-n", str(f), "t").returncode == 0
        if loads != (unwritable_name(f"t.{name}") is None):
            disagree.append((name, loads))
    assert disagree == []
