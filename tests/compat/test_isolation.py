"""What ``pmda-py compat`` promises about the process it runs: no libpcp
loaded, no python3-pcp needed (the project's virtualenv has none), the shim
modules visible to the script only, and pmcd's pipe safe from ``print()``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.compat.harness import COMPAT, bed, both, dbpmda, require_binding, write_pmns
from tests.conftest import require

PROBE = """
import sys
print("a stray print before the PMDA exists")
import cpmapi as c_api
import cpmda
from pcp.pmda import PMDA, pmdaMetric
from pcp.pmapi import pmUnits


def maps():
    with open("/proc/self/maps") as f:
        found = sorted({line.split()[-1] for line in f if "libpcp" in line})
    return ",".join(found) or "none"


class Probe(PMDA):
    def __init__(self):
        PMDA.__init__(self, "probe", 400)
        self.connect_pmcd()
        units = pmUnits(0, 0, 0, 0, 0, 0)
        for item, name in enumerate(("libpcp", "cpmapi", "argv")):
            self.add_metric("probe." + name, pmdaMetric(self.pmid(0, item), c_api.PM_TYPE_STRING,
                            c_api.PM_INDOM_NULL, c_api.PM_SEM_DISCRETE, units), name, name)
        self.set_fetch_callback(self.fetch_cb)

    def fetch_cb(self, cluster, item, inst):
        print("a stray print in a fetch callback", cluster, item)
        if item == 0:
            return [maps(), 1]
        if item == 1:
            return [str(c_api.__doc__) + " / " + str(cpmda.__doc__), 1]
        return [" ".join(sys.argv[1:]), 1]


Probe().run()
"""


def _fetch(root: Path, *args: str) -> str:
    require(subprocess.run(["which", "dbpmda"], capture_output=True).returncode == 0, "dbpmda not installed")
    env = bed(root)
    script = root / "pmdaprobe.python"
    script.write_text(PROBE)
    pmns = write_pmns(root / "probe.pmns", 400, {"probe.libpcp": (0, 0), "probe.cpmapi": (0, 1), "probe.argv": (0, 2)})
    return dbpmda(COMPAT, script, "fetch probe.libpcp probe.cpmapi probe.argv\n", pmns, env, root / "run", args)


def test_no_libpcp_in_the_running_agent(root: Path) -> None:
    out = _fetch(root)
    assert 'value "none"' in out, out  # the agent's own /proc/self/maps, read during a fetch
    assert "pmda-py compat" in out  # cpmapi and cpmda are the shims


def test_script_argv_is_everything_after_script(root: Path) -> None:
    out = _fetch(root, "-d", "7", "--weird", "x y")
    assert 'value "-d 7 --weird x y"' in out


def test_prints_go_to_the_log(root: Path) -> None:
    out = _fetch(root)
    assert "Error" not in out and 'value "none"' in out  # the PDU stream was not touched
    log = (root / "run" / "probe.log").read_text()
    assert "a stray print in a fetch callback 0 0" in log
    # before the PMDA opened its log, a print goes to the agent's stderr
    # (pmcd's log when pmcd starts it; dbpmda's stderr here)
    assert "a stray print before the PMDA exists" in out


def test_the_venv_has_no_python3_pcp() -> None:
    """The project's environment cannot import the binding: what compat
    runs on is its own."""
    for mod in ("cpmapi", "cpmda", "pcp.pmda"):
        r = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True, text=True)
        assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, mod


def test_shims_are_invisible_to_other_code() -> None:
    """Importing pmda_py (compat included) offers no ``pcp`` module; only
    the runner installs the import hook."""
    code = "import pmda_py.compat, pmda_py.compat.pmda, pmda_py.compat.table\nimport pcp"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr


def test_usage_errors() -> None:
    r = subprocess.run([*COMPAT], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: pmda-py compat SCRIPT" in r.stderr
    r = subprocess.run([*COMPAT, "/nonexistent/pmdax.python"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == "pmda-py compat: /nonexistent/pmdax.python: no such file\n"
    r = subprocess.run([*COMPAT, "/"], capture_output=True, text=True)  # a directory is there, but no script
    assert r.returncode == 2 and r.stderr == "pmda-py compat: /: not a file\n"


@pytest.mark.parametrize("mode", ["PCP_PYTHON_DOMAIN", "PCP_PYTHON_PMNS"])
def test_install_time_modes_print_to_stdout(root: Path, mode: str) -> None:
    script = root / "pmdaprobe.python"
    script.write_text(PROBE.replace('print("a stray print before the PMDA exists")', ""))
    import os

    r = subprocess.run(
        [*COMPAT, str(script)], capture_output=True, text=True, env={**os.environ, mode: "root"}, timeout=30
    )
    expected = "#define PROBE 400\n" if mode == "PCP_PYTHON_DOMAIN" else "root {\n\tprobe\t400:*:*\n}\n"
    assert r.stdout == expected, r.stderr


@pytest.mark.parametrize("value", ["soon", "-1", "0", "5", "nan"])
def test_a_bad_compat_deadline_is_one_line_before_the_script_runs(tmp_path: Path, value: str) -> None:
    """docs/compat.md's PYPMDA_COMPAT_DEADLINE: a value that is not seconds
    under pmcd's 5 s is one line on stderr, and the script never runs (no
    traceback in its log, no CREDS for pmcd)."""
    import os

    ran = tmp_path / "ran"
    script = tmp_path / "pmdax.python"
    script.write_text(f"open({str(ran)!r}, 'w').close()\n")
    env = dict(os.environ, PYPMDA_COMPAT_DEADLINE=value)
    r = subprocess.run([*COMPAT, str(script)], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.splitlines() == [
        f"pmda-py compat: PYPMDA_COMPAT_DEADLINE={value!r}: not seconds between 0 and 5 (pmcd's timeout)"
    ]
    assert not ran.exists()


def test_a_good_compat_deadline_lets_the_script_run(tmp_path: Path) -> None:
    import os

    ran = tmp_path / "ran"
    script = tmp_path / "pmdax.python"
    script.write_text(f"open({str(ran)!r}, 'w').close()\n")
    env = dict(os.environ, PYPMDA_COMPAT_DEADLINE="0.5")
    r = subprocess.run([*COMPAT, str(script)], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stderr == "", r
    assert ran.exists()


ARGV_PROBE = """
import sys
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaMetric
from pcp.pmapi import pmUnits


