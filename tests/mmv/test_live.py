"""Live: PCP's own pmdammv (the daemon binary, private PCP_TMP_DIR) and
``pmda-py run --mmv-compat`` on the same MMV files, written during the test by
PCP's libpcp_mmv (the pcp.mmv binding); the full export is compared through
the harness, and ``pminfo -fdTtl --labels mmv`` under a private pmcd."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pmda_py.pmapi import LabelType, TextType
from pmda_py.testing.client import PmdaClient, PmdaReplyError, open_pipe_pmda
from pmda_py.testing.support import pmda_py_argv, traversable_dir
from pmda_py.wire import LabelReqPdu
from tests.integration.pcpbed import PrivatePmcd, require_pcp

pytestmark = pytest.mark.pcp

REPO = Path(__file__).resolve().parents[2]
PMDAMMV = "/var/lib/pcp/pmdas/mmv/pmdammv"


@pytest.fixture
def tmp_pcp() -> Iterator[Path]:
    require_pcp()
    if not os.path.exists(PMDAMMV):
        pytest.fail("PCP's pmdammv is missing")
    with traversable_dir("pmda_py-mmvlive-") as root:  # pmdammv drops to the pcp user
        (root / "mmv").mkdir()
        (root / "mmv").chmod(0o755)
        writer = ["/usr/bin/python3", str(REPO / "scripts" / "write_mmv.py")]  # pcp.mmv lives there
        for name, args in (
            ("app", ["--metrics", "12", "--instances", "5", "--strings", "--cluster", "0"]),
            ("single", ["--metrics", "3", "--instances", "0", "--cluster", "9"]),
            ("np", ["--metrics", "2", "--instances", "3", "--flags", "1", "--cluster", "11", "--name", "npx"]),
        ):
            subprocess.run(
                [*writer, str(root / "mmv" / name), *args, "--name", name]
                if name != "np"
                else [*writer, str(root / "mmv" / name), *args],
                check=True,
                capture_output=True,
            )
        for f in (root / "mmv").iterdir():
            f.chmod(0o644)
        yield root


async def _export(pmda: PmdaClient) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(await pmda.traverse("mmv")):
        p = await pmda.pmid(name)
        d = await pmda.desc(p)
        entry: dict[str, Any] = {"pmid": p, "desc": (d.type, d.sem, d.indom, d.units.to_int())}
        for kind in (TextType.ONELINE, TextType.HELP):
            try:
                entry[f"text{int(kind)}"] = await pmda.text(p, kind | TextType.PMID)
            except PmdaReplyError as err:
                entry[f"text{int(kind)}"] = err.pm_code
        for level in (LabelType.CLUSTER, LabelType.ITEM):
            entry[f"labels{int(level)}"] = [s.json for s in (await pmda.label(p, level)).sets]
        if d.indom != 0xFFFFFFFF:
            entry["instances"] = [(e.inst, e.name) for e in await pmda.instance(d.indom)]
            for kind in (TextType.ONELINE, TextType.HELP):  # 6.x: PM_ERR_TEXT; 7.x looks it up
                try:
                    entry[f"indomtext{int(kind)}"] = await pmda.text(d.indom, kind | TextType.INDOM)
                except PmdaReplyError as err:
                    entry[f"indomtext{int(kind)}"] = err.pm_code
        entry["values"] = (await pmda.fetch_values([name]))[name]
        if isinstance(entry["values"], Exception):
            entry["values"] = repr(entry["values"])
        out[name] = entry
    return out


async def test_full_export_matches_pmdammv(tmp_pcp: Path) -> None:
    env = {"PCP_TMP_DIR": str(tmp_pcp)}
    async with open_pipe_pmda([PMDAMMV, "-d", "70", "-l", str(tmp_pcp / "pmdammv.log")], env=env) as ref:
        theirs = await _export(ref)
    cmd = pmda_py_argv("run", "--mmv-compat", "-l", str(tmp_pcp / "ours.log"))
    async with open_pipe_pmda(cmd, env=env) as pmda:
        ours = await _export(pmda)
    assert len(theirs) >= 20, theirs.keys()  # 12 + 3 + 2 file metrics and 3 control metrics
    assert set(ours) == set(theirs)
    for name in theirs:
        assert ours[name] == theirs[name], name


def _pmns() -> str:
    text = Path("/var/lib/pcp/pmns/root_pmcd").read_text()
    return text.replace("root {\n    pmcd\n}", "root {\n    pmcd\n    mmv\t70:*:*\n}", 1)


def test_pminfo_identical_under_pmcd(tmp_pcp: Path) -> None:
    env = {"PCP_TMP_DIR": str(tmp_pcp)}
    (tmp_pcp / "pmcd").mkdir()
    pmcd = PrivatePmcd(tmp_pcp / "pmcd", [f"mmv 70 pipe binary {PMDAMMV} -d 70"], _pmns(), env=env)
    pmcd.start()
    try:
        pmcd.wait("mmv.control.files", desc_only=True)
        ref = pmcd.tool("pminfo", "-fdTtl", "--labels", "mmv").stdout
        ours_line = "mmv 70 pipe binary " + " ".join(
            pmda_py_argv("run", "--mmv-compat", "-l", str(tmp_pcp / "pmcd" / "ours.log"))
        )
        pmcd.reconfigure([ours_line], "mmv.control.files", desc_only=True)
        ours = pmcd.tool("pminfo", "-fdTtl", "--labels", "mmv").stdout
    finally:
        pmcd.stop()
    assert "mmv.app.m1" in ref and 'inst [0 or "inst0"]' in ref
    assert ours == ref


def _write_case(root: Path, options: list[str]) -> None:
    require_pcp()
    (root / "mmv").mkdir(mode=0o755)
    writer = ["/usr/bin/python3", str(REPO / "scripts" / "write_mmv.py")]
    subprocess.run(
        [
            *writer,
            str(root / "mmv" / "cases"),
            "--metrics",
            "3",
            "--instances",
            "3",
            "--cluster",
            "5",
            "--name",
            "cases",
            *options,
        ],
        check=True,
        capture_output=True,
    )
    (root / "mmv" / "cases").chmod(0o644)


@pytest.mark.parametrize(
    "options",
    [
        ["--nosupport"],
        ["--dup-instances"],
    ],
    ids=["nosupport", "dup_instances"],
)
async def test_fidelity_cases_match_pmdammv(options: list[str]) -> None:
    """Files pmdammv exports in its own way: a NOSUPPORT metric (semantics
    from the file, PM_ERR_PMID for its help), an indom listing one instance
    id twice; written by libpcp_mmv, compared live with the installed pmdammv."""
    with traversable_dir("pmda_py-mmvcase-") as root:
        _write_case(root, options)
        env = {"PCP_TMP_DIR": str(root)}
        async with open_pipe_pmda([PMDAMMV, "-d", "70", "-l", str(root / "pmdammv.log")], env=env) as ref:
            theirs = await _export(ref)
        cmd = pmda_py_argv("run", "--mmv-compat", "-l", str(root / "ours.log"))
        async with open_pipe_pmda(cmd, env=env) as pmda:
            ours = await _export(pmda)
    assert any(n.startswith("mmv.cases.") for n in theirs), theirs.keys()
    assert set(ours) == set(theirs)
    for name in theirs:
        assert ours[name] == theirs[name], name


#: label payloads patched into a copy of the corpus file qa_v3_labels.mmv:
#: (payload as libpcp_mmv wrote it, replacement of at most 243 bytes)
LABEL_PATCHES = {
    "exponent": [
        (b'{"indom_label":42.001}', b'{"indom_label":1E+3}'),
        (b'{"metric_label":null}', b'{"metric_label":-0.50e-2}'),
    ],
    "object": [
        (b'{"item_label3":{"a":1}}', b'{"item_label3":{"a":1,"b":[2,{"c":3}]}}'),
        (b'{"item_label1":true}', b'{"item_label1":{"x":{"y":"z"}},"plain":7}'),
    ],
}


def _labels_detail(sets: Any) -> list[Any]:
    return [(s.inst, s.json, [(lb.name, lb.namelen, lb.flags, lb.value, lb.valuelen) for lb in s.labels]) for s in sets]


async def _label_export(pmda: PmdaClient) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(await pmda.traverse("mmv")):
        p = await pmda.pmid(name)
        d = await pmda.desc(p)
        for level in (LabelType.CLUSTER, LabelType.ITEM):
            out[f"{name} {level!r}"] = _labels_detail((await pmda.label(p, level)).sets)
        if d.indom != 0xFFFFFFFF:
            for level in (LabelType.INDOM, LabelType.INSTANCES):
                out[f"{name} {level!r}"] = _labels_detail((await pmda.label(d.indom, level)).sets)
    return out


def _write_patched(root: Path, case: str) -> None:
    require_pcp()
    data = (REPO / "tests" / "data" / "mmv" / "qa_v3_labels.mmv").read_bytes()
    for old, new in LABEL_PATCHES[case]:
        assert data.count(old) == 1 and len(new) < 244, old
        data = data.replace(old, new + b"\0" * (len(old) - len(new)) if len(new) < len(old) else new, 1)
        if len(new) > len(old):  # the payload field is 244 bytes, NUL-padded: drop the NULs we pushed along
            at = data.index(new) + len(new)
            data = data[:at] + data[at + len(new) - len(old) :]
    (root / "mmv").mkdir(mode=0o755)
    (root / "mmv" / "labels").write_bytes(data)
    (root / "mmv" / "labels").chmod(0o644)


@pytest.mark.parametrize(
    "case",
    [
        "exponent",
        "object",
    ],
)
async def test_label_texts_match_pmdammv(case: str) -> None:
    """Label values written as any valid JSON text (exponent forms, objects):
    pmdammv's LABEL replies, JSON text and label index, byte for byte."""
    with traversable_dir("pmda_py-mmvlabel-") as root:
        _write_patched(root, case)
        env = {"PCP_TMP_DIR": str(root)}
        async with open_pipe_pmda([PMDAMMV, "-d", "70", "-l", str(root / "pmdammv.log")], env=env) as ref:
            theirs = await _label_export(ref)
        cmd = pmda_py_argv("run", "--mmv-compat", "-l", str(root / "ours.log"))
        async with open_pipe_pmda(cmd, env=env) as pmda:
            ours = await _label_export(pmda)
    texts = b"".join(s[1] for sets in theirs.values() for s in sets)
    assert b"1E+3" in texts or b"plain" in texts, theirs  # the patched payloads were read
    assert ours.keys() == theirs.keys()
    for k in theirs:
        assert ours[k] == theirs[k], k


