"""Soak: the daemon under a private pmcd for a while, with concurrent clients
fetching, MMV files churning and stores arriving.  Reports fetches served,
client errors, the daemon's RSS at start and end, and its p99 fetch latency.

    .venv/bin/python bench/soak.py [--minutes 10] [--clients 4]

Needs PCP (pmcd, pminfo, pmstore, pmprobe; /usr/bin/python3 with pcp.mmv).
A script, run on purpose (not a test).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pmda_py.tables.control import rss_kb  # noqa: E402
from tests.integration.pcpbed import PrivatePmcd  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--clients", type=int, default=4)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pmda_py-soak-"))
    root.chmod(0o755)
    mmv = root / "tmp" / "mmv"
    mmv.mkdir(parents=True)
    src = root / "src"
    src.mkdir()
    for name, m, n in (("app", 50, 20), ("small", 5, 3)):
        subprocess.run(
            [
                "/usr/bin/python3",
                str(REPO / "scripts" / "write_mmv.py"),
                str(src / name),
                "--metrics",
                str(m),
                "--instances",
                str(n),
                "--name",
                name,
            ],
            check=True,
            capture_output=True,
        )
    shutil.copy(src / "app", mmv / "app")
    (root / "simple.conf").write_text("sec,min,hour\n")
    cfg = root / "soak.conf"
    cfg.write_text(
        "[pmda]\nname = soak\ndomain = 252\n"
        f"[table simple]\nmount = soak.simple\nconfig = {root / 'simple.conf'}\n"
        "[table control]\nmount = soak.control\n"
    )
    # the MMV harvester runs as the drop-in (domain 70) beside it, over the churning directory
    agents = [
        f"soak 252 pipe binary {sys.executable} -m pmda_py run -c {cfg} -l {root / 'soak.log'} --state-dir {root}",
        f"mmv 70 pipe binary {sys.executable} -m pmda_py run --mmv-compat -l {root / 'mmv.log'}",
    ]
    pmns = (
        Path("/var/lib/pcp/pmns/root_pmcd")
        .read_text()
        .replace("root {\n    pmcd\n}", "root {\n    pmcd\n    soak\t252:*:*\n    mmv\t70:*:*\n}", 1)
    )
    pmcd = PrivatePmcd(root, agents, pmns, env={"PCP_TMP_DIR": str(root / "tmp")})
    pmcd.start()
    pmcd.wait("soak.control.pid", desc_only=True)
    pmcd.wait("mmv.control.files", desc_only=True)
    stop = threading.Event()
    counts = {"fetches": 0, "errors": 0, "stores": 0, "churn": 0}
    lock = threading.Lock()

    def client(k: int) -> None:
        names = ["soak.simple", "soak.control", "mmv"]
        while not stop.is_set():
            r = pmcd.tool("pminfo", "-f", random.choice(names), check=False)
            with lock:
                counts["fetches"] += 1
                if r.returncode != 0 or "pmFetch" in r.stdout + r.stderr:
                    counts["errors"] += 1

    def storer() -> None:
        while not stop.is_set():
            r = pmcd.tool("pmstore", "soak.simple.numfetch", str(random.randint(0, 1000)), check=False)
            with lock:
                counts["stores"] += 1
                if r.returncode != 0:
                    counts["errors"] += 1
            time.sleep(0.5)

    def churner() -> None:
        full, small = (src / "app").read_bytes(), (src / "small").read_bytes()
        while not stop.is_set():
            step = counts["churn"] % 4
            target = mmv / "app"
            try:
                if step == 0:
                    with open(target, "r+b") as f:
                        f.truncate(len(full) // 3)
                elif step == 1:
                    target.write_bytes(small)
                elif step == 2:
                    target.unlink(missing_ok=True)
                else:
                    target.write_bytes(full)
            except OSError:
                pass
            with lock:
                counts["churn"] += 1
            time.sleep(0.3)

    def agent_rss() -> dict[str, int]:
        out: dict[str, int] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "pmda_py run" in cmd and str(root) in cmd:
                    out["mmv" if "--mmv-compat" in cmd else "soak"] = rss_kb(pid)
            except (OSError, ValueError):
                continue
        return out

    def control() -> dict[str, float]:
        out = pmcd.tool(
            "pminfo",
            "-f",
            "soak.control.rss",
            "soak.control.fetch.latency.p99",
            "soak.control.fetch.count",
            check=False,
        ).stdout
        vals: dict[str, float] = {}
        cur = ""
        for line in out.splitlines():
            if line.startswith("soak."):
                cur = line.strip()
            elif "value" in line and cur:
                vals[cur] = float(line.split("value")[1])
        return vals

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    threads += [threading.Thread(target=storer), threading.Thread(target=churner)]
    time.sleep(2)
    start = control()
    rss_start = agent_rss()
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        while time.monotonic() - t0 < args.minutes * 60:
            time.sleep(min(30, args.minutes * 60))
            now = control()
            print(
                f"{time.monotonic() - t0:6.0f}s fetches={counts['fetches']} errors={counts['errors']} "
                f"stores={counts['stores']} churn={counts['churn']} rss={agent_rss()} kB "
                f"p99={now.get('soak.control.fetch.latency.p99', 0):.3f} ms",
                flush=True,
            )
    finally:
        stop.set()
        for t in threads:
            t.join()
    end = control()
    rss_end = agent_rss()
    pmcd_log = pmcd.log_text()
    pmcd.stop()
    for agent in sorted(rss_start):
        r0, r1 = rss_start[agent], rss_end.get(agent, 0)
        print(f"RSS of the {agent} agent: start {r0} kB, end {r1} kB, growth {100 * (r1 - r0) / max(r0, 1):.1f}%")
    rss0, rss1 = start.get("soak.control.rss", 0), end.get("soak.control.rss", 0)
    print(f"duration: {args.minutes} min, clients: {args.clients}")
    print(
        f"client fetches (pminfo runs): {counts['fetches']}, stores: {counts['stores']}, "
        f"MMV churn steps: {counts['churn']}, client errors: {counts['errors']}"
    )
    print(f"agent FETCHes answered: {int(end.get('soak.control.fetch.count', 0))}")
    print(f"soak agent RSS by its own control metric: {rss0:.0f} -> {rss1:.0f} kB")
    print(f"p99 fetch latency (agent side): {end.get('soak.control.fetch.latency.p99', 0):.3f} ms")
    cleanups = [ln for ln in pmcd_log.splitlines() if "Cleanup" in ln or "terminated" in ln or "HUP" in ln]
    print(f"pmcd cleaned up an agent: {'yes' if any('Cleanup' in ln for ln in cleanups) else 'no'}")
    for ln in cleanups[:10]:
        print(f"  pmcd log: {ln.strip()}")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
