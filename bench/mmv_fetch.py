"""MMV fetch latency: pmdammv (C, run as a daemon) against
``pmda-py run --mmv-compat`` on the same files, through one blocking pipe driver.

    .venv/bin/python bench/mmv_fetch.py [--iterations 20]

Writes the files with PCP's own libpcp_mmv (scripts/write_mmv.py, run with
Debian's /usr/bin/python3): 100 metrics x 100 instances (10 000 values) and
1000 metrics x 100 instances (100 000 values, v1 allows at most 1023 metrics
per file).  Each FETCH asks for every metric of the file.  Prints p50/p90 in
milliseconds and pmdammv's p50 divided by ours.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from driver import PipeDriver

from pmda_py.pmapi import pmid
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import FetchPdu, ResultPdu, decode_pdu

HERE = Path(__file__).resolve().parent
PMDAMMV = "/var/lib/pcp/pmdas/mmv/pmdammv"


def write(path: Path, metrics: int, instances: int) -> None:
    subprocess.run(
        [
            "/usr/bin/python3",
            str(HERE.parent / "scripts" / "write_mmv.py"),
            str(path),
            "--metrics",
            str(metrics),
            "--instances",
            str(instances),
            "--cluster",
            "7",
        ],
        check=True,
        capture_output=True,
    )


def run(cmd: list[str], tmp: Path, metrics: int, iterations: int) -> tuple[float, float, int]:
    d = PipeDriver(cmd, {"PCP_TMP_DIR": str(tmp)})
    try:
        req = FetchPdu(tuple(pmid(70, 7, i) for i in range(1, metrics + 1))).encode()
        reply = decode_pdu(d.request(req))
        assert isinstance(reply, ResultPdu)
        n = sum(len(v.values) for v in reply.vsets)
        ts = sorted(d.time(req, iterations, warmup=2))
        return statistics.median(ts) * 1000, ts[int(len(ts) * 0.9)] * 1000, n
    finally:
        d.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=20)
    args = p.parse_args()
    if not Path(PMDAMMV).exists():
        print("PCP's pmdammv is not installed", file=sys.stderr)
        return 1
    print(f"{'values':>8} {'PMDA':28} {'p50 ms':>9} {'p90 ms':>9} {'pmdammv/ours':>13}")
    for metrics, instances in ((100, 100), (1000, 100)):
        tmp = Path(tempfile.mkdtemp(prefix="pmda_py-mmvbench-"))
        tmp.chmod(0o755)  # pmdammv drops to the pcp user
        try:
            (tmp / "mmv").mkdir()
            write(tmp / "mmv" / "bench", metrics, instances)
            ref = run(
                [PMDAMMV, "-d", "70", "-l", str(tmp / "pmdammv.log")],
                tmp,
                metrics,
                max(3, args.iterations // (10 if metrics > 500 else 1)),
            )
            ours = run(
                pmda_py_argv("run", "--mmv-compat", "-l", str(tmp / "ours.log")),
                tmp,
                metrics,
                args.iterations,
            )
            assert ref[2] == ours[2], (ref[2], ours[2])
            print(f"{ref[2]:8d} {'pmdammv (C daemon)':28} {ref[0]:9.2f} {ref[1]:9.2f}")
            print(
                f"{ours[2]:8d} {'pmda-py run --mmv-compat':28} {ours[0]:9.2f} {ours[1]:9.2f} {ref[0] / ours[0]:12.1f}x"
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
