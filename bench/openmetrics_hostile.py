"""OpenMetrics under hostile sources: the resource figures of issue 19
(cases 4 and 8), pmda_py (worker processes, and ``--openmetrics-workers 0``)
next to PCP's pmdaopenmetrics, each under a private pmcd (agent timeout 5 s).

    .venv/bin/python bench/openmetrics_hostile.py            # 2 GiB bomb, 380 x 40 KB new series a scrape
    .venv/bin/python bench/openmetrics_hostile.py --quick    # 256 MiB bomb, 38 x 4 KB

Cases (each with ``--good`` well-behaved sources beside the hostile one):

* ``bomb``: a source answering ``Content-Encoding: gzip, gzip`` with about
  5 KB that decode to ``--bomb-mib`` MiB of zeros;
* ``churn``: a source whose every scrape brings ``--churn`` new series,
  each with 10 labels of ``--label-chars`` characters (the id tables and
  the namespace would grow without a bound).

Reported per agent and case: peak RSS of the agent with its child processes
(sampled every 0.1 s), the agent alone at the end, pmda_py's scrape round
times (from its log; pmdaopenmetrics scrapes inside the fetch, so its round
is the fetch), pmFetch p50/max of every value, the hostile source's status,
whether the good sources kept their values, and the indom size of the churn
metric (instances in the namespace).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from openmetrics import CLIENT, THEIRS, agent_pid, children, pct  # noqa: E402

from pmda_py.tables.control import rss_kb  # noqa: E402
from tests.integration.pcpbed import PrivatePmcd  # noqa: E402
from tests.openmetrics.servers import ControlledServer, Route, gzip_bomb  # noqa: E402

GOOD = b'# TYPE up_total counter\nup_total{job="a"} 1\nup_total{job="b"} 2\ntemp 21.5\n'


def churn_doc(new: int, chars: int) -> object:
    def make(hits: int) -> bytes:
        pad = "v" * chars
        labels = ",".join(f'l{k}="{pad}"' for k in range(9))
        lines = [f'churn{{id="{hits}-{n}",{labels}}} {n}' for n in range(new)]
        return ("first 1\n" + "\n".join(lines) + "\nafter_total 7\n").encode()

    return make


class Sampler:
    """Peak RSS (kB) of the agent (found by ``marker`` in its command line)
    and its children, sampled every 0.1 s from its start."""

    def __init__(self, marker: str) -> None:
        self.marker, self.pid, self.peak, self._stop = marker, 0, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.pid:
                self.pid = agent_pid(self.marker) or 0
            if self.pid:
                total = rss_kb(self.pid) + sum(rss_kb(c) for c in children(self.pid))
                self.peak = max(self.peak, total)
            self._stop.wait(0.1)

    def stop(self) -> int:
        self._stop.set()
        self.thread.join()
        return self.peak


def run(
    who: str, workers: str, root: Path, urls: dict[str, str], fetches: int, start_timeout: float
) -> dict[str, object]:
    cfg = root / "pmdas" / "openmetrics" / "config.d"
    cfg.mkdir(parents=True)
    for name, url in urls.items():
        (cfg / f"{name}.url").write_text(url + "\n")
    var = root / "var"
    (var / "config" / "pmda").mkdir(parents=True)
    env = {"PCP_VAR_DIR": str(var), "PCP_PMDAS_DIR": str(root / "pmdas"), "PYTHONPATH": str(HERE.parent)}
    if who == "pmdaopenmetrics":
        cmd = f"/usr/bin/python3 {THEIRS} -c {cfg} -l {root}/agent.log"
    else:
        cmd = (
            f"{sys.executable} -m pmda_py run --openmetrics-compat --notready --openmetrics-dir {cfg} "
            f"--state-dir {var}/config/pmda -l {root}/agent.log --openmetrics-interval 1 "
            f"--openmetrics-workers {workers}"
        )
    pmcd = PrivatePmcd(
        root,
        [f"openmetrics 144 pipe binary notready {cmd}"],
        "root {\n    openmetrics\t144:*:*\n}\n",
        env=env,
        agent_timeout=5,
    )
    sampler = Sampler(str(cfg))
    try:
        t0 = time.monotonic()
        try:
            pmcd.start(wait_for="openmetrics.control.calls", timeout=start_timeout)
        except Exception as exc:  # (an agent stuck in its first fetch: what it cost meanwhile)
            return {
                "peak_rss_mb": round(sampler.stop() / 1024, 1),
                "not_ready": f"{type(exc).__name__} after {time.monotonic() - t0:.0f} s",
            }
        pid = agent_pid(str(cfg))
        r = subprocess.run(
            ["/usr/bin/python3", "-c", CLIENT, pmcd.host, str(fetches), "10000"],
            capture_output=True,
            text=True,
            timeout=600,
            env=pmcd.env,
        )
        peak = sampler.stop()
        end = rss_kb(pid) if pid else 0
        status = pmcd.tool("pminfo", "-f", "openmetrics.control.status", check=False, timeout=120).stdout
        hostile = next(iter(n for n in urls if n != "good0"))
        m = re.search(rf'inst \[\d+ or "{hostile}"\] value "(.*)"', status)
        names = pmcd.tool("pminfo", "openmetrics", check=False, timeout=120).stdout.split()
        inst = pmcd.tool("pminfo", "-f", "openmetrics.churn.churn", check=False, timeout=120).stdout
        good = pmcd.tool("pminfo", "-f", "openmetrics.good0.up_total", check=False, timeout=120).stdout
        log = (root / "agent.log").read_text(errors="replace") if (root / "agent.log").exists() else ""
        rounds = [float(x) for x in re.findall(r"openmetrics_round(?:_slow)?\b.*?seconds=([\d.]+)", log)]
        out: dict[str, object] = {
            "peak_rss_mb": round(peak / 1024, 1),
            "end_rss_mb": round(end / 1024, 1),
            "round_s": rounds[:4] if who == "pmda_py" else None,
        }
        if r.returncode == 0:
            res = json.loads(r.stdout)
            out.update(
                fetch_p50_ms=round(pct(res["ms"], 0.5), 1),
                fetch_max_ms=round(max(res["ms"]), 1),
                values_p50=int(pct(res["values"], 0.5)),
                errors=sorted(set(res["errors"]))[:2],
            )
        else:
            out["client_failed"] = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        out["hostile_status"] = (m.group(1).split(".url: ")[-1] if m else "?")[:120]
        out["good_values"] = good.count("inst [")
        out["names"] = len(names)
        out["churn_instances"] = inst.count("inst [")
        return out
    finally:
        sampler.stop()
        pmcd.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small bomb and churn (a few seconds each)")
    ap.add_argument("--bomb-mib", type=int, default=2048)
    ap.add_argument("--churn", type=int, default=380, help="new series a scrape")
    ap.add_argument("--label-chars", type=int, default=4000)
    ap.add_argument("--good", type=int, default=5)
    ap.add_argument("--fetches", type=int, default=8)
    ap.add_argument("--cases", default="bomb,churn")
    ap.add_argument("--start-timeout", type=float, default=90, help="seconds an agent has to answer its first fetch")
    ap.add_argument("--agents", default="pmda_py,pmda_py-w0,pmdaopenmetrics")
    args = ap.parse_args()
    if args.quick:
        args.bomb_mib, args.churn, args.label_chars, args.fetches = 256, 38, 400, 4
    if not shutil.which("pminfo") or not os.path.exists("/usr/lib/pcp/bin/pmcd"):
        print("needs PCP (scripts/install-pcp)", file=sys.stderr)
        return 2
    bomb = gzip_bomb(args.bomb_mib << 20)
    print(
        f"bomb: {len(bomb)} bytes, {args.bomb_mib} MiB decoded; churn: {args.churn} new series x 10 labels "
        f"x {args.label_chars} characters a scrape; {args.good} good sources",
        flush=True,
    )
    with ControlledServer() as server:
        server.routes["bomb"] = Route(bomb, headers={"Content-Encoding": "gzip, gzip"})
        server.routes["churn"] = Route(make=churn_doc(args.churn, args.label_chars))
        for k in range(args.good):
            server.routes[f"good{k}"] = Route(GOOD)
        for case in args.cases.split(","):
            urls = {case: server.url(case), **{f"good{k}": server.url(f"good{k}") for k in range(args.good)}}
            for agent in args.agents.split(","):
                if agent == "pmdaopenmetrics" and not os.path.exists(THEIRS):
                    print(f"{case:6s} {agent:16s} (not installed)")
                    continue
                who, workers = ("pmda_py", "0") if agent == "pmda_py-w0" else (agent, "2")
                with tempfile.TemporaryDirectory(prefix=f"omhostile-{agent}-") as tmp:
                    result = run(who, workers, Path(tmp), urls, args.fetches, args.start_timeout)
                print(f"{case:6s} {agent:16s} {json.dumps(result)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
