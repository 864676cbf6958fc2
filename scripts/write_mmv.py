#!/usr/bin/python3
"""Write an MMV file with PCP's own libpcp_mmv (through the pcp.mmv binding).

Run with Debian's /usr/bin/python3 (the pcp module lives there):

    /usr/bin/python3 scripts/write_mmv.py OUTFILE --metrics M --instances N [--cluster C] [--flags F]
        [--strings] [--noprefix]

M metrics of type U64 (items 1..M) over one indom of N instances (N = 0:
singular metrics), with help text; values are item * 1000 + instance.
With --strings every 10th metric is a STRING.  The file is written in a
private PCP_TMP_DIR and copied to OUTFILE while the writer still lives (the
binding unlinks it on stop), so OUTFILE is exactly what libpcp_mmv wrote.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("outfile")
parser.add_argument("--metrics", type=int, default=10)
parser.add_argument("--instances", type=int, default=10)
parser.add_argument("--cluster", type=int, default=0)
parser.add_argument("--flags", type=int, default=0)
parser.add_argument("--strings", action="store_true")
parser.add_argument("--name", default="bench")
args = parser.parse_args()

tmp = tempfile.mkdtemp(prefix="pmda_py-mmvw-")
os.environ["PCP_TMP_DIR"] = tmp
os.makedirs(os.path.join(tmp, "mmv"), exist_ok=True)

import cmmv  # noqa: E402
from pcp import mmv, pmapi  # noqa: E402

indoms = []
instances = [mmv.mmv_instance(i, f"inst{i}") for i in range(args.instances)]
if args.instances:
    ind = mmv.mmv_indom(serial=1, shorttext="bench instances", helptext="Instances of the benchmark indom.")
    ind.set_instances(instances)
    indoms.append(ind)
metrics = []
for item in range(1, args.metrics + 1):
    is_string = args.strings and item % 10 == 0
    metrics.append(
        mmv.mmv_metric(
            name=f"m{item}",
            item=item,
            typeof=cmmv.MMV_TYPE_STRING if is_string else cmmv.MMV_TYPE_U64,
            semantics=cmmv.MMV_SEM_INSTANT if is_string else cmmv.MMV_SEM_COUNTER,
            dimension=pmapi.pmUnits(0, 0, 0 if is_string else 1, 0, 0, 0),
            indom=1 if args.instances else 0,
            shorttext=f"metric {item}",
            helptext=f"Benchmark metric number {item}.",
        )
    )
values = mmv.MemoryMappedValues(args.name, flags=args.flags, cluster=args.cluster)
values.add_indoms(indoms)
values.add_metrics(metrics)
values.start()
names = [f"inst{i}" for i in range(args.instances)] or [None]
for item in range(1, args.metrics + 1):
    for k, inst in enumerate(names):
        m = values.lookup_mapping(f"m{item}", inst)
        if args.strings and item % 10 == 0:
            values.set_string(m, f"s{item}.{k}")
        else:
            values.set(m, item * 1000 + k)
src = os.path.join(tmp, "mmv", args.name)
shutil.copyfile(src, args.outfile)
values.stop()
shutil.rmtree(tmp, ignore_errors=True)
print(args.outfile, os.path.getsize(args.outfile), file=sys.stderr)
