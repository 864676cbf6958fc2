"""``pmda-py demo``: start the daemon with the built-in tables and drive it.

Runs ``pmda-py run`` as a child over a pipe (exactly as pmcd would), then
uses the harness to show what a PCP user sees: metric names, descriptors,
values over a few fetches, instances, help text, labels and a pmstore.
Needs no PCP installation.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

import trio

from pmda_py.errors import errstr
from pmda_py.pmapi import PM_INDOM_NULL, LabelType, PmDesc, PmSem, PmType, indom_str, pmid_str
from pmda_py.testing.client import PmdaClient, PmdaReplyError, open_pipe_pmda
from pmda_py.wire import ValueSet

__all__ = ["main"]


def _units(d: PmDesc) -> str:
    u = d.units
    parts = []
    if u.dim_space:
        parts.append(f"space^{u.dim_space}")
    if u.dim_time:
        parts.append(
            ["nsec", "usec", "msec", "sec", "min", "hour"][u.scale_time] + ("" if u.dim_time == 1 else f"^{u.dim_time}")
        )
    if u.dim_count:
        parts.append("count" + ("" if u.dim_count == 1 else f"^{u.dim_count}"))
    return " ".join(parts) or "none"


async def _show(pmda: PmdaClient, prefix: str, out: list[str]) -> None:
    def say(line: str = "") -> None:
        out.append(line)
        print(line, flush=True)

    names = await pmda.traverse(prefix)
    say(f"== {len(names)} metrics below '{prefix}' (PMNS_TRAVERSE) ==")
    pmids = await pmda.lookup(list(reversed(names)))
    for name, p in pmids.items():
        d = await pmda.desc(p)
        try:
            oneline = await pmda.oneline(p)
        except PmdaReplyError:
            oneline = "(no help)"
        ind = "PM_INDOM_NULL" if d.indom == PM_INDOM_NULL else indom_str(d.indom)
        say(
            f"{name:34} {pmid_str(p):11} {PmType(d.type).name:7} {PmSem(d.sem).name:8} "
            f"indom={ind:13} units={_units(d):6} {oneline}"
        )
    say()
    say("== three fetches (values change as pmdasimple's do) ==")
    wanted = [n for n in pmids if ".time." not in n and "latency" not in n and "uptime" not in n]
    for k in range(3):
        values = await pmda.fetch_values(wanted[:6])
        say(f"fetch {k + 1}: " + ", ".join(f"{n.split('.', 1)[1]}={v}" for n, v in values.items()))
    say()
    colour_pmid = pmids.get(f"{prefix}.color")
    if colour_pmid is not None:
        d = await pmda.desc(colour_pmid)
        insts = await pmda.instance(d.indom)
        say(f"== instances of {indom_str(d.indom)}: " + ", ".join(f"{e.inst}={e.name}" for e in insts))
        say(f"   indom help: {await pmda.text(d.indom, 9)}")
        labels = await pmda.labels_dict(d.indom, LabelType.INDOM)
        say(f"   indom labels: {labels}")
        say(f"   domain labels: {await pmda.labels_dict(0xFFFFFFFF, LabelType.DOMAIN)}")
        say()
        say(f"== pmstore {prefix}.color 42 (all instances), then 300 (refused, clamped as pmdasimple does) ==")
        for value in (42, 300):
            code = await pmda.store([ValueSet.of(colour_pmid, PmType.I32, [(e.inst, value) for e in insts])])
            say(f"store {value}: {'ok' if code == 0 else errstr(code)}")
            say(f"   now: {(await pmda.fetch_values([f'{prefix}.color']))[f'{prefix}.color']}")
    ro = pmids.get(f"{prefix}.time.user")
    if ro is not None:
        code = await pmda.store([ValueSet.of(ro, PmType.DOUBLE, [(-1, 1.0)])])
        say(f"store {prefix}.time.user: {errstr(code)}")


def _prepare(workdir: str) -> tuple[str, str]:
    conf = os.path.join(workdir, "simple.conf")
    with open(conf, "w") as f:
        f.write("sec,min,hour\n")
    cfg = os.path.join(workdir, "pypmda.conf")
    with open(cfg, "w") as f:
        f.write(
            "[pmda]\nname = pypmda\ndomain = 310\n\n"
            f"[table simple]\ntable = simple\nmount = pypmda.simple\nconfig = {conf}\n\n"
            "[table control]\ntable = control\nmount = pypmda.control\n"
        )
    return cfg, os.path.join(workdir, "pypmda.log")


async def _demo(argv: Sequence[str], workdir: str, cfg: str, log: str) -> int:
    cmd = [sys.executable, "-m", "pmda_py", "run", "-c", cfg, "-l", log, "--state-dir", workdir, *argv]
    print("$ " + " ".join(cmd), flush=True)
    out: list[str] = []
    async with open_pipe_pmda(cmd) as pmda:
        creds = pmda.creds
        assert creds is not None
        print(f"CREDS from pid {creds.from_}: PDU version {creds.version}, flags {creds.flags:#x}\n", flush=True)
        await _show(pmda, "pypmda.simple", out)
        print(flush=True)
        values = await pmda.fetch_values(
            ["pypmda.control.fetch.count", "pypmda.control.fetch.latency.mean", "pypmda.control.log.level"]
        )
        print("== the daemon's own metrics ==", flush=True)
        for n, v in values.items():
            print(f"{n} = {v}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``pmda-py demo``."""
    p = argparse.ArgumentParser(prog="pmda-py demo", description=__doc__, add_help=False)
    p.add_argument("--help", action="help", help="show this help and exit")
    p.add_argument("extra", nargs="*", metavar="RUN-ARGS", help="more options for pmda-py run (as -D appl0)")
    args = list(argv or [])
    if "--help" in args[: args.index("--") if "--" in args else len(args)]:
        p.parse_args(["--help"])
    extra = args[1:] if args[:1] == ["--"] else args  # pmda-py run's options are taken as they are
    with tempfile.TemporaryDirectory(prefix="pmda_py-demo-") as workdir:
        cfg, log = _prepare(workdir)
        try:
            status = trio.run(_demo, extra, workdir, cfg, log)
        except (EOFError, OSError) as err:
            print(f"pmda-py demo: the daemon did not run the demo: {err}", file=sys.stderr)
            status = 1
        if os.path.exists(log):  # not when the daemon refused its command line
            print(f"\n== the daemon's log ({log}) ==", flush=True)
            with open(log) as f:
                print(f.read(), end="", flush=True)
        return status
