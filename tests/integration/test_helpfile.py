"""``-h``: help text from a help file built by PCP's newhelp, for metrics and
indoms the tables give no text for."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmda_py.helpfile import HelpFile
from pmda_py.pmapi import PmType, TextType, indom, pmid
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, Table
from pmda_py.testing.fixtures import PmdaFactory

pytestmark = pytest.mark.pcp


def test_reads_newhelp_output(pmdas_dir: Path) -> None:
    hf = HelpFile.open(str(pmdas_dir / "simple" / "help"))
    assert hf.text(pmid(253, 0, 0), TextType.ONELINE | TextType.PMID) == "Number of pmFetch operations."
    help_text = hf.text(pmid(253, 0, 0), TextType.HELP | TextType.PMID)
    assert help_text is not None and help_text.startswith("The cumulative number")
    assert hf.text(indom(253, 0), TextType.ONELINE | TextType.INDOM) == 'Instance domain "colour" for simple PMDA'
    assert hf.text(pmid(253, 9, 9), TextType.ONELINE | TextType.PMID) is None


def test_rejects_garbage(tmp_path: Path) -> None:
    (tmp_path / "h.dir").write_bytes(b"\0" * 24)
    (tmp_path / "h.pag").write_bytes(b"")
    with pytest.raises(ValueError, match="not a newhelp"):
        HelpFile.open(str(tmp_path / "h"))


class Bare(Table):
    """The simple PMDA's shape, without any help text of its own."""

    def __init__(self) -> None:
        self.colour = InDom(0, {0: "red"})
        self.m = Metric("numfetch", cluster=0, item=0, type=PmType.U32)
        self.c = Metric("color", cluster=0, item=1, type=PmType.I32, indom=self.colour)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return {}


async def test_daemon_serves_help_file_text(pmdas_dir: Path, table_pmda: PmdaFactory) -> None:
    hf = HelpFile.open(str(pmdas_dir / "simple" / "help"))
    async with table_pmda(Bare(), mount="simple", domain=253, help_source=hf) as pmda:
        assert await pmda.oneline(pmid(253, 0, 0)) == "Number of pmFetch operations."
        assert (await pmda.text(indom(253, 0), TextType.HELP | TextType.INDOM)).startswith("Universally 3")
