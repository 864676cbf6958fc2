"""OpenMetrics: ``pmda-py run --openmetrics-compat`` against PCP's
pmdaopenmetrics on the same sources, in the same run.

    .venv/bin/python bench/openmetrics.py                 # 100 sources x 100 metrics
    .venv/bin/python bench/openmetrics.py --sources 1000  # the issue's size

Starts loopback exposition servers (``--servers`` processes of Python's
ThreadingHTTPServer, the sources spread over them; each document has 100
metrics, 20 of them with 3 instances: 140 values), then for each agent a
private pmcd with pmcd's default 5 s agent timeout (``-t 5``) and a client
(PCP's Python bindings under /usr/bin/python3) that fetches every value
of every source, ``--fetches`` sweeps one second apart; a sweep is one
pmFetch per 10 000 PMIDs (one pmFetch of 100 000 overflows libpcp's PDU
ceiling), so one pmFetch covers 100 sources.

Reports per agent: time to ready (its first scrape round), pmda_py's round
times (``round_s``: the first rounds, then any slower than the interval;
a round is the n-th scrape of every source, first start to last end),
pmFetch p50/p90/p99/max and sweep p50 in ms, values per sweep (p50; fewer than sources x 140 means
missing values),
fetch errors (e.g. the agent timed out), scrapes per source over the fetch
window, and the agent's RSS at the end (alone, and with its child processes:
pmda_py's scraper workers) and that per metric (``bytes_per_metric``); then
a ``memory at`` line per size: ours beside pmdaopenmetrics' (``--scale
1000x100``: ours alone at 1000 sources x 100 metrics as well, where
pmdaopenmetrics cannot keep up with pmcd's 5 s timeout).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pmda_py.tables.control import rss_kb  # noqa: E402
from tests.integration.pcpbed import PrivatePmcd, free_port  # noqa: E402

THEIRS = "/var/lib/pcp/pmdas/openmetrics/pmdaopenmetrics.python"

SERVER = textwrap.dedent(
    r"""
    import http.server, sys, time
    port, first, count, seed, slow_from, nmetrics = (int(a) for a in sys.argv[1:7])
    served = {}
    docs = {}
    for s in range(first, first + count):
        lines = []
        for m in range(nmetrics):
            if m < 20:
                lines.append(f"# HELP req{m}_total Requests of kind {m}.\n# TYPE req{m}_total counter")
                for code in (200, 404, 500):
                    lines.append(f'req{m}_total{{code="{code}",src="s{s}"}} {s * 1000 + m * 10 + code + seed}')
            else:
                lines.append(f"# HELP g{m}_bytes Gauge {m}.\n# TYPE g{m}_bytes gauge")
                lines.append(f"g{m}_bytes {s + m + seed}.5")
        docs[f"/s{s}"] = ("\n".join(lines) + "\n").encode()

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *a):
            pass
        def do_GET(self):
            served[self.path] = served.get(self.path, 0) + 1
            if int(self.path[2:] or 0) >= slow_from and served[self.path] > 1:
                time.sleep(30)  # answered once (its metrics exist), then never in time
            body = docs.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class S(http.server.ThreadingHTTPServer):
        request_queue_size = 1024
        daemon_threads = True
        def handle_error(self, request, client_address):
            pass  # a client that gave up (a timed-out scrape) is not news

    S(("127.0.0.1", port), H).serve_forever()
    """
)

CLIENT = textwrap.dedent(
    r"""
    import json, subprocess, sys, time
    from pcp import pmapi
    import cpmapi as c
    host, fetches = sys.argv[1], int(sys.argv[2])
    ctx = pmapi.pmContext(c.PM_CONTEXT_HOST, host)
    pr = subprocess.run(["pminfo", "-h", host, "openmetrics"], capture_output=True, text=True)
    names = pr.stdout.split()
    if not names:
        sys.exit("pminfo: " + pr.stderr)
    names = [n for n in names if not n.startswith("openmetrics.control.")]
    from ctypes import c_uint
    found = []
    for k in range(0, len(names), 500):
        found += [p for p in ctx.pmLookupName(names[k : k + 500], relaxed=1) if p != c.PM_ID_NULL]
    pmids = (c_uint * len(found))(*found)
    # one pmFetch of 100 000 PMIDs overflows libpcp's PDU ceiling: sweep in
    # batches of at most BATCH PMIDs (as pmlogger fetches by group)
    BATCH = int(sys.argv[3])
    batches = [pmids[k : k + BATCH] for k in range(0, len(found), BATCH)]
    batches = [(c_uint * len(b))(*b) for b in batches]
    out = {"names": len(found), "batches": len(batches), "ms": [], "sweep_ms": [], "values": [], "errors": []}
    for k in range(fetches):
        s0 = time.perf_counter()
        n = 0
        for b in batches:
            t0 = time.perf_counter()
            try:
                r = ctx.pmFetch(b)
            except pmapi.pmErr as e:
                out["ms"].append(1000 * (time.perf_counter() - t0))
                out["errors"].append(str(e))
                continue
            out["ms"].append(1000 * (time.perf_counter() - t0))
            errs = 0
            for i in range(r.contents.numpmid):
                nv = r.contents.get_numval(i)
                if nv > 0:
                    n += nv
                elif nv < 0:
                    errs += 1
            ctx.pmFreeResult(r)
            if errs:
                out["errors"].append(f"{errs} metrics answered an error")
        out["sweep_ms"].append(1000 * (time.perf_counter() - s0))
        out["values"].append(n)
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - s0)))
    json.dump(out, sys.stdout)
    """
)


def agent_pid(marker: str) -> int | None:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                    return int(d.name)
            except OSError:
                continue
    return None


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (pmda_py's scraper workers)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
            except OSError:
                continue
            if re.search(rf"^PPid:\s+{pid}$", status, re.M):
                out.append(int(d.name))
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def run_agent(
    who: str, root: Path, urls: list[str], fetches: int, batch: int, agent_args: str = ""
) -> dict[str, object]:
    cfg = root / "pmdas" / "openmetrics" / "config.d"
    cfg.mkdir(parents=True)
    for k, url in enumerate(urls):
        (cfg / f"s{k:04d}.url").write_text(url + "\n")
    var = root / "var"
    (var / "config" / "pmda").mkdir(parents=True)
    env = {"PCP_VAR_DIR": str(var), "PCP_PMDAS_DIR": str(root / "pmdas"), "PYTHONPATH": str(HERE.parent)}
    if who == "pmdaopenmetrics":
        cmd = f"/usr/bin/python3 {THEIRS} -c {cfg} -l {root}/agent.log"
    else:
        cmd = (
            f"{sys.executable} -m pmda_py run --openmetrics-compat --notready --openmetrics-dir {cfg} "
            f"--state-dir {var}/config/pmda -l {root}/agent.log {agent_args}"
        )
    pmcd = PrivatePmcd(  # pmcd's default 5 s agent timeout, as in production
        root,
        [f"openmetrics 144 pipe binary notready {cmd}"],
        "root {\n    openmetrics\t144:*:*\n}\n",
        env=env,
        agent_timeout=5,
    )
    t0 = time.monotonic()
    try:
        pmcd.start(wait_for="openmetrics.control.calls", timeout=600)
        ready = time.monotonic() - t0
        pid = agent_pid(str(cfg))
        calls0 = _calls(pmcd)
        w0 = time.monotonic()
        r = subprocess.run(
            ["/usr/bin/python3", "-c", CLIENT, pmcd.host, str(fetches), str(batch)],
            capture_output=True,
            text=True,
            timeout=600,
            env=pmcd.env,
        )
        window = time.monotonic() - w0
        calls1 = _calls(pmcd)
        if r.returncode:  # e.g. pmcd gave up on the agent (its fetch overran pmcd's 5 s timeout)
            agent_lines = [ln for ln in pmcd.log_text().splitlines() if "openmetrics" in ln or "timeout" in ln.lower()]
            return {
                "ready_s": round(ready, 2),
                "client_failed": r.stderr.strip().splitlines()[-1][:300],
                "pmcd_log": agent_lines[-4:],
            }
        out = json.loads(r.stdout)
        rss = rss_kb(pid) if pid else 0
        rss_all = rss + sum(rss_kb(c) for c in children(pid)) if pid else 0  # with pmda_py's worker processes
        log = (root / "agent.log").read_text(errors="replace")
        first = re.search(r"first_round_s=([\d.]+)", log)
        # pmda_py logs each scrape round (the n-th scrape of every source, first start to last end):
        # the first rounds, and any later one slower than the interval
        rounds = [float(x) for x in re.findall(r"openmetrics_round(?:_slow)?\b.*?seconds=([\d.]+)", log)]
        return {
            "ready_s": round(ready, 2),
            "first_round_s": float(first.group(1)) if first else None,
            "round_s": rounds[:6],
            "names": out["names"],
            "batches": out["batches"],
            "fetch_p50_ms": round(pct(out["ms"], 0.5), 1),
            "fetch_p90_ms": round(pct(out["ms"], 0.9), 1),
            "fetch_p99_ms": round(pct(out["ms"], 0.99), 1),
            "fetch_max_ms": round(max(out["ms"]), 1),
            "sweep_p50_ms": round(pct(out["sweep_ms"], 0.5), 1),
            "values_p50": int(pct(out["values"], 0.5)),
            "errors": sorted(set(out["errors"]))[:3],
            "scrapes_per_source": round((calls1 - calls0) / max(1, len(urls)), 2) if calls1 >= 0 else None,
            "window_s": round(window, 1),
            "rss_mb": round(rss / 1024, 1),
            "rss_with_children_mb": round(rss_all / 1024, 1),
            "workers": len(children(pid)) if pid else 0,  # (pmda_py's scraper workers at the end)
            "pmcd_log_timeouts": pmcd.log_text().count("timeout"),
        }
    finally:
        pmcd.stop()


def _calls(pmcd: PrivatePmcd) -> int:
    r = pmcd.tool("pmprobe", "-v", "openmetrics.control.calls", check=False, timeout=120)
    m = re.search(r"openmetrics.control.calls \d+ (\d+)", r.stdout)
    return int(m.group(1)) if m else -1


def serve_and_run(
    args: argparse.Namespace, sources: int, metrics: int, agents: list[str], slow: int = 0
) -> dict[str, dict[str, object]]:
    """``sources`` x ``metrics`` on loopback servers, each agent of ``agents`` in turn."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    per = -(-sources // args.servers)
    results: dict[str, dict[str, object]] = {}
    try:
        for k in range(args.servers):
            first, count = k * per, min(per, sources - k * per)
            if count <= 0:
                break
            port = free_port()
            argv = [str(port), str(first), str(count), "0", str(sources - slow), str(metrics)]
            procs.append(subprocess.Popen([sys.executable, "-c", SERVER, *argv]))
            urls += [f"http://127.0.0.1:{port}/s{s}" for s in range(first, first + count)]
        time.sleep(1.0)
        for who in agents:
            with tempfile.TemporaryDirectory(prefix=f"ombench-{who}-") as tmp:
                res = run_agent(who, Path(tmp), urls, args.fetches, args.batch, args.agent_args)
            names = res.get("names")
            if isinstance(names, int) and names:  # every byte the agent holds (its workers too), per metric
                res["bytes_per_metric"] = round(float(str(res["rss_with_children_mb"])) * 1024 * 1024 / names)
            results[who] = res
            print(f"{who:16s} {json.dumps(res)}", flush=True)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait()
    return results


