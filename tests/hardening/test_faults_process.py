"""Faults around the daemon process: a full disk for the log, the pipe
closed in the middle of a PDU, label and help text that try to inject."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

from pmda_py.pmapi import LabelType, PmType, pmid
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, Table
from pmda_py.testing.fixtures import PmdaFactory
from pmda_py.testing.support import pmda_py_argv
from pmda_py.wire import DescReqPdu
from tests.conftest import require

PMDA_PY = ("run", "-d", "253", "--table", "control=ctl")


HAVE_DEV_FULL = os.path.exists("/dev/full")


async def test_log_on_a_full_disk_does_not_stop_the_daemon(pmda_command: PmdaFactory) -> None:
    require(HAVE_DEV_FULL, "needs /dev/full")
    # every write to /dev/full fails with ENOSPC: logging must not take the PMDA down
    async with pmda_command(["pmda-py", *PMDA_PY, "-l", "/dev/full", "--log-level", "debug"]) as pmda:
        for _ in range(20):
            v = await pmda.fetch_values(["ctl.pid", "ctl.fetch.count"])
            assert v["ctl.pid"] == pmda.pid
        assert v["ctl.fetch.count"] == 19  # counted once answered


def test_pipe_closed_mid_pdu_exits_cleanly(tmp_path: Path) -> None:
    log = tmp_path / "pmda.log"
    proc = subprocess.Popen(pmda_py_argv(*PMDA_PY, "-l", str(log)), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.read(20)
    proc.stdin.write(struct.pack("!iiiiI", 20, 0x700C, 1, 1, 0x01020000))
    proc.stdin.write(DescReqPdu(pmid(253, 4092, 2)).encode()[:9])  # half a PDU, then EOF
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    assert proc.stdout.read() == b""
    text = log.read_text()
    assert "eof_mid_pdu" in text
    assert "reason=eof" in text


class Hostile(Table):
    """Labels and help text crafted to break JSON or the TEXT PDU."""

    name = "hostile"

    def __init__(self) -> None:
        evil = '"},"injected":true,"x":{"'
        self.ind = InDom(
            0, {0: 'quote"name', 1: "new\nline"}, labels={"note": evil}, instance_labels=lambda i, n: {"name": n}
        )
        self.m = Metric(
            "m",
            cluster=0,
            item=0,
            type=PmType.STRING,
            indom=self.ind,
            labels={"evil": evil, "uni": "\u00e9\u2603\x00"},
            oneline="one\x00line",
            help="long\ntext with \x00 NUL and ~~~ padding chars",
        )

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {self.m: {0: '"},{', 1: "\x00\x01"}}


async def test_labels_and_help_cannot_inject(table_pmda: PmdaFactory) -> None:
    t = Hostile()
    async with table_pmda(t, mount="h", domain=250) as pmda:
        lab = await pmda.label(pmid(250, 0, 0), LabelType.ITEM)
        doc = json.loads(lab.sets[0].json)  # valid JSON
        assert doc == {"evil": '"},"injected":true,"x":{"', "uni": "\u00e9\u2603\x00"}
        assert "injected" not in doc
        # the index points at the right bytes
        assert {k: json.loads(v) for k, v in lab.sets[0].as_dict().items()} == doc
        inst = await pmda.label(t.ind.id, LabelType.INSTANCES)
        assert [json.loads(s.json) for s in inst.sets] == [{"name": 'quote"name'}, {"name": "new\nline"}]
        assert await pmda.oneline(pmid(250, 0, 0)) == "one\x00line"
        assert (await pmda.helptext(pmid(250, 0, 0))).endswith("~~~ padding chars")
        v = await pmda.fetch_values(["h.m"])
        assert v["h.m"] == {0: '"},{', 1: "\x00\x01"}


def test_bad_label_names_are_refused_at_declaration() -> None:
    with pytest.raises(ValueError, match="bad label name"):
        Metric("x", cluster=0, item=0, type=PmType.U32, labels={"bad name": 1})
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        Metric("x", cluster=0, item=0, type=PmType.U32, labels={"ok": object()})