class Probe(PMDA):
    def __init__(self):
        PMDA.__init__(self, "probe", 400)
        self.add_metric("probe.argv", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL,
                        c_api.PM_SEM_DISCRETE, pmUnits(0, 0, 0, 0, 0, 0)), "argv", "argv")
        self.set_fetch_callback(lambda cluster, item, inst: [" ".join(sys.argv[1:]), 1])


Probe().run()
"""


def test_pmdagetopt_options_are_the_scripts_as_with_the_binding(root: Path) -> None:
    """The binding traps none of pmdaGetOpt's options (its init_dispatch takes
    the name, domain, log and help file from the script): ``-d``, ``-l``,
    ``-D``, ``-h``, ``-i``, ``-U`` after SCRIPT are the script's argv, and the
    agent stays on pmcd's pipe, at the script's domain, logging to NAME.log."""
    require_binding()
    env = bed(root)
    script = root / "pmdaprobe.python"
    script.write_text(ARGV_PROBE)
    pmns = write_pmns(root / "probe.pmns", 400, {"probe.argv": (0, 0)})
    args = ("-d", "7", "-l", "other.log", "-D", "appl0", "-h", "/nonexistent/help", "-i", "44399", "-U", "nobody")
    real, ours = both(script, "fetch probe.argv\n", pmns, env, root, args)
    assert 'value "-d 7 -l other.log -D appl0 -h /nonexistent/help -i 44399 -U nobody"' in real, real
    assert ours == real
    for side in ("real", "ours"):
        assert (root / side / "probe.log").exists() and not (root / side / "other.log").exists(), side


@pytest.mark.parametrize(
    "source",
    [
        "import os\n\ndef helper():\n    raise RuntimeError('boom ' + os.path.basename(__file__))\n\nhelper()\n",
        "import sys\ndef broken(:\n    pass\n",
        "import no_such_module_here\n",
    ],
    ids=["raises", "syntax", "import"],
)
def test_a_failing_script_reports_as_python_does(tmp_path: Path, source: str) -> None:
    """A script that fails before it is a PMDA: the same stderr and exit
    status as ``python3 SCRIPT`` (the traceback from the script's frames on,
    none of pmda_py's), where pmcd puts it: the agent's log."""
    script = tmp_path / "pmdafails.python"
    script.write_text(source)
    run = {"capture_output": True, "text": True, "stdin": subprocess.DEVNULL, "cwd": tmp_path, "timeout": 60}
    python = subprocess.run([sys.executable, "pmdafails.python"], **run)  # type: ignore[call-overload]
    ours = subprocess.run([*COMPAT, "pmdafails.python"], **run)  # type: ignore[call-overload]
    assert python.returncode == 1 and python.stderr
    assert (ours.returncode, ours.stdout, ours.stderr) == (python.returncode, python.stdout, python.stderr)


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_a_script_starts_ends_as_python_does(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) while a script is still starting (a person running
    it by hand): the traceback from the script's frames on and death by
    SIGINT, as ``python3 SCRIPT`` gives them; none of pmda_py's frames."""
    script = tmp_path / "pmdasleepy.python"
    script.write_text("import pathlib, time\npathlib.Path('started').touch()\ntime.sleep(60)\n")

    def interrupted(argv: list[str]) -> tuple[int, str, str]:
        (tmp_path / "started").unlink(missing_ok=True)
        with subprocess.Popen(
            argv,
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # as from a terminal: a test run started in the background (``cmd &`` in a
            # script) passes SIGINT on ignored, and Python then leaves it ignored
            preexec_fn=_sigint_default,
        ) as proc:
            try:
                deadline = time.monotonic() + 30
                while not (tmp_path / "started").exists() and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(0.2)  # into the sleep
                proc.send_signal(signal.SIGINT)
                out, err = proc.communicate(timeout=30)
            finally:
                proc.kill()
        return proc.returncode, out, err

    python = interrupted([sys.executable, "pmdasleepy.python"])
    assert python[0] == -signal.SIGINT and python[2].endswith("KeyboardInterrupt\n"), python
    ours = interrupted([*COMPAT, "pmdasleepy.python"])
    assert ours == python


def test_pcp_python_debug_turns_on_the_debug_lines(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The binding's PCP_PYTHON_DEBUG (libpcp's debug options, e.g. ``pdu``):
    the agent's log gets its debug lines (the notices pmcd sends); without it
    they are left out."""
    quiet = root / "quiet"
    quiet.mkdir()
    out = _fetch(quiet)
    assert 'value "none"' in out
    assert "notice" not in (quiet / "run" / "probe.log").read_text()
    monkeypatch.setenv("PCP_PYTHON_DEBUG", "pdu")
    loud = root / "loud"
    loud.mkdir()
    out = _fetch(loud)
    assert 'value "none"' in out
    log = (loud / "run" / "probe.log").read_text()
    assert "[debug" in log and "notice" in log and "type=PROFILE" in log, log
