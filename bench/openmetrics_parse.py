"""What parsing one OpenMetrics document costs, by kind of document: a
normal one, and the hostile ones a careless exporter can send within the
limits (16 MiB; lines of 64 KiB): names as long as a line, and label
values made of escapes.  The parser is the one every scrape runs
(pmda_py.openmetrics.exposition.parse_document).

    .venv/bin/python bench/openmetrics_parse.py [--mb 16] [--repeat 3]

Prints MB, seconds (best of --repeat) and MB/s per document.
"""

from __future__ import annotations

import argparse
import time

from pmda_py.openmetrics.exposition import Limits, parse_document


def normal(size: int) -> str:
    lines = []
    total = k = 0
    while total < size:
        line = f'http_requests_total{{method="get",code="200",handler="/api/v1/items{k % 50}"}} {k}\n'
        lines.append(line)
        total += len(line)
        k += 1
    return "".join(lines)


def long_names(size: int) -> str:
    line = "x" * 60_000 + " 1\n"
    return line * max(1, size // len(line))


def escapes(size: int) -> str:
    value = '"' + "\\n" * 2000 + '"'  # 4 000 characters of escapes: a 2 000-character value, within the limit
    line = "m{" + ",".join(f"l{k}={value}" for k in range(15)) + "} 1\n"
    return "".join(line.replace("m{", f"m{i}{{", 1) for i in range(max(1, size // len(line))))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, default=16.0, help="document size, MB (default 16)")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    size = int(args.mb * 1024 * 1024)
    limits = Limits()
    print(f"{'document':12} {'MB':>6} {'s (best)':>9} {'MB/s':>8} {'samples':>8}")
    for name, make in (("normal", normal), ("long names", long_names), ("escapes", escapes)):
        text = make(size)
        best = float("inf")
        samples = 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            parsed = parse_document(text, limits)
            best = min(best, time.perf_counter() - t0)
            samples = len(parsed.samples)
        mb = len(text) / 1e6
        print(f"{name:12} {mb:6.1f} {best:9.3f} {mb / best:8.1f} {samples:8}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
