"""The corpus under a private pmcd: each PMDA started by pmcd from a
pmcd.conf line (``python3 SCRIPT``, then ``pmda-py compat SCRIPT``), its
whole subtree read with ``pminfo -fdtTl``; the outputs must be identical
but for the values that follow the clock.  pmdaopenmetrics (which dbpmda
cannot drive: it speaks ``notready``) is compared here only."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_argv
from tests.compat import test_corpus as corpus
from tests.compat.harness import COMPAT, SYSTEM_PYTHON, bed, compiled_help, require_script
from tests.conftest import require
from tests.integration.pcpbed import PMCD, PrivatePmcd

DOMAINS = {"simple": 253, "trivial": 250, "zswap": 125, "unbound": 132, "gluster": 118, "openmetrics": 144}
#: a metric with a value, awaited before pminfo runs
READY = {
    "simple": "simple.numfetch",
    "trivial": "trivial.time",
    "zswap": "zswap.pool_pages",
    "unbound": "unbound.total.num.queries",
    "gluster": "gluster.volume.dist.count",
    "openmetrics": "openmetrics.local.temp",
}
#: metrics whose values follow the clock or the agent's CPU time
VOLATILE = re.compile(r"^(simple\.now|simple\.time\.\w+|trivial\.time|openmetrics\.control\.(fetch|parse)_time)$")


def _inputs(name: str, root: Path, env: dict[str, str]) -> None:
    if name == "simple":
        compiled_help(env, "simple", 253)
        (Path(env["PCP_PMDAS_DIR"]) / "simple" / "simple.conf").write_text("sec,min,hour\n")
    elif name == "trivial":
        compiled_help(env, "trivial", 250)
    elif name == "zswap":
        stats = root / "zswap"
        stats.mkdir()
        for k, n in enumerate(corpus.ZSWAP_NAMES):
            (stats / n).write_text(f"{k * 31 + 1}\n")
        env["ZSWAP_STATS_PATH"] = str(stats)
    elif name == "unbound":
        stats = root / "unbound.stats"
        stats.write_text("total.num.queries=42\ntotal.requestlist.avg=1.5\nnum.query.type.A=7\ntime.up=12.25\n")
        env["UNBOUND_STATS"] = f"cat {stats}"
    elif name == "gluster":
        env.update(corpus._gluster_inputs(root))
    elif name == "openmetrics":
        # one file:// source, at the same path for both runs (its URL is a label)
        doc = root.parent / "metrics.txt"
        doc.write_text(
            "# HELP jobs_total Jobs done.\n# TYPE jobs_total counter\n"
            'jobs_total{kind="a"} 7\njobs_total{kind="b"} 9\n# TYPE temp gauge\ntemp 21.5\n'
        )
        conf = Path(env["PCP_PMDAS_DIR"]) / "openmetrics" / "config.d"
        conf.mkdir(parents=True)
        for d in (conf.parent, conf):
            d.chmod(0o777)
        (conf / "local.url").write_text(f"file://{doc}\n")


def _mask(text: str, volatile: re.Pattern[str] = VOLATILE) -> str:
    """Values of the volatile metrics masked (a metric's lines run from its
    name line to the next name line; help text may hold blank lines)."""
    out = []
    current = ""
    for line in text.splitlines():
        m = re.match(r"^((?:simple|trivial|zswap|unbound|gluster|openmetrics)(?:\.\w+)+)(?: \[.*\])?$", line)
        if m:
            current = m.group(1)
        elif volatile.match(current) and re.match(r"^\s+(inst \[.*\] )?value ", line):
            line = re.sub(r"value \S+$", "value V", line)
        out.append(line)
    return "\n".join(out)


def _pminfo(name: str, cmd: list[str], root: Path) -> str:
    """``pminfo -fdtTl NAME`` of a private pmcd running ``cmd SCRIPT``."""
    return _pminfo_of(name, [*cmd, str(require_script(name))], root)


def _requests_for_the_binding(root: Path) -> dict[str, str]:
    """pmdaopenmetrics.python imports requests: where the system python3
    has no python3-requests (the PCP chroots), the binding's run gets the
    venv's copy (same interpreter version) on PYTHONPATH, nothing else."""
    import importlib.util
    import subprocess

    if subprocess.run([SYSTEM_PYTHON, "-c", "import requests"], capture_output=True).returncode == 0:
        return {}
    lib = root / "requests-lib"
    lib.mkdir()
    for mod in ("requests", "urllib3", "idna", "charset_normalizer", "certifi"):
        spec = importlib.util.find_spec(mod)
        if spec is not None and spec.submodule_search_locations:
            (lib / mod).symlink_to(next(iter(spec.submodule_search_locations)))
    return {"PYTHONPATH": str(lib)}


def _pminfo_of(name: str, argv: list[str], root: Path) -> str:
    """``pminfo -fdtTl NAME`` of a private pmcd running ``argv``."""
    root.mkdir()
    root.chmod(0o777)
    env = bed(root)
    if name == "openmetrics" and argv[0] == SYSTEM_PYTHON:
        env.update(_requests_for_the_binding(root))
    _inputs(name, root, env)
    flags = "binary notready" if name == "openmetrics" else "binary"  # as its Install writes it
    line = f"{name}\t{DOMAINS[name]}\tpipe\t{flags}\t{shlex.join(argv)}"
    pmcd = PrivatePmcd(root, [line], f"root {{\n\t{name}\t{DOMAINS[name]}:*:*\n}}\n", env=env)
    try:
        pmcd.start(READY[name])
        r = pmcd.tool("pminfo", "-fdtTl", name, check=False)
        return r.stdout + r.stderr
    finally:
        pmcd.stop()


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_pminfo_under_pmcd(root: Path, name: str) -> None:
    require(Path(PMCD).exists(), "pmcd is not installed")
    if name == "openmetrics":
        import importlib.util

        require(importlib.util.find_spec("requests") is not None, "requests not installed (pip install -e '.[test]')")

    real = _pminfo(name, [SYSTEM_PYTHON], root / "real")
    ours = _pminfo(name, COMPAT, root / "ours")
    assert "Data Type:" in real and "Error" not in real, real  # the binding served pmcd
    assert _mask(ours) == _mask(real)


@pytest.mark.slow
def test_openmetrics_as_our_own_dropin(root: Path) -> None:
    """pmdaopenmetrics.python under compat answers as pmda_py's own
    OpenMetrics drop-in (``pmda-py run --openmetrics-compat``) does, but for
    the per-source call counts (the drop-in scrapes in the background)."""
    require(Path(PMCD).exists(), "pmcd is not installed")
    import importlib.util

    require(importlib.util.find_spec("requests") is not None, "requests not installed (pip install -e '.[test]')")
    ours = _pminfo("openmetrics", COMPAT, root / "ours")
    dropin = pmda_py_argv("run", "--openmetrics-compat", "--notready", "-d", "144")
    theirs = _pminfo_of("openmetrics", dropin, root / "dropin")
    volatile = re.compile(VOLATILE.pattern.replace("(fetch|parse)_time", "(fetch_time|parse_time|calls)"))
    assert "value 21.5" in ours
    assert _mask(ours, volatile) == _mask(theirs, volatile)