def memory_line(results: dict[str, dict[str, object]], size: str) -> str:
    """The memory figures of one size side by side (MB: with the workers, the daemon alone)."""
    ours, theirs = results.get("pmda_py", {}), results.get("pmdaopenmetrics", {})
    line = (
        f"memory at {size}: pmda_py {ours.get('rss_with_children_mb')} MB "
        f"(daemon {ours.get('rss_mb')} MB), {ours.get('bytes_per_metric')} bytes/metric"
    )
    if theirs:
        a, b = ours.get("rss_with_children_mb"), theirs.get("rss_mb")
        ok = isinstance(a, float) and isinstance(b, float) and a <= b
        line += f"; pmdaopenmetrics {b} MB: pmda_py at most pmdaopenmetrics: {'yes' if ok else 'no'}"
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=int, default=100)
    ap.add_argument("--servers", type=int, default=4, help="exposition server processes")
    ap.add_argument("--fetches", type=int, default=10)
    ap.add_argument("--only", choices=["pmda_py", "pmdaopenmetrics"])
    ap.add_argument(
        "--slow", type=int, default=0, help="how many of the sources answer once, then never in time (30 s)"
    )
    ap.add_argument("--metrics", type=int, default=100, help="metrics per source")
    ap.add_argument("--batch", type=int, default=10000, help="PMIDs per pmFetch")
    ap.add_argument(
        "--scale",
        default="",
        help="then pmda_py alone at SOURCESxMETRICS (e.g. 1000x100: bytes per metric at 100 000 metrics)",
    )
    ap.add_argument(
        "--agent-args",
        default="",
        help="more arguments for pmda_py (e.g. '--openmetrics-interval 3600': fetches without scrape load)",
    )
    args = ap.parse_args()
    if not os.path.exists(THEIRS) or not shutil.which("pminfo"):
        print("needs PCP with pmdaopenmetrics (scripts/install-pcp)", file=sys.stderr)
        return 2
    agents = [who for who in ("pmda_py", "pmdaopenmetrics") if not args.only or who == args.only]
    results = serve_and_run(args, args.sources, args.metrics, agents, args.slow)
    per_source = 3 * min(20, args.metrics) + max(0, args.metrics - 20)
    print(
        f"sources={args.sources} (slow {args.slow}) metrics/source={args.metrics} values/source={per_source} "
        f"expected values/sweep={args.sources * per_source}"
    )
    lines = [memory_line(results, f"{args.sources} x {args.metrics}")]
    if args.scale:
        n, m = (int(x) for x in args.scale.split("x"))
        lines.append(memory_line(serve_and_run(args, n, m, ["pmda_py"]), f"{n} x {m} ({n * m} metrics)"))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
