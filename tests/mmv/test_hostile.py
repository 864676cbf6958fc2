"""Hostile MMV input: random bytes and mutations of the good corpus (bit
flips, truncations, offsets past EOF, huge counts) never raise anything but
MmvFormatError from the reader, never hang, and never make a fetch fail
with anything but a PCP error code."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.mmv.layout import MmvFormatError
from pmda_py.mmv.model import FileImage, build, read_values
from pmda_py.mmv.reader import MmvFile
from tests.conftest import require
from tests.mmv.corpus import corpus_files

GOOD = [p.read_bytes() for p in corpus_files() if p.stat().st_size < 200_000]


def _exercise(data: bytes) -> None:
    try:
        MmvFile.from_buffer(data)
    except MmvFormatError:
        pass
    export = build([FileImage("f", data)])
    for m in export.metrics:
        insts, vals = read_values(m, data)
        assert len(insts) == len(vals)
        # a shorter image (the file truncated under us): still no exception
        read_values(m, data[: len(data) // 2])


@given(st.binary(max_size=600))
def test_random_bytes(data: bytes) -> None:
    _exercise(data)


@settings(max_examples=300)
@given(st.sampled_from(range(len(GOOD))), st.data())
def test_mutated_corpus_files(k: int, data: st.DataObject) -> None:
    b = bytearray(GOOD[k])
    for _ in range(data.draw(st.integers(1, 6))):
        how = data.draw(st.integers(0, 3))
        if how == 0:  # bit flip
            pos = data.draw(st.integers(0, len(b) - 1))
            b[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif how == 1:  # truncate
            del b[data.draw(st.integers(0, len(b))) :]
            if not b:
                break
        else:  # an 8-byte field set to a hostile offset or count
            pos = data.draw(st.integers(0, max(0, len(b) - 8))) & ~7
            val = data.draw(st.sampled_from([len(b), len(b) + 8, 1 << 40, (1 << 63) - 1, 0xFFFFFFFF, 4096]))
            if pos + 8 <= len(b):
                struct.pack_into("=Q", b, pos, val)
    _exercise(bytes(b))


@pytest.mark.parametrize("shift", [40, 63])
def test_instance_pointer_far_past_eof(shift: int) -> None:
    """Hazard h02: value.instance offsets dereferenced unchecked by pmdammv (it
    crashes); we drop those values with a diagnostic."""
    data = bytearray(next(p.read_bytes() for p in corpus_files() if p.stem == "qa_v1_genstats"))
    mf = MmvFile.from_buffer(bytes(data))
    for v in mf.values:
        if v.instance is not None:
            struct.pack_into("=Q", data, v.offset + 24, 1 << shift)
    mf2 = MmvFile.from_buffer(bytes(data))
    assert any("instance offset" in d.reason for d in mf2.diagnostics)
    _exercise(bytes(data))


def test_huge_file_claims_are_refused_cheaply(tmp_path: Path) -> None:
    # a header claiming 2^32-1 metrics and indoms in a tiny file
    data = bytearray(GOOD[0])
    struct.pack_into("=I", data, 40 + 4, 0xFFFFFFFF)
    _exercise(bytes(data))


async def test_files_of_other_owners_are_skipped_when_configured(tmp_path: Path) -> None:
    import os

    from structlog.testing import capture_logs

    from pmda_py.mmv.table import MmvTable
    from pmda_py.testing.harness import open_table_pmda
    from tests.mmv.corpus import MMV

    d = tmp_path / "mmv"
    d.mkdir()
    shutil_copy = (MMV / "qa_v1_simple.mmv").read_bytes()
    (d / "mine").write_bytes(shutil_copy)
    (d / "theirs").write_bytes(shutil_copy.replace(b"\x7b\x00\x00\x00", b"\x7c\x00\x00\x00", 1))
    require(os.geteuid() == 0, "needs root to give a file to another user")
    os.chown(d / "theirs", 4242, 4242)
    me = str(os.geteuid())
    with capture_logs() as logs:
        async with open_table_pmda(MmvTable(dir=str(d), compat="1", allowed_users=me), mount="mmv", domain=70) as pmda:
            names = await pmda.traverse("mmv")
    assert any(n.startswith("mmv.mine.") for n in names)
    assert not any(n.startswith("mmv.theirs.") for n in names)
    assert any(e["event"] == "mmv_file_owner_refused" and e["file"] == "theirs" and e["uid"] == 4242 for e in logs)


async def test_packed_fast_path_matches_the_plain_path(tmp_path: Path) -> None:
    """A fetch of many metrics takes the byte-swapped packed path: its values
    must equal those of single-metric fetches (the plain path)."""
    import shutil

    from pmda_py.mmv.table import MmvTable
    from pmda_py.testing.harness import open_table_pmda
    from tests.mmv.corpus import MMV

    d = tmp_path / "mmv"
    d.mkdir()
    shutil.copy(MMV / "py_v1_many.mmv", d / "many")
    table = MmvTable(dir=str(d), compat="1")
    async with open_table_pmda(table, mount="mmv", domain=70) as pmda:
        names = [n for n in await pmda.traverse("mmv.many") if not n.startswith("mmv.control")]
        assert len(names) > 100
        together = await pmda.fetch_values(names[:200])
        for n in names[:200:7]:
            assert (await pmda.fetch_values([n]))[n] == together[n], n
        # a profile naming one instance of a 64-bit metric's indom: the packed
        # column is cut to it (the dispatcher's fast path is for "all")
        from pmda_py.pmapi import PmType
        from pmda_py.wire import ProfileEntry

        ids = await pmda.lookup(names[:200])
        descs = {n: await pmda.desc(ids[n]) for n in names[:200]}
        wide = [n for n in names[:200] if descs[n].type == PmType.U64 and descs[n].indom != 0xFFFFFFFF]
        assert wide and isinstance(together[wide[0]], dict) and len(together[wide[0]]) > 1
        # only packed-path metrics of one file: the table answers in one piece
        # (PackedFetch) and the dispatcher encodes it whole
        assert len(wide) > 16
        whole = await pmda.fetch_values(wide)
        assert table._plan is not None and table._plan.file == "many", "the one-piece path was not taken"
        assert whole == {n: together[n] for n in wide}
        twice = wide + wide[:3]  # a repeated PMID: the dispatcher's general path, same values
        assert await pmda.fetch_values(twice) == whole
        indom = descs[wide[0]].indom
        keep = sorted(together[wide[0]])[1]
        await pmda.profile([ProfileEntry(indom, 1, (keep,))])  # exclude all but one
        cut = await pmda.fetch_values(names[:200])
        same = [n for n in names[:200] if descs[n].indom == indom]
        assert len(same) > 16
        for n in same:
            assert cut[n] == {keep: together[n][keep]}, n
        cut_whole = await pmda.fetch_values(wide)  # the one-piece answer, read through the profile
        for n in wide:
            assert cut_whole[n] == ({keep: together[n][keep]} if descs[n].indom == indom else together[n]), n
        for n in names[:200]:
            if descs[n].indom != indom:
                assert cut[n] == together[n], n
