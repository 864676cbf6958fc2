"""Compare our MMV export with pmdammv's recorded one (``NAME.pmda.json``)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from pmda_py.errors import PmdaError, errstr
from pmda_py.mmv.table import MmvTable
from pmda_py.pmapi import LabelType, TextType
from pmda_py.testing.client import PmdaClient, PmdaReplyError
from pmda_py.testing.harness import open_table_pmda
from tests.conftest import MMV_DATA

MMV = MMV_DATA
#: the pmdammv the golden exports were recorded from (tests/data/README.md): the
#: table imitates it whatever PCP is installed (tests/mmv/test_live.py checks the installed one)
RECORDED_WITH = "6.0.3"

NOPREFIX_NAMES = {"py_v1_noprefix": "rsnp", "foreign_large_parfait": "spacex", "qa_v1_instances_dogs": "animals"}


def corpus_files() -> list[Path]:
    return sorted(p for p in MMV.glob("*.mmv")) + sorted((MMV / "foreign").glob("*.mmv"))


#: MMV_FLAG_PROCESS, and where a header keeps the writer's pid (every version)
_PROCESS_FLAG, _FLAGS_AT, _PID_AT = 0x2, 28, 32
#: a pid no Linux gives (PID_MAX_LIMIT is 2**22)
NO_SUCH_PID = 1 << 30


def install(mmv: Path, d: Path) -> None:
    """``mmv`` into the directory ``d``, as the table finds it.  A file of
    a writer process (MMV_FLAG_PROCESS) recorded that writer's pid, long
    gone, and the golden exports are pmdammv's for a dead writer; on a host
    whose pids wrap (pid_max is often 32768) another process may have that
    pid now, so the copy names a pid that cannot exist."""
    d.mkdir(parents=True, exist_ok=True)
    data = bytearray(mmv.read_bytes())
    if len(data) >= _PID_AT + 4 and int.from_bytes(data[_FLAGS_AT : _FLAGS_AT + 4], sys.byteorder) & _PROCESS_FLAG:
        data[_PID_AT : _PID_AT + 4] = NO_SUCH_PID.to_bytes(4, sys.byteorder)
    (d / f"rs_{mmv.stem}").write_bytes(bytes(data))


async def _text(pmda: PmdaClient, ident: int, kind: int) -> Any:
    try:
        return await pmda.text(ident, kind)
    except PmdaReplyError as err:
        return {"error": f"{errstr(err.pm_code)} ({err.pm_code})"}


def _lab(items: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return sorted((x["name"], x["value"], x["flags"]) for x in items)


async def _labels(pmda: PmdaClient, ident: int, level: int) -> list[tuple[str, str, int]]:
    try:
        reply = await pmda.label(ident, level)
    except PmdaReplyError:
        return []
    out = []
    for s in reply.sets:
        for lb in s.labels:
            out.append(
                (
                    s.json[lb.name : lb.name + lb.namelen].decode(),
                    s.json[lb.value : lb.value + lb.valuelen].decode(),
                    lb.flags,
                )
            )
    return sorted(out)


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and len(a) == 1 and next(iter(a)) in ("double", "float"):
        a = next(iter(a.values()))  # floats are recorded as {"double": repr}
    if isinstance(a, str) and isinstance(b, float):  # floats recorded as repr strings
        try:
            return math.isclose(float(a), b, rel_tol=1e-6) or (math.isnan(float(a)) and math.isnan(b))
        except ValueError:
            return False
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


async def compare(
    mmv: Path,
    tmp: Path,
    expected: dict[str, Any],
    *,
    skip_values: frozenset[str] = frozenset(),
    fields: tuple[str, ...] = ("pmid", "desc", "text", "labels", "values", "indoms"),
    names: set[str] | None = None,
    pcp_version: str = RECORDED_WITH,
) -> list[str]:
    install(mmv, tmp)
    table = MmvTable(dir=str(tmp), compat="1", pcp_version=pcp_version)  # the golden data is 6.0.3's
    problems: list[str] = []
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        ours = set(await pmda.traverse("mmv"))
        want = names if names is not None else {m["name"] for m in expected["metrics"]}
        if ours != want:
            problems.append(f"names: missing {sorted(want - ours)[:5]} extra {sorted(ours - want)[:5]}")
        for m in expected["metrics"]:
            name = m["name"]
            if name not in ours:
                continue
            p = await pmda.pmid(name)
            if "pmid" in fields and p != m["pmid_int"]:
                problems.append(f"{name}: pmid {p} != {m['pmid']}")
            d = await pmda.desc(p)
            ed = m["desc"]
            if "desc" in fields and (d.type, d.sem, d.indom, d.units.to_int()) != (
                ed["type"],
                ed["sem"],
                ed["indom_int"],
                ed["units"]["raw"],
            ):
                problems.append(
                    f"{name}: desc {(d.type, d.sem, hex(d.indom), hex(d.units.to_int()))} != "
                    f"{(ed['type'], ed['sem'], hex(ed['indom_int']), hex(ed['units']['raw']))}"
                )
            if "text" in fields:
                for key, kind in (
                    ("oneline_direct", TextType.ONELINE | TextType.PMID),
                    ("help_direct", TextType.HELP | TextType.PMID),
                ):
                    got = await _text(pmda, p, kind)
                    if got != m[key]:
                        problems.append(f"{name}: {key} {got!r} != {m[key]!r}")
            if "labels" in fields:
                for level, key in (
                    (LabelType.CLUSTER, "cluster"),
                    (LabelType.ITEM, "item"),
                    (LabelType.INDOM, "indom"),
                ):
                    if key not in m["labels"]:
                        continue
                    ident = d.indom if key == "indom" else p
                    got = await _labels(pmda, ident, level)
                    if got != _lab(m["labels"][key]):
                        problems.append(f"{name}: {key} labels {got} != {_lab(m['labels'][key])}")
            if "values" in fields and name not in skip_values and isinstance(m.get("values"), list):
                v = (await pmda.fetch_values([name]))[name]
                want_vals = {(-1 if x["inst"] is None else x["inst"]): x["value"] for x in m["values"]}
                if isinstance(v, PmdaError):
                    problems.append(f"{name}: fetch error {v} != {want_vals}")
                    continue
                got_vals = v if isinstance(v, dict) else ({} if v is None else {-1: v})
                if set(got_vals) != set(want_vals) or not all(
                    _same_value(want_vals[k], got_vals[k]) for k in want_vals
                ):
                    problems.append(f"{name}: values {got_vals} != {want_vals}")
            elif "values" in fields and isinstance(m.get("values"), dict) and name not in skip_values:
                v = (await pmda.fetch_values([name]))[name]
                err = m["values"].get("error", "")
                if not (isinstance(v, PmdaError) and errstr(v.pm_code) in err) and not (
                    v in (None, {}) and "No value" in err
                ):
                    problems.append(f"{name}: fetch {v!r} != {m['values']}")
        if "indoms" in fields:
            for key, ei in expected.get("indoms", {}).items():
                ind = ei["indom_int"]
                try:
                    insts = await pmda.instance(ind)
                except PmdaReplyError as err:
                    problems.append(f"indom {key}: {err}")
                    continue
                got = [[e.inst, e.name] for e in insts]
                if got != ei["instances"]:
                    problems.append(f"indom {key}: instances {got} != {ei['instances']}")
                if _lab(ei["labels"]) != await _labels(pmda, ind, LabelType.INDOM):
                    problems.append(f"indom {key}: labels differ")
                inst_sets = (await pmda.label(ind, LabelType.INSTANCES)).sets
                got_il = {
                    str(s.inst): sorted(
                        (
                            s.json[lb.name : lb.name + lb.namelen].decode(),
                            s.json[lb.value : lb.value + lb.valuelen].decode(),
                            lb.flags,
                        )
                        for lb in s.labels
                    )
                    for s in inst_sets
                }
                want_il = {k: _lab(v) for k, v in ei["instance_labels"].items()}
                if got_il != want_il:
                    problems.append(f"indom {key}: instance labels {got_il} != {want_il}")
    return problems
