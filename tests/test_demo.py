"""``pmda-py demo`` passes its arguments to ``pmda-py run``, as its help says,
and a daemon that refuses them is one line of the demo's, not a traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pmda_py.testing.support import pmda_py_argv

REPO = Path(__file__).resolve().parents[1]


def _demo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(pmda_py_argv("demo", *args), cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def test_run_options_reach_the_daemon(tmp_path: Path) -> None:
    plain = _demo(cwd=tmp_path)
    debug = _demo("-D", "appl0", cwd=tmp_path)
    assert plain.returncode == 0 and debug.returncode == 0, debug.stderr
    assert debug.stdout.splitlines()[0].endswith(" -D appl0")
    log = debug.stdout.split("== the daemon's log", 1)[1]
    assert "[debug" in log and "[debug" not in plain.stdout.split("== the daemon's log", 1)[1]
    assert _demo("--", "-D", "appl0", cwd=tmp_path).stdout.splitlines()[0].endswith(" -D appl0")


def test_a_refused_run_option_is_one_line(tmp_path: Path) -> None:
    r = _demo("-d", "notanumber", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines()[-1].startswith("pmda-py demo: the daemon did not run the demo: "), r.stderr
    assert "pmda-py run: error: argument -d/--domain: invalid int value: 'notanumber'" in r.stderr


def test_help(tmp_path: Path) -> None:
    r = _demo("--help", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("usage: pmda-py demo [--help] [RUN-ARGS ...]"), r.stdout
