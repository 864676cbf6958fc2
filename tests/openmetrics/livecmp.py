"""Run PCP's pmdaopenmetrics and ours under private pmcds on the same
sources and compare ``pminfo -fdTtl --labels`` metric by metric.

``python -m tests.openmetrics.livecmp`` prints the comparison (the live
test asserts on the same data).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from pmda_py.testing.support import pmda_py_argv, traversable_dir
from tests.integration.pcpbed import PrivatePmcd
from tests.openmetrics.servers import ControlledServer, Route, node_exporter, prometheus_client_app

THEIRS = "/var/lib/pcp/pmdas/openmetrics/pmdaopenmetrics.python"
PMNS = "root {\n    openmetrics\t144:*:*\n}\n"

#: a hand-made exposition served by the controlled server: what
#: pmdaopenmetrics' parser has to get right (escapes, PCP5 lines, colons,
#: an empty label set, a trailing comma, timestamps)
EDGE_DOC = b"""# HELP edge_total A counter.\\nWith a second help line.
# TYPE edge_total counter
edge_total{kind="a",path="/x"} 5 1395066363000
edge_total{kind="b",path="/y",} 6
# TYPE edge_empty gauge
edge_empty{} 3
edge:colon:name 4
# PCP5 pcp.disk.read 60.0.1 u64 60.1 counter Kbyte
disk_read{instname="sda"} 10
disk_read{instname="sdb"} 20
# PCP ctx.switches counter count / sec
ctx_switches 99
# PCP5 null.labelled 1.2.3 u32 PM_INDOM_NULL discrete none
nullm{site="x"} 5
escaped{v="back\\\\slash and \\"quote\\" and \\t tab"} 1
"""

#: where we differ from pmdaopenmetrics on purpose
KNOWN = {
    "openmetrics.control.calls": "counts scrapes (one per interval), not fetches (pmdaopenmetrics scrapes per fetch)",
    "openmetrics.control.fetch_time": "milliseconds spent by different scrapes",
    "openmetrics.control.parse_time": "milliseconds spent by different parses",
    "openmetrics.control.status": "pmdaopenmetrics' status of a failed source is the requests exception text",
}


def blocks(text: str) -> dict[str, str]:
    """pminfo output -> {metric name: its block}."""
    out: dict[str, str] = {}
    for chunk in re.split(r"\n\s*\n", text.strip()):
        first = chunk.split("\n", 1)[0]
        name = first.split(" ", 1)[0]
        if name:
            out[name] = chunk
    return out


def mask_values(block: str) -> str:
    return re.sub(r"(\] value| {4}value) .*", r"\1 <masked>", block)


@contextmanager
def sources(root: Path) -> Iterator[dict[str, str]]:
    """Start every source; yields {nickname: .url text}."""
    with ExitStack() as stack:
        server = stack.enter_context(ControlledServer())
        server.routes["edge"] = Route(EDGE_DOC)
        server.routes["bad"] = Route(b"good_one 1\nbroken{ 2\nlost_after_error 3\n")
        server.routes["gone"] = Route(b"", status=503)
        prom = stack.enter_context(prometheus_client_app())
        node = stack.enter_context(node_exporter())
        doc = root / "static.prom"
        doc.write_text('# TYPE static_bytes gauge\nstatic_bytes{dev="a"} 1\nstatic_bytes{dev="b"} 2\n')
        yield {
            "prom.app": f"{prom}\n",
            "node": f"{node}\nFILTER: INCLUDE METRIC ^node_\nFILTER: EXCLUDE METRIC .*\n"
            "FILTER: OPTIONAL LABEL ^mountpoint$\n",
            "edge": f"{server.url('edge')}\nHEADER: X-Test: yes\n",
            "bad": f"{server.url('bad')}\n",
            "gone": f"{server.url('gone')}\n",
            "static": f"file://{doc}\n",
        }


def run_agent(who: str, root: Path, urls: dict[str, str], state: Path | None = None) -> str:
    """pminfo -fdTtl --labels openmetrics under a private pmcd running ``who``."""
    cfg = root / "pmdas" / "openmetrics" / "config.d"
    shutil.rmtree(root / "pmdas", ignore_errors=True)
    for name, text in urls.items():
        path = cfg / (name.replace(".", "/") + ".url")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    var = state or (root / "var")
    (var / "config" / "pmda").mkdir(parents=True, exist_ok=True)
    env = {"PCP_VAR_DIR": str(var), "PCP_PMDAS_DIR": str(root / "pmdas")}
    if who == "theirs":
        cmd = f"/usr/bin/python3 {THEIRS} -c {cfg} -l {root}/agent.log"
    else:
        argv = pmda_py_argv("run", "--openmetrics-compat", "--notready", "--openmetrics-dir", str(cfg))
        cmd = " ".join([*argv, "--state-dir", f"{var}/config/pmda", "-l", f"{root}/agent.log"])
    pmcd = PrivatePmcd(
        root,
        [f"openmetrics 144 pipe binary notready {cmd}"],
        PMNS,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        pmcd.start(wait_for="openmetrics.control.calls")
        r = pmcd.tool("pminfo", "-mfdTtl", "--labels", "openmetrics", check=False, timeout=60)
        return r.stdout + r.stderr
    finally:
        pmcd.stop()


def compare(theirs: str, ours: str, volatile: tuple[str, ...] = ("openmetrics.node.",)) -> dict[str, list[str]]:
    """{"missing": [...], "extra": [...], "differ": [...]} (values masked for ``volatile`` prefixes and KNOWN)."""
    a, b = blocks(theirs), blocks(ours)
    out: dict[str, list[str]] = {"missing": sorted(set(a) - set(b)), "extra": sorted(set(b) - set(a)), "differ": []}
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if name.startswith(volatile) or name in KNOWN:
            x, y = mask_values(x), mask_values(y)
        if x != y:
            out["differ"].append(name)
    return out


def main() -> int:
    import difflib

    with traversable_dir("omlive") as root:
        with sources(root) as urls:
            (root / "theirs").mkdir()
            (root / "ours").mkdir()
            theirs = run_agent("theirs", root / "theirs", urls)
            ours = run_agent("ours", root / "ours", urls)
        result = compare(theirs, ours)
        a, b = blocks(theirs), blocks(ours)
        print(f"metrics: theirs {len(a)}, ours {len(b)}; identical {len(set(a) & set(b)) - len(result['differ'])}")
        for k, v in result.items():
            print(f"{k}: {v}")
        for name in result["differ"]:
            print(
                "".join(
                    difflib.unified_diff(
                        (a[name] + "\n").splitlines(True), (b[name] + "\n").splitlines(True), "theirs", "ours", n=0
                    )
                )
            )
        if os.environ.get("OMLIVE_DUMP"):
            Path(os.environ["OMLIVE_DUMP"] + ".theirs").write_text(theirs)
            Path(os.environ["OMLIVE_DUMP"] + ".ours").write_text(ours)
    return 0


if __name__ == "__main__":
    sys.exit(main())
