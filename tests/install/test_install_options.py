"""``pmda-py install`` and ``pmda-py remove``'s options become the shipped
scripts' environment variables, an option given winning over the variable
(the scripts themselves, run as root against the system pmcd, are driven
by test_install.py and test_new_project.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pmda_py.tools import pmdainstall


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, str]]]:
    """The scripts run, with the environment each was given (none is run)."""
    seen: list[tuple[str, dict[str, str]]] = []

    def record(name: str, env: dict[str, str]) -> int:
        seen.append((name, env))
        return 0

    monkeypatch.setattr(pmdainstall, "_run", record)
    return seen


def test_every_install_option_is_its_variable(runs: list[tuple[str, dict[str, str]]], tmp_path: Path) -> None:
    conf = tmp_path / "agent.conf"
    conf.write_text("[pmda]\n")
    wheel = tmp_path / "tables-1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    argv = [
        "-n", "agent", "-d", "401", "-t", "inet", "-a", "4401", "-c", str(conf), "--openmetrics",
        "--needinstall", "--python", "/usr/bin/python3.11", "--source", "pmda_py==1.0",
        "--pip-arg", "--no-index", "--pip-arg", "--find-links=/srv/wheels", str(wheel), "other-tables>=2",
    ]  # fmt: skip
    assert pmdainstall.install_main(argv) == 0
    ((name, env),) = runs
    assert name == "Install"
    assert env == {
        "PYPMDA_NAME": "agent",
        "PYPMDA_DOMAIN": "401",
        "PYPMDA_TRANSPORT": "inet",
        "PYPMDA_ADDRESS": "4401",
        "PYPMDA_CONFIG": str(conf),
        "PYPMDA_OPENMETRICS": "1",
        "PYPMDA_NEEDINSTALL": "1",
        "PYTHON": "/usr/bin/python3.11",
        "PYPMDA_SOURCE": "pmda_py==1.0",
        "PYPMDA_PIP_ARGS": "--no-index --find-links=/srv/wheels",
        # a path that exists is made absolute (the script runs elsewhere); a requirement is passed as it is
        "PYPMDA_PACKAGES": f"{wheel} other-tables>=2",
    }


def test_no_option_leaves_the_variables_to_the_caller(runs: list[tuple[str, dict[str, str]]]) -> None:
    """Without options only what pip installs as pmda_py is set: the
    caller's PYPMDA_* variables then reach the script unchanged."""
    assert pmdainstall.install_main([]) == 0
    assert runs == [("Install", {"PYPMDA_SOURCE": pmdainstall.default_source()})]
    assert pmdainstall.remove_main([]) == 0
    assert runs[1] == ("Remove", {})


def test_a_project_directory_gives_the_defaults(
    runs: list[tuple[str, dict[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project made by ``pmda-py new`` (relative path, as ``pmda-py install .``):
    its pmda.conf is the config, its ``[pmda]`` name and domain the defaults;
    ``-n`` and ``-d`` win over them."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pmda.conf").write_text("[pmda]\nname = proj\ndomain = 402\n")
    monkeypatch.chdir(tmp_path)
    assert pmdainstall.install_main(["proj"]) == 0
    assert pmdainstall.install_main(["-n", "mine", "-d", "403", "proj"]) == 0
    assert pmdainstall.install_main(["-c", "/etc/x.conf", "proj"]) == 0
    (_, first), (_, second), (_, third) = runs
    assert (first["PYPMDA_NAME"], first["PYPMDA_DOMAIN"]) == ("proj", "402")
    assert first["PYPMDA_CONFIG"] == str(project / "pmda.conf")
    assert first["PYPMDA_PACKAGES"] == str(project)
    assert (second["PYPMDA_NAME"], second["PYPMDA_DOMAIN"]) == ("mine", "403")
    assert third["PYPMDA_CONFIG"] == "/etc/x.conf"


def test_remove_options(runs: list[tuple[str, dict[str, str]]]) -> None:
    assert pmdainstall.remove_main(["-n", "agent"]) == 0
    assert pmdainstall.remove_main(["--mmv"]) == 0
    assert pmdainstall.remove_main(["--openmetrics"]) == 0
    assert runs == [
        ("Remove", {"PYPMDA_NAME": "agent"}),
        ("Remove", {"PYPMDA_MMV": "1"}),
        ("Remove", {"PYPMDA_OPENMETRICS": "1"}),
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--mmv", "--openmetrics"],  # one drop-in or the other
        ["--pip-arg", "--index-url http://x"],  # the script splits on spaces: refused, not mangled
        ["--source", ""],
        ["-t", "tcp"],
        ["--pip-arg"],
    ],
)
def test_refused_before_any_script_runs(
    runs: list[tuple[str, dict[str, str]]], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        pmdainstall.install_main(argv)
    assert exc.value.code == 2 and runs == []
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pmda-py install: error: "), err


def test_the_scripts_run_are_the_shipped_ones() -> None:
    for name in ("Install", "Remove"):
        path = pmdainstall.script(name)
        assert os.access(path, os.R_OK) and Path(path).read_text().startswith("#!")
