"""The corpus: PCP's own Python PMDAs as Debian installs them, run under
real dbpmda with the binding (``python3 SCRIPT``) and with ``pmda-py compat
SCRIPT``; the transcripts must be identical after masking times and pids.
Inputs (config files, stats directories) are written by the tests."""

from __future__ import annotations

from pathlib import Path

from tests.compat.harness import PMDAS, bed, both, compiled_help, require_script, write_pmns

SIMPLE = """desc simple.numfetch
desc simple.color
desc simple.time.user
desc simple.time.sys
desc simple.now
fetch simple.numfetch simple.color simple.now
fetch simple.color simple.time.user simple.time.sys
fetch simple.nonesuch.leaf
instance 253.0
instance 253.1
instance 253.1 1
instance 253.1 "min"
instance 253.0 "nonesuch"
instance 253.9
text simple.color
text simple.numfetch
text simple.now
text indom 253.0
text indom 253.1
label context
label domain
label indom 253.0
label indom 253.1
label cluster 253.0
label cluster 253.2
label item simple.color
label instances 253.0
label instances 253.1
store simple.numfetch "42"
fetch simple.numfetch
store simple.numfetch "-3"
fetch simple.numfetch
store simple.color "300"
store simple.color "7"
store simple.time.user "1"
store simple.now "1"
fetch simple.color
name 253.0.1
pmid simple.now
children simple
children simple.time
traverse simple
desc 253.7.7
"""


def test_simple(root: Path) -> None:
    script = require_script("simple")
    env = bed(root)
    compiled_help(env, "simple", 253)
    (Path(env["PCP_PMDAS_DIR"]) / "simple" / "simple.conf").write_text("sec,min,hour\n")
    real, ours = both(script, SIMPLE, PMDAS / "simple" / "root", env, root)
    assert "value 201" in real and "role=" in real  # the binding answered
    assert ours == real


def test_simple_time_indom_follows_its_config(root: Path) -> None:
    """simple.now's instances come from simple.conf, read at each fetch and
    instance request (a dict indom: ids kept by name)."""
    script = require_script("simple")
    env = bed(root)
    compiled_help(env, "simple", 253)
    (Path(env["PCP_PMDAS_DIR"]) / "simple" / "simple.conf").write_text("hour,sec\n")
    real, ours = both(
        script, "instance 253.1\nfetch simple.now\nlabel instances 253.1\n", PMDAS / "simple" / "root", env, root
    )
    assert 'name: "hour"' in real
    assert ours == real


TRIVIAL = """desc trivial.time
fetch trivial.time
text trivial.time
label domain
label item trivial.time
label cluster 250.0
fetch 250.0.1
store trivial.time "5"
children trivial
"""


def test_trivial_help_from_add_metric(root: Path) -> None:
    """No help file in PCP_PMDAS_DIR: texts are add_metric's."""
    script = require_script("trivial")
    env = bed(root)
    real, ours = both(script, TRIVIAL, PMDAS / "trivial" / "root", env, root)
    assert "The time in seconds since the epoch" in real
    # the clock ticks between the two runs: mask trivial.time's value
    assert _mask_value(ours) == _mask_value(real)


def test_trivial_help_from_help_file(root: Path) -> None:
    """A readable help file: texts come from its newhelp index only."""
    script = require_script("trivial")
    env = bed(root)
    compiled_help(env, "trivial", 250)
    real, ours = both(script, TRIVIAL, PMDAS / "trivial" / "root", env, root)
    assert _mask_value(ours) == _mask_value(real)


def _mask_value(text: str) -> str:
    import re

    text = re.sub(r"(?m)^(250\.0\.0: )\d+ ->", r"\1<now> ->", text)
    return re.sub(r"(?m)^   value \d+ \S+ 0x[0-9a-f]+$", "   value <now>", text)


ZSWAP_NAMES = [
    "pool_limit_hit",
    "reject_reclaim_fail",
    "reject_alloc_fail",
    "reject_kmemcache_fail",
    "reject_compress_poor",
    "written_back_pages",
    "duplicate_entry",
    "pool_pages",
    "stored_pages",
    "pool_total_size",
    "same_filled_pages",
]


