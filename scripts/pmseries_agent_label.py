#!/usr/bin/env python3
"""Show PCP's pmseries finding pmda_py's agent by its ``agent`` label.

Everything runs privately and is stopped by pid at the end, whatever
happens: a pmcd on its own loopback port with its own pmcd.conf, PMNS,
PCP_VAR_DIR and PCP_RUN_DIR (as the integration tests run it,
tests/integration/pcpbed.py) serving ``pmda-py run`` with the shipped
etc/pypmda.conf (tables simple, control, loadavg) and, for comparison,
PCP's pmdasample; pmlogger recording a few metrics of each for 5 s into a
private archive; a redis-server on a free loopback port with no
persistence; ``pmseries --load`` of the archive into it; then the queries,
each printed as the command line and its output:

* ``pminfo -l``: the labels pmcd serves (``agent`` at the domain level,
  the simple table's ``role`` on its own clusters);
* ``pmseries '{agent=="pypmda"}'``: every recorded pypmda series, found by
  label; ``pmseries -l SERIES``: the labels of one of them;
* ``{agent=="sample"}``, ``{cluster=="zero"}`` (pmdasample's cluster label),
  ``{role=="testing"}``: a table's label finds only that table's metrics.
  pmseries (libpcp_web, 6.0.3 as 7.x) gives a metric with instances only
  the context, domain, indom and instance labels, so a cluster label
  reaches only singular metrics: pypmda.simple.color lacks the simple
  table's ``role`` there as sample.colour lacks pmdasample's ``cluster``.

The system pmcd, pmproxy and redis are never touched.  Needs PCP (pmcd,
pmlogger, pmseries, pmdasample; scripts/install-pcp) and redis-server
(Debian package ``redis-server``; its service need not run); about 7 s::

    .venv/bin/python scripts/pmseries_agent_label.py [--keep DIR]

Exit status 0 when pmseries finds every recorded pypmda series by
``agent`` and the ``role`` query no pypmda metric outside the simple
table, 1 otherwise (1 on the code before the agent label: no series).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.pcpbed import SAMPLE, PrivatePmcd, free_port, private_pmdas, private_var

REPO = Path(__file__).resolve().parents[1]
METRICS = [
    "pypmda.simple.numfetch",
    "pypmda.simple.color",
    "pypmda.control.pid",
    "pypmda.loadavg",
    "sample.long.one",
    "sample.colour",
]
PMNS = """\
root {
    pypmda\t310:*:*
    sample
}
sample {
    colour\t29:0:5
    long
}
sample.long {
    one\t29:0:10
}
"""


def show(argv: list[str], env: dict[str, str] | None = None, check: bool = True) -> str:
    """Run ``argv``, print it as ``$ command`` and its output; return stdout."""
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    print("$ " + shlex.join(argv))
    out = (r.stdout + r.stderr).rstrip("\n")
    if out:
        print(out)
    print()
    if check and r.returncode:
        raise SystemExit(f"pmseries-agent-label: {argv[0]} exited {r.returncode}")
    return r.stdout


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM (then SIGKILL) to one process we started, by its pid."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_redis(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"pmseries-agent-label: redis-server exited {proc.returncode}")
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.2)
    raise SystemExit("pmseries-agent-label: redis-server never answered")


def run(root: Path) -> bool:
    pmdas = private_pmdas(root)
    var = private_var(root / "var")
    env = {"PCP_PMDAS_DIR": str(pmdas), "PCP_VAR_DIR": str(var)}
    conf = root / "pypmda.conf"
    shutil.copy(REPO / "etc" / "pypmda.conf", conf)
    shutil.copy(REPO / "etc" / "example_table.py", root)
    line = f"pypmda 310 pipe binary {sys.executable} -m pmda_py run -c {conf} -l {root / 'pmda.log'}"
    sample = f"sample 29 pipe binary {SAMPLE} -d 29"
    pmcd = PrivatePmcd(root, [line, sample], PMNS, env=env)
    redis: subprocess.Popen[bytes] | None = None
    logger: subprocess.Popen[bytes] | None = None
    try:
        pmcd.start("pypmda.control.pid")
        host = pmcd.host
        pmcd.wait("sample.long.one")
        print(f"# private pmcd on {host}, agent lines in {pmcd.conf}:\n#   {line}\n#   {sample}\n")
        show(["pminfo", "-h", host, "-l", *METRICS], env=pmcd.env)

        archives = root / "archives"
        archives.mkdir()
        archives.chmod(0o777)
        lconf = root / "pmlogger.conf"
        lconf.write_text("log mandatory on 1 sec {\n" + "".join(f"    {m}\n" for m in METRICS) + "}\n")
        archive = archives / "pypmda"
        argv = ["pmlogger", "-h", host, "-c", str(lconf), "-l", str(root / "pmlogger.log"), "-T", "5sec", str(archive)]
        print("$ " + shlex.join(argv))
        logger = subprocess.Popen(argv, env=pmcd.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rc = logger.wait(timeout=60)
        print(f"(exit {rc}; config: {' '.join(METRICS)}, 1 sec for 5 sec)\n")
        show(["pmdumplog", "-L", str(archive)], env=pmcd.env)

        port = free_port()
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        print("$ " + shlex.join(argv) + " &")
        redis = subprocess.Popen(argv, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_redis(port, redis)
        print(f"(pid {redis.pid}, in {root}; stopped by that pid at the end)\n")

        ps = ["pmseries", "-h", "127.0.0.1", "-p", str(port)]
        show([*ps, "--load", str(archive)], env=pmcd.env)
        found = show([*ps, '{agent=="pypmda"}'], env=pmcd.env).split()
        if found:
            show([*ps, "-m", *found], env=pmcd.env, check=False)
            show([*ps, "-l", found[0]], env=pmcd.env)
        show([*ps, 'pypmda.*{agent=="pypmda"}'], env=pmcd.env, check=False)
        ok = len(found) == sum(m.startswith("pypmda.") for m in METRICS)
        print(f"# agent=pypmda: {len(found)} series, {'OK' if ok else 'FAILED'}\n")
        # labels above the domain: PCP's pmseries gives a metric with
        # instances only context, domain, indom and instance labels (libpcp_web
        # instance_labelsets), so cluster and item labels reach only
        # singular metrics -- for pmdasample's cluster label as for ours
        for query in ('{agent=="sample"}', '{cluster=="zero"}', '{role=="testing"}'):
            series = show([*ps, query], env=pmcd.env).split()
            names = show([*ps, "-m", *series], env=pmcd.env, check=False) if series else ""
            metrics = sorted(set(re.findall(r"Metric: (\S+)", names)))
            print(f"# {query}: {' '.join(metrics)}\n")
        # the simple table's label stays on its own metrics
        ours = [m for m in metrics if m.startswith("pypmda.")]
        role_ok = "pypmda.simple.numfetch" in ours and all(m.startswith("pypmda.simple.") for m in ours)
        print(f"# role=testing on pypmda.simple.* only: {'OK' if role_ok else 'FAILED'}")
        return ok and role_ok
    finally:
        stop(logger)
        stop(redis)
        pmcd.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (created) and keep it: archive, logs, configs")
    args = ap.parse_args()
    missing = [t for t in ("pmlogger", "pmseries", "pmdumplog", "redis-server", "redis-cli") if not shutil.which(t)]
    if missing:
        print(f"pmseries-agent-label: not installed: {', '.join(missing)}", file=sys.stderr)
        return 1
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="pmda_py-pmseries-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    try:
        return 0 if run(root) else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
