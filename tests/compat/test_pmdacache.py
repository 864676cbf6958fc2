"""pmdaCache persistence in PCP's own files: a PMDA switched between the
binding and ``pmda-py compat``, either way, keeps its instance ids.

The same sequence of runs of pmdasimple.python (simple.now's instances
follow simple.conf; its dict indom is a pmdaCache) goes once through the
binding only and once alternating binding and compat; every run must list
the same instances with the same ids, and the cache files must end equal
(but for the times they carry)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.compat.harness import COMPAT, PMDAS, SYSTEM_PYTHON, bed, compiled_help, dbpmda, mask, require_script

CONFS = ["hour", "min,hour", "sec,min", "sec,hour", "hour,min,sec"]


def _runs(root: Path, engines: list[list[str]]) -> tuple[list[str], str]:
    script = require_script("simple")
    env = bed(root)
    compiled_help(env, "simple", 253)
    conf = Path(env["PCP_PMDAS_DIR"]) / "simple" / "simple.conf"
    outs = []
    for k, (cmd, text) in enumerate(zip(engines, CONFS)):
        conf.write_text(text + "\n")
        out = dbpmda(cmd, script, "instance 253.1\n", PMDAS / "simple" / "root", env, root / f"run{k}")
        outs.append(mask(out))
    cache = (Path(env["PCP_VAR_DIR"]) / "config" / "pmda" / "253.1").read_text()
    head, _, entries = cache.partition("\n")
    return outs, head + "\n" + re.sub(r"(?m)^(\d+) \d+ ", r"\1 STAMP ", entries)


def test_ids_survive_switching_engines(root: Path) -> None:
    binding = [SYSTEM_PYTHON]
    real, real_cache = _runs(root / "binding", [binding] * len(CONFS))
    mixed, mixed_cache = _runs(root / "mixed", [binding, COMPAT, binding, COMPAT, binding])
    assert 'inst: 2 name: "sec"' in real[2]  # the binding numbered "sec" after "hour" and "min"
    assert mixed == real
    assert mixed_cache == real_cache
    assert real_cache.startswith("2 0 2147483647\n")


def test_compat_reads_what_compat_wrote(root: Path) -> None:
    binding = [SYSTEM_PYTHON]
    real, real_cache = _runs(root / "binding", [binding] * len(CONFS))
    ours, our_cache = _runs(root / "compat", [COMPAT] * len(CONFS))
    assert ours == real
    assert our_cache == real_cache
