"""FETCH latency by table shape through one pipe driver: pmda_py (a table
of the shape, bench/shape_table.py, answering in each form of the table API:
a dict per metric, ``Columns`` with a list, ``Columns`` with an ``array`` of
the metric's type, ``PackedColumns``), pcp.pmda (the same shape on PCP's
python binding, bench/pcp_pmda_shapes.python) and the floor (our recorded
replies sent back by bench/prebuilt_replies.py, with blocking reads and
write(2); "trio fl.": the same on trio's wait, as our daemon waits; "splice
fl.": replies of 64 KiB or more spliced from a memfd, as our daemon sends a
large fast-path reply), side by side in one
run; then DESC, INSTANCE, TEXT and LABEL on the last shape.  The processes
of a row are all started and take turns (one request each per round), so
that the columns of a row see the same machine (a shared machine's load
drifts): every process's working set is then cooled by the others', the
floor's too.

    .venv/bin/python bench/fetch_shapes.py [--quick] [--shapes 1000x0,100x10]

A shape is ``MxN`` (M U64 metrics over N instances; N=0: singular metrics,
where every form is the same table, so only the dict one runs) or ``S+MxN``
(S singular metrics and M metrics over N instances).  Each FETCH asks for
every metric; p50 per FETCH.  Ratios: pcp.pmda p50 / ours (dict form; above
1: we are faster) and each form / floor.  The "same" column says whether
every form's reply is byte-identical to pcp.pmda's (timestamp aside; "NO:"
names the forms that differ).  A benchmark, run on purpose; the tests never
time anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from driver import PipeDriver, taking_turns
from shape_table import FORMS, parse

from pmda_py.pmapi import LabelType, TextType, indom, pmid
from pmda_py.wire import DescReqPdu, FetchPdu, InstanceReqPdu, LabelReqPdu, TextReqPdu

HERE = Path(__file__).resolve().parent
DOMAIN = 254
SHAPES = ["1000x0", "300x0", "100x10", "10x100", "1x1000", "1000x10", "1000x100", "1000+1x1000"]
PCP_REF = Path("/usr/bin/python3")


def pmids_of(shape: str) -> tuple[int, ...]:
    singular, multi, _n = parse(shape)
    return tuple(pmid(DOMAIN, 0, k) for k in range(singular)) + tuple(pmid(DOMAIN, 1, k) for k in range(multi))


def timed(
    drivers: dict[str, PipeDriver], req: bytes, budget: float, max_iter: int, cpu: dict[str, float] | None = None
) -> dict[str, float]:
    """p50 in microseconds of ``req`` on each driver, taking turns
    (:func:`driver.taking_turns`); ``cpu`` gets each process's CPU
    microseconds per request."""
    got: dict[str, float] = {}
    p50 = {name: t * 1e6 for name, t in taking_turns(drivers, req, budget, max_iter, cpu=got).items()}
    if cpu is not None:
        cpu.update({name: t * 1e6 for name, t in got.items()})
    return p50


def same(a: bytes, b: bytes) -> bool:
    """Equal RESULTs, the timestamp words (sec, usec) aside."""
    return len(a) == len(b) and a[:12] == b[:12] and a[20:] == b[20:]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a short run (about 0.3 s per figure)")
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--budget", type=float, default=None, help="seconds per figure (default 1, quick 0.3)")
    args = p.parse_args()
    budget = args.budget if args.budget is not None else (0.3 if args.quick else 1.0)
    max_iter = 300 if args.quick else 2000
    shapes = args.shapes.split(",")
    have_pcp = PCP_REF.exists() and Path("/var/lib/pcp/pmdas/sample/pmdasample").exists()
    if not have_pcp:
        print("PCP is not installed: no pcp.pmda figures", file=sys.stderr)
    log = f"/tmp/pmda_py-bench-{os.getpid()}.log"
    rows = []
    cpu_rows: list[tuple[str, dict[str, float]]] = []
    others: dict[str, dict[str, float]] = {}
    for k, shape in enumerate(shapes):
        env = {"BENCH_SHAPE": shape, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        reqs = {"FETCH": FetchPdu(pmids_of(shape)).encode()}
        last = k == len(shapes) - 1
        if last:
            first = pmids_of(shape)[0]
            reqs["DESC"] = DescReqPdu(first).encode()
            reqs["INSTANCE"] = InstanceReqPdu(indom(DOMAIN, 0)).encode()
            reqs["TEXT"] = TextReqPdu(first, TextType.PMID | TextType.ONELINE).encode()
            reqs["LABEL"] = LabelReqPdu(DOMAIN, LabelType.DOMAIN).encode()
        ours_cmd = [
            sys.executable,
            "-m",
            "pmda_py",
            "run",
            "-d",
            str(DOMAIN),
            "-l",
            log,
            "--table",
            "shape_table:ShapeTable=bench",
        ]
        singular, multi, n = parse(shape)
        forms = FORMS if multi else FORMS[:1]
        drivers: dict[str, PipeDriver] = {}
        others_t: dict[str, dict[str, float]] = {}
        try:
            for form in forms:
                drivers[form] = PipeDriver(ours_cmd, {**env, "BENCH_FORM": form})
            ours = drivers["dict"]
            first_replies = {name: ours.request(req) for name, req in reqs.items()}
            replies_by_form = {form: d.request(reqs["FETCH"]) for form, d in drivers.items()}
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump({reqs[name].hex(): r.hex() for name, r in first_replies.items()}, f)
            try:
                drivers["floor"] = PipeDriver([sys.executable, str(HERE / "prebuilt_replies.py"), f.name], env)
                drivers["trio"] = PipeDriver([sys.executable, str(HERE / "prebuilt_replies.py"), f.name, "--trio"], env)
                drivers["splice"] = PipeDriver(
                    [sys.executable, str(HERE / "prebuilt_replies.py"), f.name, "--splice"], env
                )
            finally:
                os.unlink(f.name)
            ref_reply: bytes | None = None
            if have_pcp:
                drivers["pcp"] = PipeDriver([str(PCP_REF), str(HERE / "pcp_pmda_shapes.python")], env)
                ref_reply = drivers["pcp"].request(reqs["FETCH"])
            cpu: dict[str, float] = {}
            fetch = timed(drivers, reqs["FETCH"], budget, max_iter, cpu)
            if last:
                side: dict[str, PipeDriver] = {k: drivers[k] for k in ("dict", "floor", "trio", "pcp") if k in drivers}
                others_t = {name: timed(side, req, budget, max_iter) for name, req in reqs.items() if name != "FETCH"}
        finally:
            for d in drivers.values():
                d.close()
        nvalues = singular + multi * n
        fetch_by_form = {form: fetch[form] for form in forms}
        differ = [f for f, r in replies_by_form.items() if ref_reply is None or not same(r, ref_reply)]
        identical = None if ref_reply is None else "yes" if not differ else "NO:" + ",".join(differ)
        rows.append(
            (shape, nvalues, fetch["floor"], fetch["trio"], fetch["splice"], fetch.get("pcp"), fetch_by_form, identical)
        )
        cpu_rows.append((shape, cpu))
        if last:
            for name, t in others_t.items():
                others[name] = {
                    "ours": t["dict"],
                    "floor": t["floor"],
                    "trio": t["trio"],
                    "pcp": t.get("pcp", float("nan")),
                }
        print(f"  {shape} done", file=sys.stderr)
    print(f"FETCH of every metric, p50 in ms ({'quick' if args.quick else 'full'} run); / floor: each form's ratio")
    heads = {"dict": "dict", "list": "Col.list", "array": "Col.arr", "packed": "Packed", "fetch": "PackedF"}
    print(
        f"{'shape (metrics x insts)':24} {'values':>7} {'floor':>7} {'trio fl.':>8} {'splice fl.':>10} {'pcp.pmda':>9} "
        + " ".join(f"{heads[f]:>8}" for f in FORMS)
        + f" {'pcp/dict':>9} "
        + " ".join(f"{heads[f] + '/fl':>11}" for f in FORMS)
        + f" {'same':>5}"
    )
    for shape, nvalues, fl, tf, sf, rf, by_form, identical in rows:
        rfs = f"{rf / 1000:9.3f}" if rf is not None else f"{'-':>9}"
        ratio = f"{rf / by_form['dict']:9.2f}" if rf is not None else f"{'-':>9}"
        times = " ".join(f"{by_form[f] / 1000:8.3f}" if f in by_form else f"{'-':>8}" for f in FORMS)
        ratios = " ".join(f"{by_form[f] / fl:11.2f}" if f in by_form else f"{'-':>11}" for f in FORMS)
        print(
            f"{shape:24} {nvalues:7} {fl / 1000:7.3f} {tf / 1000:8.3f} {sf / 1000:10.3f} {rfs} {times} {ratio} "
            f"{ratios} {'-' if identical is None else identical:>5}"
        )
    print("\neach form / the splice floor (the transport our daemon uses for a fast-path reply of 64 KiB or more)")
    print(f"{'shape (metrics x insts)':24} " + " ".join(f"{heads[f] + '/sp':>11}" for f in FORMS))
    for shape, _n, _fl, _tf, sf, _rf, by_form, _same in rows:
        print(f"{shape:24} " + " ".join(f"{by_form[f] / sf:11.2f}" if f in by_form else f"{'-':>11}" for f in FORMS))
    print("\nCPU time of each process per FETCH in us (its own work: the round trip's wake-ups aside)")
    cols = ["floor", "trio", "splice", "pcp", *FORMS]
    names = {"floor": "floor", "trio": "trio fl.", "splice": "splice fl", "pcp": "pcp.pmda", **heads}
    print(f"{'shape (metrics x insts)':24} " + " ".join(f"{names[c]:>9}" for c in cols))
    for shape, cpu in cpu_rows:
        print(f"{shape:24} " + " ".join(f"{cpu[c]:9.1f}" if c in cpu else f"{'-':>9}" for c in cols))
    if others:
        print(f"\nother requests on {shapes[-1]} (dict form), p50 in us")
        print(f"{'request':10} {'floor':>8} {'trio fl.':>9} {'pcp.pmda':>9} {'pmda_py':>8} {'pcp/ours':>9}")
        for name, v in others.items():
            print(
                f"{name:10} {v['floor']:8.1f} {v['trio']:9.1f} {v['pcp']:9.1f} {v['ours']:8.1f} "
                f"{v['pcp'] / v['ours']:9.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
