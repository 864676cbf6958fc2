"""OpenMetrics: what a scrape's answer costs on its way from a worker
process to the daemon, without HTTP or pmcd.

    .venv/bin/python bench/openmetrics_digest.py [--metrics 100] [--rounds 200]

For a document of ``--metrics`` metrics (20 of them with 3 instances, as
bench/openmetrics.py serves), each step of the worker protocol in
microseconds per scrape (median of ``--rounds``): the worker's digest
(parse, ingest), encoding the answer into a frame, and in the daemon
reading the frame back into records and swapping the values in; for a
scrape whose metadata is new (the first one of a source) and for one with
values only (every other one).  The daemon's share (read + swap) is what
a round of N sources costs its event loop: N times it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pmda_py.openmetrics.answers import swap_values
from pmda_py.openmetrics.digest import apply_meta, digest
from pmda_py.openmetrics.exposition import Limits
from pmda_py.openmetrics.model import MAX_METRIC, NameTable, SourceConfig, SourceModel
from pmda_py.openmetrics.records import Answer, Digest, Reply, decode_answer, encode_answer, read_frames


def document(source: int, metrics: int) -> str:
    lines = []
    for m in range(metrics):
        if m < 20:
            lines.append(f"# HELP req{m}_total Requests of kind {m}.\n# TYPE req{m}_total counter")
            for code in (200, 404, 500):
                lines.append(f'req{m}_total{{code="{code}",src="s{source}"}} {source * 1000 + m * 10 + code}')
        else:
            lines.append(f"# HELP g{m}_bytes Gauge {m}.\n# TYPE g{m}_bytes gauge")
            lines.append(f"g{m}_bytes {source + m}.5")
    return "\n".join(lines) + "\n"


def median_us(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(1e6 * statistics.median(times), 1)


def model() -> SourceModel:
    return SourceModel("s1", 1, NameTable(MAX_METRIC), lambda _s, m: NameTable(m), Limits())


def measure(worker: SourceModel, text: str, with_meta: bool, rounds: int) -> dict[str, float]:
    config = SourceConfig(url="http://127.0.0.1/s1")
    limits = Limits()
    result, _dirty = digest(worker, config, text, limits, with_meta)
    reply = Reply("ok", code=200, fetch_ms=1, parse_ms=2, digest=result)
    frame = encode_answer(Answer(7, reply))

    def read() -> Digest:
        got = decode_answer(read_frames(bytearray(frame))[0]).reply.digest
        assert got is not None
        return got

    mirror = model()
    first = read()
    if first.meta is not None:
        apply_meta(mirror, first.meta)

    def swap() -> None:
        got = read()
        if with_meta:  # (a new source: a mirror of its own)
            fresh = model()
            assert got.meta is not None
            apply_meta(fresh, got.meta)
            swap_values(fresh, got)
        else:
            swap_values(mirror, got)

    return {
        "digest_us": median_us(lambda: digest(worker, config, text, limits, with_meta), rounds),
        "encode_us": median_us(lambda: encode_answer(Answer(7, reply)), rounds),
        "read_us": median_us(read, rounds),
        "read_swap_us": median_us(swap, rounds),
        "frame_bytes": len(frame),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    text = document(1, args.metrics)
    worker = model()
    for kind, with_meta in (("new metadata", True), ("values only", False)):
        figures = measure(worker, text, with_meta, args.rounds)
        print(f"{kind:13s} metrics={args.metrics} " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
