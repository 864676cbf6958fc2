"""Start-up and footprint, for bench/pdu_latency.py: how long from exec to
the CREDS a PMDA sends first (the driver answers it at once) and to the
answer of the first DESC, and the resident set after 200 FETCHes, for
``pmda-py run --table simple`` beside PCP's ``pmdasimple.python`` (the same
metrics on pcp.pmda); then what our start-up is made of, by imports of a
fresh interpreter (Python itself, attrs, structlog, trio, pmda_py).

Both run with their bytecode cached (as an installed package has it): the
children get a private ``PYTHONPYCACHEPREFIX`` and one warm-up start, and
keep their state (instance-id caches) in a private directory.

    .venv/bin/python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from driver import PipeDriver

from pmda_py.pmapi import pmid
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import DescReqPdu, FetchPdu

SIMPLE = Path("/var/lib/pcp/pmdas/simple/pmdasimple.python")
DOMAIN = 253
FETCHES = 200

#: what a fresh interpreter imports, step by step, for the start-up's make-up
STEPS = (
    ("Python itself", ""),
    ("+ attrs", "attrs"),
    ("+ structlog", "structlog"),
    ("+ trio", "trio"),
    ("+ pmda_py run path", "pmda_py.cli, pmda_py.runtime.main, pmda_py.tables.simple"),
)

_PROBE = """
import sys, time
t0 = float(sys.argv[1])  # the parent's clock just before the exec
for step in sys.argv[2:]:
    if step:
        exec("import " + step)
    rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS"))
    print(f"{(time.time() - t0) * 1e3:.1f} {rss / 1024:.1f} {len(sys.modules)}", flush=True)
"""


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def one_start(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(ms to CREDS, ms to the first DESC's answer, MB resident after the fetches)."""
    fetch = FetchPdu((pmid(DOMAIN, 0, 0), pmid(DOMAIN, 0, 1))).encode()
    t0 = time.perf_counter()
    d = PipeDriver(cmd, env)  # returns once the PMDA's CREDS is read (and ours written)
    t1 = time.perf_counter()
    try:
        d.request(DescReqPdu(pmid(DOMAIN, 0, 0)).encode())
        t2 = time.perf_counter()
        for _ in range(FETCHES):
            d.request(fetch)
        rss = rss_mb(d.proc.pid)
    finally:
        d.close()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3, rss


def measure(cmd: list[str], env: dict[str, str], runs: int) -> tuple[float, float, float]:
    one_start(cmd, env)  # warm-up: bytecode cached, files in the page cache
    got = [one_start(cmd, env) for _ in range(runs)]
    return (
        statistics.median(g[0] for g in got),
        statistics.median(g[1] for g in got),
        statistics.median(g[2] for g in got),
    )


def make_up(env: dict[str, str]) -> list[tuple[str, float, float, int]]:
    make_up_once(env)  # warm-up: bytecode cached
    return make_up_once(env)


def make_up_once(env: dict[str, str]) -> list[tuple[str, float, float, int]]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, repr(time.time()), *(s for _n, s in STEPS)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    rows = []
    for (name, _s), line in zip(STEPS, out):
        ms, mb, mods = line.split()
        rows.append((name, float(ms), float(mb), int(mods)))
    return rows


def report(runs: int, log: str) -> None:
    with tempfile.TemporaryDirectory(prefix="pmda_py-startup-") as tmp:
        env = {"PYTHONPYCACHEPREFIX": os.path.join(tmp, "pyc"), "PYTHONDONTWRITEBYTECODE": ""}
        state = os.path.join(tmp, "state")
        os.makedirs(os.path.join(state, "config", "pmda"))
        ours = pmda_py_argv("run", "-d", str(DOMAIN), "-l", log)
        ours += ["--state-dir", os.path.join(state, "config", "pmda"), "--table", "simple"]
        rows = {"pmda-py run --table simple": measure(ours, env, runs)}
        if SIMPLE.exists():
            ref = ["/usr/bin/python3", str(SIMPLE), "-d", str(DOMAIN), "-l", log + ".simple"]
            rows["pmdasimple.python (pcp.pmda)"] = measure(ref, {**env, "PCP_VAR_DIR": state}, runs)
        else:
            print("PCP is not installed: no pmdasimple.python figures", file=sys.stderr)
        print(f"start-up and footprint (median of {runs} starts, bytecode cached)")
        print(f"{'PMDA':30} {'exec->CREDS ms':>15} {'exec->DESC ms':>14} {f'RSS after {FETCHES} FETCH MB':>24}")
        for name, (creds, desc, rss) in rows.items():
            print(f"{name:30} {creds:15.1f} {desc:14.1f} {rss:24.1f}")
        print("\nwhat our start-up is made of (a fresh interpreter importing; ms since exec, cumulative)")
        print(f"{'step':22} {'ms':>7} {'RSS MB':>7} {'modules':>8}")
        for name, ms, mb, mods in make_up(env):
            print(f"{name:22} {ms:7.1f} {mb:7.1f} {mods:8}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    report(args.runs, f"/tmp/pmda_py-bench-{os.getpid()}.log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