def test_generated_label_payloads_match_pmdammv() -> None:
    """Generated label texts (tests/mmv/labelgen.py: nested maps and lists,
    members after them, escapes, odd numbers and names, whitespace, cut and
    invalid texts) as item, cluster, indom and instance labels, alone and
    merged: every LABEL reply frame is pmdammv's, byte for byte, except where
    pmdammv's own reply depends on memory it does not own (a list value
    holding a list, a payload filling its field), which our transcription
    flags, and where PCP's decoders refuse pmdammv's reply (an index entry
    outside the JSON text: we answer PM_ERR_TOOBIG).  Longer runs:
    ``python -m tests.mmv.labelgen --seed N --count 3000``."""
    from pmda_py.pcpversion import pcp_version
    from tests.mmv.labelgen import FIXED, classify, compare, payloads

    require_pcp()
    if not os.path.exists(PMDAMMV):
        pytest.fail("PCP's pmdammv is missing")
    layout, theirs, ours = compare(FIXED + payloads(11, 360))
    same, refused, unsafe, differ = classify(layout, theirs, ours, pcp_version() >= (7, 2, 0))
    assert len(theirs) > 1000
    assert not differ, [(k, theirs[k], ours.get(k)) for k in differ[:3]]
    assert len(same) > 1000 and len(refused) + len(unsafe) < len(theirs) // 10, (len(same), len(refused), len(unsafe))
    assert refused, "FIXED's list with wide inner whitespace: pmdammv's set has its value offset below 0"


