"""``pmda-py compat`` beside PCP's binding, on one unchanged pcp.pmda script
(bench/pcp_pmda_compat.python): FETCH p50 of 10 U64 metrics over N
instances, the per-value figure (p50 / values), and the same FETCH when the
callback calls ``inst_name_lookup`` for every value (a linear scan in the
binding, a dictionary lookup in compat).  Ratios: binding / compat (above
1: compat is faster).  Both engines are started at once and take turns
(one request each per round), so both see the same machine.  A benchmark,
run on purpose; the tests never time anything.

    .venv/bin/python bench/compat.py [--quick] [--n 1000] [--metrics 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from driver import PipeDriver, taking_turns

from pmda_py.pmapi import pmid
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import FetchPdu

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "pcp_pmda_compat.python"
BINDING = Path("/usr/bin/python3")
DOMAIN = 254


def timed(drivers: dict[str, PipeDriver], req: bytes, budget: float, max_iter: int) -> dict[str, float]:
    """p50 in seconds of ``req`` on each driver, taking turns (:func:`driver.taking_turns`)."""
    return taking_turns(drivers, req, budget, max_iter, warmup=3, min_rounds=7)


def figures(
    engines: dict[str, list[str]], env: dict[str, str], req: bytes, budget: float, max_iter: int
) -> dict[str, tuple[float, bytes]]:
    """Each engine's p50 and first reply, all started at once and taking turns."""
    drivers: dict[str, PipeDriver] = {}
    try:
        for name, cmd in engines.items():
            drivers[name] = PipeDriver(cmd, env)
        replies = {name: d.request(req) for name, d in drivers.items()}
        times = timed(drivers, req, budget, max_iter)
        return {name: (times[name], replies[name]) for name in drivers}
    finally:
        for d in drivers.values():
            d.close()


def same(a: bytes, b: bytes) -> bool:
    """Equal RESULTs, the timestamp words aside."""
    return len(a) == len(b) and a[:12] == b[:12] and a[20:] == b[20:]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a short run")
    p.add_argument("--n", type=int, default=1000, help="instances")
    p.add_argument("--metrics", type=int, default=10)
    p.add_argument("--budget", type=float, default=None, help="seconds per figure (default 2, quick 0.5)")
    args = p.parse_args()
    budget = args.budget if args.budget is not None else (0.5 if args.quick else 2.0)
    max_iter = 200 if args.quick else 1000
    have_binding = BINDING.exists() and Path("/var/lib/pcp/pmdas/simple").exists()
    if not have_binding:
        print("PCP's python binding is not installed: compat figures only", file=sys.stderr)
    req = FetchPdu(tuple(pmid(DOMAIN, 1, k) for k in range(args.metrics))).encode()
    values = args.metrics * args.n
    engines = {"compat": pmda_py_argv("compat", str(SCRIPT))}
    if have_binding:
        engines["binding"] = [str(BINDING), str(SCRIPT)]
    print(f"FETCH of {args.metrics} U64 metrics x {args.n} instances ({values} values), p50")
    print(f"{'callback':<22} {'engine':<8} {'ms/fetch':>10} {'ns/value':>10} {'binding/compat':>15} {'same reply':>11}")
    with tempfile.TemporaryDirectory(prefix="pmda_py-bench-compat-") as cwd:
        os.chdir(cwd)  # the PMDAs' logs
        for label, lookup in (("[value, 1]", ""), ("inst_name_lookup", "1")):
            env = {"BENCH_N": str(args.n), "BENCH_METRICS": str(args.metrics), "BENCH_LOOKUP": lookup}
            results = figures(engines, env, req, budget, max_iter)
            ours = results["compat"][0]
            for name, (t, reply) in results.items():
                ratio = f"{results['binding'][0] / ours:.2f}x" if "binding" in results else "-"
                match = "yes" if "binding" in results and same(reply, results["binding"][1]) else "-"
                print(
                    f"{label:<22} {name:<8} {t * 1e3:>10.2f} {t / values * 1e9:>10.0f} "
                    f"{ratio if name == 'compat' else '':>15} {match if name == 'compat' else '':>11}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
