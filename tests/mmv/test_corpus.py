"""Our MMV export against what PCP 6.0.3's pmdammv exported for every good
and foreign corpus file (``tests/data/mmv/*.pmda.json``): names,
PMIDs, descriptors (raw units), instances, help both ways (as the PMDA
answers: the ``*_direct`` fields), labels at every level, and values.

Where we deliberately follow 7.x or are safer, the reference is the 7.x
recording (``upstream7/``) or the pmcd capture (``pmcd/``), as noted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from pmda_py.errors import PmErr
from pmda_py.mmv.table import MmvTable
from pmda_py.pmapi import LabelType
from pmda_py.testing.client import PmdaReplyError
from pmda_py.testing.harness import open_table_pmda
from tests.mmv.corpus import MMV, NO_SUCH_PID, compare, corpus_files, install

GOOD = [p for p in corpus_files() if p.with_suffix(".pmda.json").exists()]

#: file -> (reference JSON, why)
REFERENCE = {
    # the writer is dead now: pmdammv skips PROCESS files whose pid is gone
    "py_v1_process": ("py_v1_process.deadpid.pmda.json", "writer pid gone: file skipped"),
    "reg_v3_process_labels": ("reg_v3_process_labels.deadpid.pmda.json", "writer pid gone: file skipped"),
}
#: 7.x fixed these 6.0.3 bugs and we follow 7.x: compare with the 7.x recording
FOLLOW_7X = {
    "reg_v1_emptyindom": "help text of a metric without a value entry (6.0.3: PM_ERR_PMID)",
    "reg_v1_sentinel": "NaN with SENTINEL drops the value (6.0.3 exports NaN)",
}
#: leaf/non-leaf clashes abort pmdammv's local traversal: the names pmcd listed are the reference
PMCD_NAMES = {"reg_v1_oddnames", "foreign_large_parfait"}
#: label sets PCP's decoders refuse (255 labels): pmdammv sends them (PM_ERR_IPC, and pmcd 6.3+
#: drops it); we answer PM_ERR_TOOBIG (test_label_set_too_big below), so compare no labels there
TOO_BIG = {"reg_v3_labels255"}
#: a running ELAPSED timer changes with time
RUNNING = {"py_v1_alltypes": frozenset({"mmv.rs_py_v1_alltypes.elapsed.indom"})}


def _drop_big_label_sets(expected: dict[str, Any]) -> None:
    for m in expected["metrics"]:
        for level, items in m.get("labels", {}).items():
            if len(items) >= 255:
                m["labels"][level] = []  # compare() reads an error reply as no labels


def _pmcd_names(stem: str) -> set[str]:
    text = (MMV / "pmcd" / f"{stem}.pminfo.txt").read_text()
    # "name PMID: ..." lines, and "name: pmFetch: error" lines for names pmcd listed but could not fetch
    return {ln.split()[0].rstrip(":") for ln in text.splitlines() if ln.startswith("mmv.")} - {
        "mmv.control.reload",
        "mmv.control.debug",
        "mmv.control.files",
    }


@pytest.mark.parametrize("mmv", GOOD, ids=lambda p: p.stem)
async def test_export_matches_pmdammv(mmv: Path, tmp_path: Path) -> None:
    stem = mmv.stem
    ref = mmv.with_suffix(".pmda.json")
    if stem in REFERENCE:
        ref = mmv.parent / REFERENCE[stem][0]
    expected = json.loads(ref.read_text())
    if stem in FOLLOW_7X:
        # the file's metrics as 7.x exports them; the control metrics stay 6.0.3's
        # (we keep 6.0.3's integer mmv.control.debug for 6.0.3 dashboards)
        seven = json.loads((MMV / "upstream7" / f"{stem}.pmda7.json").read_text())
        expected["metrics"] = [m for m in expected["metrics"] if m["name"].startswith("mmv.control")] + [
            m for m in seven["metrics"] if not m["name"].startswith("mmv.control")
        ]
    if stem in TOO_BIG:
        _drop_big_label_sets(expected)
    names = None
    if stem in PMCD_NAMES:
        names = _pmcd_names(stem) | {m["name"] for m in expected["metrics"] if m["name"].startswith("mmv.control")}
    problems = await compare(mmv, tmp_path / "mmv", expected, skip_values=RUNNING.get(stem, frozenset()), names=names)
    assert problems == []


def test_corpus_is_there() -> None:
    assert len(GOOD) >= 25, f"MMV corpus missing under {MMV}"


SEVEN = [
    p
    for p in GOOD
    if (MMV / "upstream7" / f"{p.stem}.pmda7.json").exists()
    or (MMV / "foreign" / "upstream7" / f"{p.stem}.pmda7.json").exists()
]


@pytest.mark.parametrize("mmv", SEVEN, ids=lambda p: p.stem)
async def test_export_matches_pmdammv7(mmv: Path, tmp_path: Path) -> None:
    """Imitating a 7.x pmdammv (``pcp_version``, as pcp.conf of a PCP 7 host
    sets it): the whole export, control metrics and indom help included, is
    the 7.x recording's."""
    stem = mmv.stem
    ref = mmv.parent / "upstream7" / f"{stem}.pmda7.json"
    if stem in REFERENCE:
        ref = mmv.parent / "upstream7" / REFERENCE[stem][0].replace(".pmda.json", ".pmda7.json")
    expected = json.loads(ref.read_text())
    if stem in TOO_BIG:
        _drop_big_label_sets(expected)
    names = None
    if stem in PMCD_NAMES:
        names = _pmcd_names(stem) | {m["name"] for m in expected["metrics"] if m["name"].startswith("mmv.control")}
    problems = await compare(
        mmv, tmp_path / "mmv", expected, skip_values=RUNNING.get(stem, frozenset()), names=names, pcp_version="7.2.2"
    )
    assert problems == []