def _zswap_commands() -> str:
    names = [f"zswap.{n}" for n in ZSWAP_NAMES]
    lines = ["fetch " + " ".join(names)]
    lines += [f"desc {n}" for n in names]
    lines += [f"text {n}" for n in names[:3]]
    lines += ["label domain", "label item zswap.pool_pages", "fetch 125.0.11", "children zswap", "traverse zswap"]
    return "\n".join(lines) + "\n"


def test_zswap(root: Path) -> None:
    script = require_script("zswap")
    env = bed(root)
    stats = root / "zswap"
    stats.mkdir()
    for k, n in enumerate(ZSWAP_NAMES):
        (stats / n).write_text(f"{(k + 1) * 1009 + 2**33 * (k % 2)}\n")
    env["ZSWAP_STATS_PATH"] = str(stats)
    env["ZSWAP_PAGESIZE"] = "4096"
    pmns = write_pmns(root / "zswap.pmns", 125, {f"zswap.{n}": (0, k) for k, n in enumerate(ZSWAP_NAMES)})
    real, ours = both(script, _zswap_commands(), pmns, env, root)
    assert "value 8589936610" in real  # 2**33 + 2018: the binding read the canned files
    assert ours == real


def test_zswap_without_stats(root: Path) -> None:
    """No stats directory (the module not loaded): no values, as the binding."""
    script = require_script("zswap")
    env = bed(root)
    env["ZSWAP_STATS_PATH"] = str(root / "absent")
    pmns = write_pmns(root / "zswap.pmns", 125, {f"zswap.{n}": (0, k) for k, n in enumerate(ZSWAP_NAMES)})
    real, ours = both(script, "fetch zswap.pool_pages zswap.stored_pages\n", pmns, env, root)
    assert "No values returned!" in real
    assert ours == real


def _script_names(script: Path, prefix: str) -> dict[str, tuple[int, int]]:
    """``{name: (cluster, item)}`` of the metrics a Debian script adds
    (read from the installed script at run time)."""
    import re

    text = script.read_text()
    found = re.findall(r"add_metric\(\s*name \+ '\.([\w.]+)',\s*pmdaMetric\(\s*self\.pmid\((\d+),\s*(\d+)\)", text)
    return {f"{prefix}.{n}": (int(c), int(i)) for n, c, i in found}


def test_unbound(root: Path) -> None:
    """unbound-control's output canned (UNBOUND_STATS runs cat on it)."""
    script = require_script("unbound")
    env = bed(root)
    names = _script_names(script, "unbound")
    assert len(names) > 100, names
    stats = root / "unbound.stats"
    lines = []
    for k, name in enumerate(sorted(names)):
        key = name[len("unbound.") :]
        if key.startswith("histogram."):
            key = (
                "histogram."
                + ".".join(key.split(".", 1)[1].split("_", 2)[:2])
                + ".to."
                + key.split("_to_")[1].replace("_", ".")
            )
        value = (
            f"{k}.{k:06d}" if key.startswith(("time.", "total.requestlist.avg", "total.recursion")) else str(k * 7919)
        )
        lines.append(f"{key}={value}")
    lines.append("not.a.metric=3")
    stats.write_text("\n".join(lines) + "\n")
    env["UNBOUND_STATS"] = f"cat {stats}"
    # names below a dynamic subtree, as Install writes it: dbpmda asks the agent
    # (some of unbound's names start with a digit, which a PMNS file cannot hold)
    pmns = root / "unbound.pmns"
    pmns.write_text("root {\n\tunbound\t132:*:*\n}\n")
    all_names = sorted(names)
    commands = "".join(f"fetch {' '.join(all_names[i : i + 20])}\n" for i in range(0, len(all_names), 20))
    commands += "".join(f"desc {n}\ntext {n}\n" for n in all_names[::9])
    commands += "label domain\nfetch 132.0.9999\nchildren unbound\n"
    real, ours = both(script, commands, pmns, env, root)
    assert "value 7919" in real  # the binding read the canned stats
    assert ours == real
