#!/usr/bin/env python3
"""Run generated dbpmda scripts through real dbpmda and ``pmda-py dbpmda``
(each driving PCP's pmdasample, or our daemon serving the simple table) and
report: scripts run, tracebacks, identical transcripts %, and the
differences by category.

    .venv/bin/python scripts/dbpmda_diff.py -n 500            # random seeds
    .venv/bin/python scripts/dbpmda_diff.py -n 50 --seed 1000 --show 3

Needs real PCP 6.0.3 (scripts/install-pcp).  Seeds are consecutive from
--seed (default: random, printed), so any run can be repeated.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.dbpmda.differential import Bed, Outcome


def _show(o: Outcome) -> None:
    print(f"\n=== seed {o.seed}: {'; '.join(o.categories)}")
    print(o.script.rstrip("\n"))
    for name, a, b in (("stdout", o.real[0], o.ours[0]), ("stderr", o.real[1], o.ours[1])):
        diff = difflib.unified_diff(a.splitlines(), b.splitlines(), f"dbpmda {name}", f"pmda-py {name}", lineterm="")
        for line in list(diff)[:40]:
            print(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=500, help="scripts to run (default 500)")
    ap.add_argument("--seed", type=int, default=None, help="first seed (default random)")
    ap.add_argument("--lines", type=int, default=12, help="lines a script (default 12)")
    ap.add_argument("--show", type=int, default=0, help="print the diffs of the first N differing scripts")
    args = ap.parse_args()
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(10**9)
    print(f"seeds {first}..{first + args.n - 1}, {args.lines} lines a script", flush=True)
    bed = Bed()
    t0 = time.monotonic()
    outcomes: list[Outcome] = []
    try:
        for seed in range(first, first + args.n):
            outcomes.append(bed.compare(seed, args.lines))
            if len(outcomes) % 50 == 0:
                same = sum(o.same for o in outcomes)
                print(f"  {len(outcomes)} scripts, {same} identical", flush=True)
    finally:
        bed.close()
    n = len(outcomes)
    same = sum(o.same for o in outcomes)
    tracebacks = [o.seed for o in outcomes if o.traceback]
    cats: collections.Counter[str] = collections.Counter()
    seeds: dict[str, list[int]] = collections.defaultdict(list)
    for o in outcomes:
        for c in o.categories:
            cats[c] += 1
            seeds[c].append(o.seed)
    print(f"\nscripts run:            {n}  ({time.monotonic() - t0:.0f} s)")
    print(f"tracebacks:             {len(tracebacks)}" + (f"  seeds {tracebacks}" if tracebacks else ""))
    print(f"identical transcripts:  {same}/{n} = {100.0 * same / max(n, 1):.1f}%")
    if cats:
        print("differences by category (count, category, seeds):")
        for c, k in cats.most_common():
            print(f"  {k:4d}  {c}  {seeds[c][:8]}")
    for o in [o for o in outcomes if not o.same][: args.show]:
        _show(o)
    return 1 if tracebacks else 0


if __name__ == "__main__":
    sys.exit(main())