async def test_label_set_too_big(tmp_path: Path) -> None:
    """255 cluster labels: PM_ERR_TOOBIG, not a set libpcp would refuse."""
    stem = "reg_v3_labels255"
    expected = json.loads((MMV / f"{stem}.pmda.json").read_text())
    assert max(len(m["labels"].get("cluster", [])) for m in expected["metrics"]) == 255  # what pmdammv sends
    install(MMV / f"{stem}.mmv", tmp_path / "mmv")
    with structlog.testing.capture_logs() as logs:
        async with open_table_pmda(MmvTable(dir=str(tmp_path / "mmv"), compat="1"), mount="mmv", domain=70) as pmda:
            p = await pmda.pmid(f"mmv.rs_{stem}.m")
            for _ in range(3):  # a client may ask at every fetch
                with pytest.raises(PmdaReplyError) as err:
                    await pmda.label(p, LabelType.CLUSTER)
                assert err.value.pm_code == PmErr.TOOBIG
    assert [e["event"] for e in logs].count("label_set_too_big") == 1  # once (an hour), not once a request


def test_installed_writer_files_name_a_writer_that_cannot_be_alive(tmp_path: Path) -> None:
    """The corpus's writer-process files recorded pids (13283, 13339) that
    any process may hold on a host whose pids wrap: their golden exports
    are a dead writer's, so the installed copies name a pid no Linux gives
    (tests/mmv/corpus.py), and only that field differs."""
    process = [p for p in GOOD if p.stem in REFERENCE]
    assert len(process) == 2
    for mmv in process:
        install(mmv, tmp_path)
        original, copy = mmv.read_bytes(), (tmp_path / f"rs_{mmv.stem}").read_bytes()
        pid = int.from_bytes(copy[32:36], sys.byteorder)
        assert pid == NO_SUCH_PID and not Path(f"/proc/{pid}").exists()
        assert copy[:32] == original[:32] and copy[36:] == original[36:]