def _write_records(
    root: Path, recs: list[tuple[int, int, int, bytes]], n_items: int = 1, split: int | None = None
) -> None:
    """A private PCP_TMP_DIR whose mmv/u holds the label records (labelgen's writer)."""
    from tests.mmv.labelgen import write_file

    require_pcp()
    (root / "mmv").mkdir(mode=0o755)
    write_file(root / "mmv" / "u", 9, n_items, 2, recs, split)
    (root / "mmv" / "u").chmod(0o644)


async def test_label_cases_where_pmdammv_is_unsafe() -> None:
    """Instance labels where libpcp accepts more payloads than it finds labels:
    pmdammv sends index entries read past its label array (heap bytes), or
    dies on a NULL one; the drop-in sends the labels it has and logs why."""
    recs = [(0x20, 1, 0, b'{"a":1}'), (0x20, 1, 0, b'{"a":2}'), (0x20, 1, 1, b"{}")]
    with traversable_dir("pmda_py-mmvunsafe-") as root:
        _write_records(root, recs)
        env = {"PCP_TMP_DIR": str(root)}
        async with open_pipe_pmda([PMDAMMV, "-d", "70", "-l", str(root / "pmdammv.log")], env=env) as ref:
            indom = (await ref.desc(await ref.pmid("mmv.u.m1"))).indom
            with pytest.raises(EOFError):  # instance 1's "{}": a NULL label array
                await ref.request_raw(LabelReqPdu(indom, LabelType.INSTANCES, 0).encode())
        cmd = pmda_py_argv("run", "--mmv-compat", "-l", str(root / "ours.log"))
        async with open_pipe_pmda(cmd, env=env) as pmda:
            sets = (await pmda.label(indom, LabelType.INSTANCES)).sets
        log = (root / "ours.log").read_text()
    assert [(s.inst, s.json, len(s.labels)) for s in sets] == [(0, b'{"a":2}', 1), (1, b"{}", 0)]
    assert log.count("pmdammv is unsafe here") >= 2, log


async def test_last_label_section_wins() -> None:
    """Two LABELS sections: pmdammv keeps only the last (mmv.c overwrites
    its label pointer per section); two payloads on one item are merged into
    one set whose text libpcp rewrites."""
    recs = [(0x10, 1, -1, b'{"a":1}'), (0x10, 2, -1, b'{"b": 2}'), (0x10, 2, -1, b'{"c":{"d":3}}')]
    with traversable_dir("pmda_py-mmvunsafe-") as root:
        _write_records(root, recs, n_items=2, split=1)
        env = {"PCP_TMP_DIR": str(root)}
        out = []
        for cmd in (
            [PMDAMMV, "-d", "70", "-l", str(root / "pmdammv.log")],
            pmda_py_argv("run", "--mmv-compat", "-l", str(root / "ours.log")),
        ):
            async with open_pipe_pmda(cmd, env=env) as pmda:
                out.append(
                    [
                        _labels_detail((await pmda.label(await pmda.pmid(f"mmv.u.m{i}"), LabelType.ITEM)).sets)
                        for i in (1, 2)
                    ]
                )
    theirs, ours = out
    assert theirs[0] == [] and theirs[1][0][1] == b'{"b":2,"c.d":3}', theirs
    assert ours == theirs
