"""FETCH latency of two source trees of pmda_py side by side: the same
table (bench/shape_table.py) in each form, served by daemons run from each
tree, two of each, every process (and the floor, bench/prebuilt_replies.py)
taking turns in one run, so that a change is measured against the code
before it on the same machine at the same moment.

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/compare_trees.py /tmp/before [--new .] \\
        [--shapes 1000x10,1000x100] [--forms array,packed] [--budget 3]
    git worktree remove /tmp/before

Each daemon runs with its tree as its working directory and first on
``PYTHONPATH`` (its own ``pmda_py`` and ``bench/shape_table.py``), whatever
is installed in the venv.  Every reply must be byte for byte the first
daemon's (timestamp aside).  Prints p50 and CPU per FETCH in us for each
daemon, and new/old per form (below 1: the new tree is faster).  A
benchmark, run on purpose; the tests never time anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from driver import PipeDriver, taking_turns
from fetch_shapes import pmids_of, same
from shape_table import FORMS, parse

from pmda_py.wire import FetchPdu

HERE = Path(__file__).resolve().parent
COPIES = 2


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", help="the source tree before the change (e.g. a git worktree)")
    p.add_argument("--new", default=str(HERE.parent), help="the tree after it (default: this one)")
    p.add_argument("--shapes", default="1000x10,1000x100")
    p.add_argument("--forms", default="array,packed", help=f"of {','.join(FORMS)}")
    p.add_argument("--budget", type=float, default=3.0, help="seconds per daemon and shape")
    args = p.parse_args()
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    for tag, tree in trees.items():
        if not (tree / "pmda_py" / "__init__.py").is_file() or not (tree / "bench" / "shape_table.py").is_file():
            print(f"compare_trees: {tag} tree {tree} has no pmda_py package or bench/shape_table.py", file=sys.stderr)
            return 2
    forms = args.forms.split(",")
    bad = [f for f in forms if f not in FORMS]
    if bad:
        print(f"compare_trees: unknown form {','.join(bad)} (one of {','.join(FORMS)})", file=sys.stderr)
        return 2
    log = os.path.join(tempfile.gettempdir(), f"pmda_py-compare-{os.getpid()}.log")
    print("FETCH of every metric, p50 / CPU per request in us, two daemons per tree and form taking turns")
    for shape in args.shapes.split(","):
        req = FetchPdu(pmids_of(shape)).encode()
        shape_forms = forms if parse(shape)[1] else ["dict"]
        drivers: dict[str, PipeDriver] = {}
        try:
            for form in shape_forms:
                for k in range(COPIES):
                    for tag, tree in trees.items():
                        env = {
                            "BENCH_SHAPE": shape,
                            "BENCH_FORM": form,
                            "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'bench'}",
                        }
                        cmd = [sys.executable, "-m", "pmda_py", "run", "-d", "254", "-l", log]
                        cmd += ["--table", "shape_table:ShapeTable=bench"]
                        drivers[f"{form} {tag}{k}"] = PipeDriver(cmd, env, cwd=str(tree))
            replies = {name: d.request(req) for name, d in drivers.items()}
            first = next(iter(replies.values()))
            differ = [name for name, r in replies.items() if not same(r, first)]
            if differ:
                print(
                    f"compare_trees: {shape}: replies differ from the first daemon's: {', '.join(differ)}",
                    file=sys.stderr,
                )
                return 1
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump({req.hex(): first.hex()}, f)
            try:
                drivers["floor"] = PipeDriver([sys.executable, str(HERE / "prebuilt_replies.py"), f.name])
            finally:
                os.unlink(f.name)
            cpu: dict[str, float] = {}
            p50 = taking_turns(drivers, req, args.budget, 3000, cpu=cpu)
        finally:
            for d in drivers.values():
                d.close()
        singular, multi, n = parse(shape)
        print(f"\n{shape} ({singular + multi * n} values)")
        for name in drivers:
            print(f"  {name:14} {p50[name] * 1e6:10.1f} {cpu[name] * 1e6:10.1f}")
        for form in shape_forms:
            old = statistics.mean(p50[f"{form} old{k}"] for k in range(COPIES))
            new = statistics.mean(p50[f"{form} new{k}"] for k in range(COPIES))
            print(f"  {form:14} new/old {new / old:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
