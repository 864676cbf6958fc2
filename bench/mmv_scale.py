"""MMV at scale: what other users' files cost the agent, pmdammv (the C
daemon) against ``pmda-py run --mmv-compat``, through one blocking pipe driver.

    .venv/bin/python bench/mmv_scale.py [--files 10,1000,4000] [--iterations 200]

For each directory size N (copies of one file written by PCP's libpcp_mmv,
10 metrics x 5 instances, automatic clusters):

* ``req p50/max ms``: a FETCH of one metric of one file, repeated (pmdammv
  checks every file's generation before each request; the drop-in notices
  changes with inotify and opens only the file it reads);
* ``rescan s``: a new file added, the time until a FETCH of
  ``mmv.control.files`` says N+1 (pmdammv rescans inside the first request
  after the change; the drop-in rescans in a thread), and ``worst reply
  ms``: the slowest reply while that rescan ran; with ``--rescans R``, the
  file is added and removed R times in turn: the median rescan and the
  slowest reply of them all;
* ``RSS MiB``: the PMDA's peak resident size (VmHWM).

Then one such file extended to 1 GiB with ``truncate`` (sparse: no disk
used): FETCH of all its metrics, p50/max, and peak RSS.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from driver import PipeDriver

from pmda_py.pmapi import pmid
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import FetchPdu, PmnsIdsPdu, PmnsNamesPdu, ResultPdu, decode_pdu

HERE = Path(__file__).resolve().parent
PMDAMMV = "/var/lib/pcp/pmdas/mmv/pmdammv"
METRICS = 10


def write_template(path: Path) -> None:
    subprocess.run(
        [
            "/usr/bin/python3",
            str(HERE.parent / "scripts" / "write_mmv.py"),
            str(path),
            "--metrics",
            str(METRICS),
            "--instances",
            "5",
            "--cluster",
            "0",
        ],
        check=True,
        capture_output=True,
    )


def hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def lookup(d: PipeDriver, name: str) -> int:
    reply = decode_pdu(d.request(PmnsNamesPdu((name,), None).encode()))
    assert isinstance(reply, PmnsIdsPdu), reply
    return reply.pmids[0]


def files_count(d: PipeDriver) -> int:
    reply = decode_pdu(d.request(FetchPdu((pmid(70, 0, 2),)).encode()))
    assert isinstance(reply, ResultPdu)
    return int(reply.vsets[0].values[0].value)  # type: ignore[arg-type]


def ms(ts: list[float]) -> tuple[float, float]:
    return statistics.median(ts) * 1000, max(ts) * 1000


def scale_row(cmd: list[str], root: Path, n: int, iterations: int, template: Path, rescans: int) -> str:
    d = PipeDriver(cmd, {"PCP_TMP_DIR": str(root)})
    try:
        deadline = time.monotonic() + 120
        while files_count(d) != n and time.monotonic() < deadline:  # the first scan done
            time.sleep(0.05)
        one = FetchPdu((lookup(d, "mmv.f00000.m1"),)).encode()
        p50, worst = ms(d.time(one, iterations, warmup=5))
        replies: list[float] = []
        times: list[float] = []
        for r in range(rescans):  # a file added, then removed, ... one rescan each
            if r % 2 == 0:
                shutil.copy(template, root / "mmv" / "zz_new")
            else:
                (root / "mmv" / "zz_new").unlink()
            want = n + 1 if r % 2 == 0 else n
            t0 = time.perf_counter()
            while True:
                t1 = time.perf_counter()
                count = files_count(d)
                replies.append(time.perf_counter() - t1)
                if count == want or time.perf_counter() - t0 > 120:
                    break
            times.append(time.perf_counter() - t0)
        rescan = statistics.median(times)
        rss = hwm_mib(d.proc.pid)
    finally:
        d.close()
        (root / "mmv" / "zz_new").unlink(missing_ok=True)
    return f"{p50:9.3f} {worst:9.3f} {rescan:9.3f} {max(replies) * 1000:10.2f} {rss:8.1f}"


def sparse_row(cmd: list[str], root: Path, iterations: int) -> str:
    d = PipeDriver(cmd, {"PCP_TMP_DIR": str(root)})
    try:
        pmids = tuple(lookup(d, f"mmv.big.m{i}") for i in range(1, METRICS + 1))
        req = FetchPdu(pmids).encode()
        reply = decode_pdu(d.request(req))
        assert isinstance(reply, ResultPdu) and all(v.values for v in reply.vsets), reply
        p50, worst = ms(d.time(req, iterations, warmup=2))
        rss = hwm_mib(d.proc.pid)
    finally:
        d.close()
    return f"{p50:9.3f} {worst:9.3f} {rss:8.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", default="10,1000,4000", help="directory sizes")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--rescans", type=int, default=1, help="rescans per size (a file added, removed, ...)")
    p.add_argument("--quick", action="store_true", help="10 and 1000 files, 50 iterations")
    args = p.parse_args()
    if args.quick:
        args.files, args.iterations = "10,1000", 50
    if not Path(PMDAMMV).exists():
        print("PCP's pmdammv is not installed", file=sys.stderr)
        return 1
    root = Path(tempfile.mkdtemp(prefix="pmda_py-mmvscale-"))
    root.chmod(0o755)  # pmdammv drops to the pcp user
    try:
        template = root / "template"
        write_template(template)
        template.chmod(0o644)
        ours_cmd = pmda_py_argv("run", "--mmv-compat", "-l", str(root / "ours.log"))
        ref_cmd = [PMDAMMV, "-d", "70", "-l", str(root / "pmdammv.log")]
        print(
            f"{'files':>6} {'PMDA':26} {'req p50':>9} {'req max':>9} {'rescan s':>9} {'worst rep':>10} {'RSS MiB':>8}"
        )
        for n in (int(x) for x in args.files.split(",")):
            d = root / "mmv"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(mode=0o755)
            for k in range(n):
                shutil.copy(template, d / f"f{k:05d}")
            for label, cmd in (("pmdammv (C daemon)", ref_cmd), ("pmda-py run --mmv-compat", ours_cmd)):
                print(
                    f"{n:6d} {label:26} {scale_row(cmd, root, n, args.iterations, template, args.rescans)}", flush=True
                )
        d = root / "mmv"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(mode=0o755)
        shutil.copy(template, d / "big")
        os.truncate(d / "big", 1 << 30)  # sparse: no disk used
        print()
        print(f"1 GiB sparse file, FETCH of its {METRICS} metrics")
        print(f"{'PMDA':26} {'p50 ms':>9} {'max ms':>9} {'RSS MiB':>8}")
        for label, cmd in (("pmdammv (C daemon)", ref_cmd), ("pmda-py run --mmv-compat", ours_cmd)):
            print(f"{label:26} {sparse_row(cmd, root, max(5, args.iterations // 4))}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
