"""Run the benchmarks (``make bench``): FETCH by table shape and by form of
the table API (fetch_shapes.py, with pcp.pmda and the floor), request
latency, start-up and footprint (pdu_latency.py), MMV (mmv_fetch.py;
mmv_scale.py: many files, rescans, a sparse 1 GiB file), where
a FETCH's time goes (fetch_breakdown.py), another table's FETCH while
10 000 names appear (names_stall.py), OpenMetrics' resources under hostile
sources (openmetrics_hostile.py) and its parser's cost on hostile documents
(openmetrics_parse.py), the OpenMetrics drop-in's memory beside
pmdaopenmetrics at 1000 sources x 10 metrics and alone at 100 000 metrics
(openmetrics.py) and ``pmda-py compat`` beside PCP's binding
(compat.py).  Each runs in its own process, one after the other.

    .venv/bin/python bench/run.py [--quick] [--only fetch_shapes,mmv_fetch]

``--quick`` keeps every figure short (a few seconds per bench) for a shared
machine; the figures are noisier.  soak.py (minutes long) is not run here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHES: dict[str, tuple[list[str], list[str]]] = {  # name: (full args, quick args)
    "fetch_shapes": ([], ["--quick"]),
    "pdu_latency": (["--iterations", "2000"], ["--iterations", "300"]),
    "mmv_fetch": (["--iterations", "20"], ["--iterations", "5"]),
    "mmv_scale": ([], ["--quick"]),
    "fetch_breakdown": ([], ["--shapes", "1000x0,1000x10"]),
    "openmetrics_hostile": ([], ["--quick"]),
    "openmetrics_parse": ([], ["--mb", "2", "--repeat", "1"]),
    "compat": ([], ["--quick"]),
    "openmetrics": (
        ["--sources", "1000", "--metrics", "10", "--fetches", "3", "--scale", "1000x100"],
        ["--sources", "100", "--metrics", "10", "--fetches", "2", "--scale", "100x100"],
    ),
    "names_stall": ([], ["--base", "20", "--new", "5", "--before", "1"]),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default=",".join(BENCHES), help="comma-separated bench names")
    args = p.parse_args()
    failed = []
    for name in args.only.split(","):
        full, quick = BENCHES[name]
        cmd = [sys.executable, str(HERE / f"{name}.py"), *(quick if args.quick else full)]
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        if subprocess.run(cmd, cwd=HERE).returncode != 0:
            failed.append(name)
        print(flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
