"""Does a names change stall the other tables?  One daemon (pipe driver)
mounts a plain table (``bench``, bench/shape_table.py, 100 x 10 values) and
the OpenMetrics table with ``--base`` sources of ``--metrics`` metrics each
(``file://`` documents; a source holds at most 1024 names, its PMIDs'
items); the driver fetches the plain table back to back, and after a while
``--new`` sources appear at once (10 x 1000: 10 000 new names).  Prints
the plain table's FETCH p50/p99/max before the new source, and from its
appearance until a second after its names are served (``names after``:
how long that took) and the memory then: the daemon's resident set, with its
scraper workers, and per name), for the index updated in place (as ``pmda-py run``
does) and, for comparison, rebuilt in full on every names change (as
before: the same daemon with ``MountIndex.update`` refusing every update).

    .venv/bin/python bench/names_stall.py [--base 90] [--new 10] [--metrics 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from driver import PipeDriver

from pmda_py.pmapi import pmid
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import FetchPdu, PmnsNamesPdu

HERE = Path(__file__).resolve().parent
DOMAIN = 254
BASE = 4000  #: the plain table's clusters and indom serial (the OpenMetrics table's start at 0)

#: the daemon, with updates of the index refused (every names change rebuilds it, as before)
_FULL_REBUILD = textwrap.dedent(
    """
    import sys
    from pmda_py.dispatch.mounts import MountIndex
    MountIndex.update = lambda self, *args: None
    from pmda_py.cli import main
    raise SystemExit(main(sys.argv[1:]))
    """
)


def document(metrics: int, seed: int) -> str:
    return "".join(f"# TYPE m{k} gauge\nm{k} {seed + k}\n" for k in range(metrics))


def write_source(config_d: Path, data: Path, name: str, metrics: int, seed: int) -> None:
    doc = data / f"{name}.txt"
    doc.write_text(document(metrics, seed))
    tmp = config_d / f".{name}.tmp"
    tmp.write_text(f"file://{doc}\n")
    tmp.rename(config_d / f"{name}.url")  # appears whole


def served(d: PipeDriver, name: str) -> bool:
    reply = d.request(PmnsNamesPdu((name,)).encode())
    return len(reply) > 12 and reply[4:8] != b"\x00\x00\x70\x00"  # not an ERROR PDU


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the OpenMetrics table's scraper workers)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status:
                out.append(int(d.name))
    return out


def pcts(xs: list[float]) -> tuple[float, float, float]:
    s = sorted(xs)
    return statistics.median(s) * 1e3, s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3, s[-1] * 1e3


def run(full_rebuild: bool, base: int, new: int, metrics: int, before_s: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="pmda_py-stall-") as tmp:
        root = Path(tmp)
        config_d, data, state = root / "config.d", root / "data", root / "state"
        for p in (config_d, data, state):
            p.mkdir()
        for s in range(base):
            write_source(config_d, data, f"s{s}", metrics, s)
        conf = root / "pmda.conf"
        conf.write_text(
            f"[pmda]\nname = stall\ndomain = {DOMAIN}\npythonpath = {HERE}\n\n"
            "[table bench]\ntable = shape_table:ShapeTable\nmount = bench\n\n"
            f"[table openmetrics]\ntable = openmetrics\nmount = openmetrics\ndir = {config_d}\n"
            f"state_dir = {state}\ninterval = 1\n"
        )
        head = [sys.executable, "-c", _FULL_REBUILD] if full_rebuild else pmda_py_argv()
        cmd = [*head, "run", "-c", str(conf), "-l", str(root / "log"), "--state-dir", str(state)]
        d = PipeDriver(
            cmd,
            {
                "BENCH_SHAPE": "100x10",
                "BENCH_BASE": str(BASE),
                "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            },
        )
        try:
            t0 = time.monotonic()
            while base and not served(d, f"openmetrics.s{base - 1}.m{metrics - 1}"):
                if time.monotonic() - t0 > 300:
                    raise RuntimeError("the base sources never appeared")
                time.sleep(0.2)
            fetch = FetchPdu(tuple(pmid(DOMAIN, BASE + 1, k) for k in range(100))).encode()
            for _ in range(50):
                d.request(fetch)
            before: list[float] = []
            end = time.monotonic() + before_s
            while time.monotonic() < end:
                f0 = time.perf_counter()
                d.request(fetch)
                before.append(time.perf_counter() - f0)
            for s in range(new):
                write_source(config_d, data, f"new{s}", metrics, s)
            added = time.monotonic()
            during: list[float] = []
            seen: float | None = None
            last_look = 0.0
            while seen is None or time.monotonic() < seen + 1.0:
                f0 = time.perf_counter()
                d.request(fetch)
                during.append(time.perf_counter() - f0)
                if seen is None and time.monotonic() - last_look > 0.05:
                    last_look = time.monotonic()
                    if all(served(d, f"openmetrics.new{s}.m{metrics - 1}") for s in range(new)):
                        seen = time.monotonic()
                if time.monotonic() - added > 120:
                    raise RuntimeError("the new source never appeared")
            own = rss_mb(d.proc.pid)
            total = own + sum(rss_mb(c) for c in children(d.proc.pid))
        finally:
            d.close()
    b50, b99, bmax = pcts(before)
    d50, d99, dmax = pcts(during)
    assert seen is not None
    names = (base + new) * metrics
    return {
        "b50": b50,
        "b99": b99,
        "bmax": bmax,
        "d50": d50,
        "d99": d99,
        "dmax": dmax,
        "names": seen - added,
        "rss": own,
        "rss_all": total,
        "per_name": total * 1024 * 1024 / names,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=int, default=90, help="sources already there")
    p.add_argument("--new", type=int, default=10, help="sources that appear")
    p.add_argument("--metrics", type=int, default=1000, help="metrics per source (at most 1024)")
    p.add_argument("--before", type=float, default=2.0, help="seconds of fetches before the new source")
    args = p.parse_args()
    total = (args.base + args.new) * args.metrics
    print(
        f"FETCH of another table (100 x 10 values) while {args.new} OpenMetrics sources of {args.metrics} metrics "
        f"({args.new * args.metrics} names) appear beside {args.base} (namespace {total} names); ms"
    )
    print(
        f"{'index on names change':24} {'p50 before':>10} {'p99 before':>10} {'max before':>10} "
        f"{'p50 during':>10} {'p99 during':>10} {'max during':>10} {'names after s':>13} "
        f"{'RSS MB':>7} {'+workers':>8} {'B/name':>7}"
    )
    for label, full in (("updated in place", False), ("rebuilt (as before)", True)):
        r = run(full, args.base, args.new, args.metrics, args.before)
        print(
            f"{label:24} {r['b50']:10.3f} {r['b99']:10.3f} {r['bmax']:10.3f} "
            f"{r['d50']:10.3f} {r['d99']:10.3f} {r['dmax']:10.3f} {r['names']:13.2f} "
            f"{r['rss']:7.1f} {r['rss_all']:8.1f} {r['per_name']:7.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
