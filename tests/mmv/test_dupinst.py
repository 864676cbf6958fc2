"""An MMV indom that lists an instance id twice (libpcp_mmv writes what it
is given): fetched, listed and labelled exactly as the installed pmdammv
does, compared live on the wire (the values of a fetch in reply order, not
a dict that would fold the repeated instance)."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest

from pmda_py.pmapi import LabelType
from pmda_py.testing.client import PmdaClient, PmdaReplyError, open_pipe_pmda
from pmda_py.testing.support import pmda_py_argv, traversable_dir
from tests.integration.pcpbed import require_pcp

pytestmark = pytest.mark.pcp

PMDAMMV = "/var/lib/pcp/pmdas/mmv/pmdammv"

#: the indom's instance records, in file order: (id, name); id 0 twice
INSTANCES = [(0, b"i0"), (1, b"i1"), (0, b"again0"), (2, b"i2"), (1, b"again1")]
#: label records (flags, identity, internal, payload): indom, instance and item labels
LABELS = [
    (0x04, 1, -1, b'{"indom":"dups"}'),
    (0x20, 1, 0, b'{"first":0}'),
    (0x20, 1, 1, b'{"second":1}'),
    (0x20, 1, 2, b'{"third":2}'),
    (0x10, 1, -1, b'{"item":1}'),
]


def write_dup(path: Path, cluster: int = 7) -> None:
    """A v3 file: metric m1 (U64) over indom 1 (:data:`INSTANCES`), one
    value record per instance record (value 100 + record index), metric m2
    (U32, singular), and :data:`LABELS`."""
    strings = [b"m1", b"m2"] + [name for _, name in INSTANCES]
    tocs = 6
    off_indoms = 40 + 16 * tocs
    off_insts = off_indoms + 32
    off_metrics = off_insts + 24 * len(INSTANCES)
    off_values = off_metrics + 48 * 2
    n_values = len(INSTANCES) + 1
    off_strings = off_values + 32 * n_values
    off_labels = off_strings + 256 * len(strings)
    buf = bytearray(off_labels + 256 * len(LABELS))
    gen = 0x6E000000 + cluster
    struct.pack_into("=4siQQiIii", buf, 0, b"MMV\0", 3, gen, gen, tocs, 0, 0, cluster)
    toc = [
        (1, 1, off_indoms),
        (2, len(INSTANCES), off_insts),
        (3, 2, off_metrics),
        (4, n_values, off_values),
        (5, len(strings), off_strings),
        (6, len(LABELS), off_labels),
    ]
    for t, (ttype, count, off) in enumerate(toc):
        struct.pack_into("=IIQ", buf, 40 + 16 * t, ttype, count, off)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, len(INSTANCES), off_insts, 0, 0)
    for k, (inst, _name) in enumerate(INSTANCES):
        struct.pack_into("=QIiQ", buf, off_insts + 24 * k, off_indoms, 0, inst, off_strings + 256 * (2 + k))
    struct.pack_into("=QIiIIiIQQ", buf, off_metrics, off_strings, 1, 3, 1, 0, 1, 0, 0, 0)  # U64 counter
    struct.pack_into("=QIiIIiIQQ", buf, off_metrics + 48, off_strings + 256, 2, 1, 3, 0, -1, 0, 0, 0)
    for k in range(len(INSTANCES)):
        struct.pack_into("=QqQQ", buf, off_values + 32 * k, 100 + k, 0, off_metrics, off_insts + 24 * k)
    struct.pack_into("=QqQQ", buf, off_values + 32 * len(INSTANCES), 7, 0, off_metrics + 48, 0)
    for k, s in enumerate(strings):
        buf[off_strings + 256 * k : off_strings + 256 * k + len(s)] = s
    for k, (flags, ident, internal, payload) in enumerate(LABELS):
        struct.pack_into("=IIi244s", buf, off_labels + 256 * k, flags, ident, internal, payload)
    path.write_bytes(bytes(buf))


def _sets(reply: Any) -> list[Any]:
    return [
        (s.inst, s.json, [(lb.name, lb.namelen, lb.flags, lb.value, lb.valuelen) for lb in s.labels])
        for s in reply.sets
    ]


async def snapshot(pmda: PmdaClient) -> dict[str, Any]:
    """What a client sees of the file: raw fetch replies, instances, labels."""
    out: dict[str, Any] = {}
    names = sorted(n for n in await pmda.traverse("mmv") if not n.startswith("mmv.control."))
    pmids = [await pmda.pmid(n) for n in names]
    reply = await pmda.fetch(pmids)
    out["fetch"] = [
        (names[pmids.index(v.pmid)], [(pv.inst, pv.value) for pv in v.values], v.error) for v in reply.vsets
    ]
    for name, p in zip(names, pmids):
        d = await pmda.desc(p)
        single = await pmda.fetch([p])
        out[f"fetch {name}"] = [[(pv.inst, pv.value) for pv in v.values] for v in single.vsets]
        out[f"labels item {name}"] = _sets(await pmda.label(p, LabelType.ITEM))
        if d.indom != 0xFFFFFFFF:
            out[f"instances {name}"] = [(e.inst, e.name) for e in await pmda.instance(d.indom)]
            for inst in (0, 1, 2):
                try:
                    out[f"instance {inst} {name}"] = [(e.inst, e.name) for e in await pmda.instance(d.indom, inst=inst)]
                except PmdaReplyError as err:
                    out[f"instance {inst} {name}"] = err.pm_code
            for level in (LabelType.INDOM, LabelType.INSTANCES):
                out[f"labels {level!r} {name}"] = _sets(await pmda.label(d.indom, level))
    return out


def _private_dir(root: Path) -> None:
    require_pcp()
    if not os.path.exists(PMDAMMV):
        pytest.fail("PCP's pmdammv is missing")
    (root / "mmv").mkdir(mode=0o755)
    write_dup(root / "mmv" / "dup")
    (root / "mmv" / "dup").chmod(0o644)


async def test_duplicate_instance_ids_match_pmdammv() -> None:
    """Issue 22 item 6: pmdammv fetches along the indom's listing (the
    repeated id's first value once per entry) and sends one instance label
    set per entry; a lookup by id finds the first entry."""
    with traversable_dir("pmda_py-mmvdup-") as root:  # pmdammv drops to the pcp user
        _private_dir(root)
        env = {"PCP_TMP_DIR": str(root)}
        async with open_pipe_pmda([PMDAMMV, "-d", "70", "-l", str(root / "pmdammv.log")], env=env) as ref:
            theirs = await snapshot(ref)
        cmd = pmda_py_argv("run", "--mmv-compat", "-l", str(root / "ours.log"))
        async with open_pipe_pmda(cmd, env=env) as pmda:
            ours = await snapshot(pmda)
    m1 = {n: v for n, v, _e in theirs["fetch"]}["mmv.dup.m1"]
    assert [i for i, _ in m1].count(0) == 2, theirs["fetch"]  # pmdammv: the repeated id's value twice
    assert ours.keys() == theirs.keys()
    for k in theirs:
        assert ours[k] == theirs[k], k
