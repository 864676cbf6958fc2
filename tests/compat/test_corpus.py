"""The corpus: PCP's own Python PMDAs as Debian installs them, run under
real dbpmda with the binding (``python3 SCRIPT``) and with ``pmda-py compat
SCRIPT``; the transcripts must be identical after masking times and pids.
Inputs (config files, stats directories) are written by the tests."""

from __future__ import annotations

from pathlib import Path

from tests.compat.harness import (
    COMPAT,
    PMDAS,
    SYSTEM_PYTHON,
    bed,
    both,
    compiled_help,
    dbpmda,
    mask,
    require_script,
    write_pmns,
)

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


_VOLUMES = {"vol1": (2, 1, 3, True), "vol two": (1, 0, 1, False)}
_BRICKS = {"vol1": ["host1:/bricks/a", "host2:/bricks/b"], "vol two": ["host3:/bricks/c"]}


def _gluster_inputs(root: Path) -> dict[str, str]:
    """``gluster --xml`` outputs canned, and the start/stop commands logged."""
    vols = []
    for name, (dist, stripe, replica, diag) in _VOLUMES.items():
        opts = ""
        if diag:
            opts = (
                "<option><name>diagnostics.count-fop-hits</name><value>on</value></option>"
                "<option><name>diagnostics.latency-measurement</name><value>on</value></option>"
            )
        vols.append(
            f"<volume><name>{name}</name><distCount>{dist}</distCount><stripeCount>{stripe}</stripeCount>"
            f"<replicaCount>{replica}</replicaCount><options>{opts}</options></volume>"
        )
    (root / "info.xml").write_text(f"<cliOutput><volInfo><volumes>{''.join(vols)}</volumes></volInfo></cliOutput>")
    for k, (vol, bricks) in enumerate(_BRICKS.items()):
        out = []
        for j, brick in enumerate(bricks):
            fops = "".join(
                f"<fop><name>{op}</name><hits>{(k + 1) * 100 + j * 10 + n}</hits><avgLatency>{n + 0.5}</avgLatency>"
                f"<minLatency>{n}.0</minLatency><maxLatency>{n * 3}.75</maxLatency></fop>"
                for n, op in enumerate(["LOOKUP", "READ", "WRITE", "NOSUCHOP"])
            )
            out.append(
                f"<brick><brickName>{brick}</brickName><cumulativeStats><fopStats>{fops}</fopStats>"
                f"<totalRead>{2**40 + j}</totalRead><totalWrite>{k * 1000 + j}</totalWrite></cumulativeStats></brick>"
            )
        (root / f"profile-{vol}.xml").write_text(f"<cliOutput><volProfile>{''.join(out)}</volProfile></cliOutput>")
    log = root / "commands.log"
    return {
        "GLUSTER_VOL_INFO": f"cat {root}/info.xml",
        "GLUSTER_VOL_STATS": f"cat '{root}/profile-%s.xml'",
        "GLUSTER_VOL_START": f"echo 'start %s' >>{log}",
        "GLUSTER_VOL_STOP": f"echo 'stop %s' >>{log}",
    }


GLUSTER = """fetch gluster.volume.profile gluster.volume.dist.count gluster.volume.stripe.count
fetch gluster.volume.replica.count
fetch gluster.brick.read_bytes gluster.brick.write_bytes
fetch gluster.brick.latency.lookup.min gluster.brick.latency.lookup.max gluster.brick.latency.lookup.avg
fetch gluster.brick.latency.read.count gluster.brick.latency.write.avg gluster.brick.latency.open.count
instance 118.0
instance 118.1
instance 118.0 "vol two"
desc gluster.brick.latency.read.avg
desc gluster.volume.profile
text gluster.volume.profile
label indom 118.1
store gluster.volume.profile "1"
store gluster.volume.profile "0"
store gluster.volume.profile "-1"
store gluster.brick.read_bytes "1"
children gluster.brick.latency.read
"""


def test_gluster(root: Path) -> None:
    """Volumes and bricks from canned ``gluster --xml`` outputs (dict
    indoms of ctypes structures read back with inst_lookup and cast), and
    stores that run the profile start/stop commands."""
    script = require_script("gluster")
    outs = []
    for who in ("real", "ours"):
        d = root / who
        d.mkdir()
        d.chmod(0o777)
        env = bed(d)
        env.update(_gluster_inputs(d))
        pmns = d / "gluster.pmns"
        pmns.write_text("root {\n\tgluster\t118:*:*\n}\n")
        cmd = [SYSTEM_PYTHON] if who == "real" else COMPAT
        out = mask(dbpmda(cmd, script, GLUSTER, pmns, env, d / "run"))
        outs.append((out, (d / "commands.log").read_text()))
    (real, real_log), (ours, our_log) = outs
    assert "value 1099511627776" in real and 'name: "host3:/bricks/c"' in real  # the binding read the XML
    assert real_log == "start vol1\nstart vol two\nstop vol1\nstop vol two\n"
    assert ours == real
    assert our_log == real_log
