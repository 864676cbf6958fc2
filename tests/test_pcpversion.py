"""The one reader of ``pcp.conf`` (:func:`pmda_py.pcpversion.pcp_conf`): it
says what PCP's own ``pcp.env`` says, parses a file once per process and
path, and lets the process environment override it at every call."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmda_py import pcpversion
from pmda_py.pcpversion import PCP_CONF_DEFAULTS, pcp_conf, pcp_version
from tests.conftest import opens_of, require

PCP_ENV = Path("/etc/pcp.env")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No PCP_* variable of ours leaks in; caches emptied before and after."""
    for k in list(os.environ):
        if k.startswith("PCP_"):
            monkeypatch.delenv(k)
    pcpversion._read_conf.cache_clear()
    pcp_version.cache_clear()
    yield monkeypatch
    pcpversion._read_conf.cache_clear()
    pcp_version.cache_clear()


def _pcp_env(conf: Path) -> dict[str, str]:
    """What PCP's pcp.env exports from ``conf`` in an empty environment."""
    out = subprocess.run(
        ["env", "-i", f"PCP_CONF={conf}", "sh", "-c", f". {PCP_ENV}; env"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pairs = (line.partition("=") for line in out.splitlines())
    return {k: v for k, _, v in pairs if k.startswith("PCP_") and k not in ("PCP_CONF", "PCP_ENV_DONE")}


def test_the_installed_pcp_conf_reads_as_pcp_env_exports_it(clean_env: pytest.MonkeyPatch) -> None:
    require(PCP_ENV.is_file() and Path("/etc/pcp.conf").is_file() and shutil.which("sh") is not None, "PCP (pcp.env)")
    clean_env.setenv("PCP_CONF", "/etc/pcp.conf")
    theirs = _pcp_env(Path("/etc/pcp.conf"))
    assert len(theirs) > 20, theirs
    ours = pcp_conf()
    assert {k: ours.get(k) for k in theirs} == theirs


def test_a_generated_pcp_conf_reads_as_pcp_env_exports_it(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require(PCP_ENV.is_file() and shutil.which("sh") is not None, "PCP (pcp.env)")
    conf = tmp_path / "pcp.conf"
    lines = ["# a comment", "", "PCP_VERSION=7.1.0"]
    lines += [f"PCP_X{k}=/v/{k}" if k % 2 else f'PCP_X{k}="/q/{k} two"' for k in range(12)]
    lines += ["PCP_USER=someone", "#PCP_GROUP=not-this"]
    conf.write_text("\n".join(lines) + "\n")
    clean_env.setenv("PCP_CONF", str(conf))
    theirs = _pcp_env(conf)
    assert theirs["PCP_X0"] == "/q/0 two" and theirs["PCP_USER"] == "someone"
    ours = pcp_conf()
    assert {k: ours.get(k) for k in theirs} == theirs
    assert ours["PCP_GROUP"] == PCP_CONF_DEFAULTS["PCP_GROUP"]  # commented out: the default
    assert pcp_version() == (7, 1, 0)


def test_parsed_once_per_path_and_the_environment_read_at_every_call(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("PCP_USER=alpha\nPCP_VERSION=6.3.8\nPCP_TMP_DIR=/t/a\n")
    second.write_text("PCP_USER=beta\n")
    opens_a, opens_b = opens_of(clean_env, first), []
    clean_env.setenv("PCP_CONF", str(first))
    for _ in range(50):
        assert pcp_conf()["PCP_USER"] == "alpha"
    assert pcp_version() == (6, 3, 8)
    assert len(opens_a) == 1, "pcp.conf parsed more than once"
    clean_env.setenv("PCP_USER", "gamma")  # the environment wins, at once
    assert pcp_conf()["PCP_USER"] == "gamma" and pcp_conf()["PCP_TMP_DIR"] == "/t/a"
    clean_env.delenv("PCP_USER")
    opens_b = opens_of(clean_env, second)
    clean_env.setenv("PCP_CONF", str(second))  # another file is another parse
    assert pcp_conf()["PCP_USER"] == "beta" and pcp_conf()["PCP_TMP_DIR"] == PCP_CONF_DEFAULTS["PCP_TMP_DIR"]
    assert len(opens_b) == 1 and len(opens_a) == 1
    mine = pcp_conf()
    mine["PCP_USER"] = "changed by a caller"
    assert pcp_conf()["PCP_USER"] == "beta"  # a caller's copy, not the cache


def test_without_pcp_conf_the_defaults(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("PCP_CONF", str(tmp_path / "absent.conf"))
    assert pcp_conf() == PCP_CONF_DEFAULTS
    assert pcp_version() == pcpversion.BASELINE
