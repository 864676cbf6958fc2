"""Request latency through one pipe driver: DESC, INSTANCE (1000 instances)
and an N-value FETCH (default 1000), for ``pmda-py run`` next to PCP's
references.

    .venv/bin/python bench/pdu_latency.py [--n 1000] [--iterations 3000]

References, each started as pmcd would (pipe, CREDS, then requests):
  * pcp.pmda  -- bench/pcp_pmda_bench.python on PCP's python binding (same metric shape)
  * pmdasample (C, libpcp_pmda) -- DESC of sample.long.ten, INSTANCE of sample.colour
  * pmdasimple.python -- DESC of simple.color, INSTANCE of simple.color's indom
  * pre-built replies -- bench/prebuilt_replies.py answering with our daemon's
    recorded replies (Python, blocking I/O, no work): the floor of this driver
  * pre-built on trio -- the same, waiting for requests on trio as our daemon
    does: the floor of an event-loop PMDA
Prints p50/p90 per request in microseconds and ratios (reference p50 / ours p50:
above 1 means we are faster); then start-up and footprint (bench/startup.py:
exec to the answered CREDS and first DESC, RSS after 200 FETCHes, for
``pmda-py run --table simple`` and pmdasimple.python, and what our start-up
is made of).  A benchmark, run on purpose; the tests never time anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import startup
from driver import PipeDriver

from pmda_py.pmapi import LabelType, TextType, indom, pmid
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import DescReqPdu, FetchPdu, InstanceReqPdu, LabelReqPdu, TextReqPdu

HERE = Path(__file__).resolve().parent


def stats(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1e6, s[int(len(s) * 0.9)] * 1e6


def requests(desc_pmid: int, ind: int, fetch_pmid: int | None) -> dict[str, bytes]:
    out = {
        "DESC": DescReqPdu(desc_pmid).encode(),
        "INSTANCE (all)": InstanceReqPdu(ind).encode(),
        "INSTANCE (name)": InstanceReqPdu(ind, name="i1" if fetch_pmid is not None else None).encode(),
        "TEXT (oneline)": TextReqPdu(desc_pmid, TextType.PMID | TextType.ONELINE).encode(),
        "TEXT (help)": TextReqPdu(desc_pmid, TextType.PMID | TextType.HELP).encode(),
        "LABEL (item)": LabelReqPdu(desc_pmid, LabelType.ITEM).encode(),
        "LABEL (domain)": LabelReqPdu(desc_pmid, LabelType.DOMAIN).encode(),
    }
    if fetch_pmid is not None:
        out["FETCH"] = FetchPdu((fetch_pmid,)).encode()
    return out


def measure(
    cmd: list[str],
    env: dict[str, str],
    desc_pmid: int,
    ind: int,
    fetch_pmid: int | None,
    iterations: int,
    record: dict[str, str] | None = None,
) -> dict[str, tuple[float, float]]:
    """p50/p90 per request; ``record`` collects the replies (hex) for the floor."""
    d = PipeDriver(cmd, env)
    try:
        res = {}
        for name, req in requests(desc_pmid, ind, fetch_pmid).items():
            if record is not None:
                record[req.hex()] = d.request(req).hex()
            res[name] = stats(d.time(req, iterations))
        return res
    finally:
        d.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="values per FETCH (and instances)")
    p.add_argument("--iterations", type=int, default=3000)
    p.add_argument("--startup-runs", type=int, default=5, help="starts per PMDA for the start-up figures")
    args = p.parse_args()
    env = {"BENCH_N": str(args.n), "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    log = f"/tmp/pmda_py-bench-{os.getpid()}.log"
    runs: dict[str, dict[str, tuple[float, float]]] = {}
    ours = pmda_py_argv("run", "-d", "254", "-l", log, "--table", "bench_table:BenchTable=bench")
    recorded: dict[str, str] = {}
    runs["pmda-py run"] = measure(ours, env, pmid(254, 0, 0), indom(254, 0), pmid(254, 0, 0), args.iterations, recorded)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(recorded, f)
    try:
        floor = [sys.executable, str(HERE / "prebuilt_replies.py"), f.name]
        runs["pre-built replies"] = measure(
            floor, env, pmid(254, 0, 0), indom(254, 0), pmid(254, 0, 0), args.iterations
        )
        runs["pre-built on trio"] = measure(
            [*floor, "--trio"], env, pmid(254, 0, 0), indom(254, 0), pmid(254, 0, 0), args.iterations
        )
    finally:
        os.unlink(f.name)
    if not Path("/var/lib/pcp/pmdas/sample/pmdasample").exists():
        print("PCP is not installed: only our figures are shown", file=sys.stderr)
    else:
        ref = ["/usr/bin/python3", str(HERE / "pcp_pmda_bench.python")]
        runs["pcp.pmda"] = measure(ref, env, pmid(254, 0, 0), indom(254, 0), pmid(254, 0, 0), args.iterations)
        sample = ["/var/lib/pcp/pmdas/sample/pmdasample", "-d", "29", "-l", log + ".sample"]
        runs["pmdasample (C)"] = measure(sample, env, pmid(29, 0, 5), indom(29, 1), None, args.iterations)
        simple = ["/usr/bin/python3", "/var/lib/pcp/pmdas/simple/pmdasimple.python", "-d", "253"]
        runs["pmdasimple.python"] = measure(simple, env, pmid(253, 0, 1), indom(253, 0), None, args.iterations)
    print(
        f"{args.n} values per FETCH, {args.n} instances for INSTANCE on ours and pcp.pmda; "
        f"pmdasample/pmdasimple answer 3 instances"
    )
    print(f"{'PMDA':20} {'request':16} {'p50 us':>9} {'p90 us':>9} {'ref/ours (p50)':>15}")
    base = runs["pmda-py run"]
    for name, res in runs.items():
        for req, (p50, p90) in res.items():
            ratio = f"{p50 / base[req][0]:.2f}" if name != "pmda-py run" and req in base else ""
            print(f"{name:20} {req:16} {p50:9.1f} {p90:9.1f} {ratio:>15}")
    print()
    startup.report(args.startup_runs, log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
