"""What pmdammv exports for a set of MMV files, and fast value reads.

:func:`build` takes the directory's file images (scan order) and returns an
:class:`Export`: metric names (below the ``mmv`` mount), PMID parts,
descriptors, instance domains, help text and label sets, plus per metric a
precomputed index of where each instance's value lives, so a fetch never
searches the VALUES section (pmdammv does, per value).  :func:`read_values`
extracts a metric's values from a fresh copy of the file with strided
``memoryview`` casts.  Pure: no I/O, no logging (problems are returned as
diagnostics with file, section and offset).
"""

from __future__ import annotations

import math
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, Literal, Union, cast

import attrs

from pmda_py.errors import PmErr
from pmda_py.mmv import layout
from pmda_py.mmv.layout import MAX_DIAGNOSTICS, STRING_SIZE, VALUE, Diagnostic, MmvFlags, MmvFormatError
from pmda_py.mmv.reader import Image, MmvFile, MmvMetric, cstring
from pmda_py.mmv.regions import FileRegions
from pmda_py.pcplabels import PcpLabelSet, instance_labels, level_labels
from pmda_py.pmapi import TYPES, PmSem, PmType, PmUnits

__all__ = ["Export", "ExportIndom", "ExportMetric", "FileImage", "MmvScalar", "build", "read_values"]

#: one value as read from a file
MmvScalar = Union[int, float, str]

MMV_TYPE_ELAPSED = 9
_KNOWN_TYPES = {-1, 0, 1, 2, 3, 4, 5, 6, MMV_TYPE_ELAPSED}
_ELAPSED_UNITS = 0x01001000  # microsec


@attrs.frozen
class FileImage:
    """One directory entry as the table read it."""

    name: str
    data: Image  #: the whole file, or the regions of it that were read
    pid_alive: bool = True
    parsed: MmvFile | None = None  #: ``data`` already parsed
    error: MmvFormatError | None = None  #: ``data`` could not be read or parsed
    owner: int = -1  #: the file's uid (-1: not known); see MAX_OWNER_INSTANCES


@attrs.define
class ExportIndom:
    serial: int  #: the 22-bit PCP serial ((cluster << 11) | file serial)
    instances: dict[int, str]
    oneline: str | None
    help: str | None
    labels: PcpLabelSet | None = None
    #: per instance with label records (an instance without has an empty set)
    instance_labels: dict[int, PcpLabelSet] = attrs.field(factory=dict)
    file_serial: int = 0  #: the serial as the file wrote it (7.x pmdammv looks indom help up by it)
    #: every instance entry in file order when an id repeats (pmdammv lists them all), else None
    listing: list[tuple[int, str]] | None = None


@attrs.define
class ExportMetric:
    name: str  #: below the mount point (``rs_file.counter``)
    cluster: int
    item: int
    type: int
    sem: int
    units: PmUnits
    indom: int | None  #: PCP serial, None = singular
    oneline: str | int | None  #: text, an error code, or None (no text)
    help: str | int | None
    file: str
    elapsed: bool
    sentinel: bool
    #: per instance (None = singular): index of its value record in the VALUES section
    slots: list[tuple[int | None, int]] = attrs.field(factory=list)
    cluster_labels: PcpLabelSet | None = None
    item_labels: PcpLabelSet | None = None
    values_offset: int = -1
    strided: tuple[int, int] | None = None  #: (first slot, count) when slots are consecutive
    insts: list[int] = attrs.field(factory=list)  #: instance ids in slot order (PM_IN_NULL for singular)
    insts_u32: array[int] = attrs.field(factory=lambda: array("I"))  #: the same as 32-bit words


@attrs.define
class Export:
    metrics: list[ExportMetric]
    indoms: dict[int, ExportIndom]
    clusters: dict[str, int]  #: file -> cluster
    files: int
    reload: bool  #: a file was in flux
    diagnostics: list[tuple[str, Diagnostic]]


def _text(img: Image, off: int) -> str | int | None:
    if off == 0:
        return None
    if off + STRING_SIZE > len(img):
        return PmErr.GENERIC
    return cstring(img, off, STRING_SIZE - 1).decode("utf-8", "replace")


def _name_ok(full: bytes) -> bool:
    if not full or not (65 <= full[0] <= 90 or 97 <= full[0] <= 122):
        return False
    return all(c == 46 or c == 95 or 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 for c in full[1:])


def _label_diags(lset: PcpLabelSet | None, where: str, offset: int, diags: list[Diagnostic]) -> None:
    """Note what pmdammv sends that clients cannot trust (kept: the drop-in
    sends the same) and where it relies on memory it does not own (replaced)."""
    if lset is None:
        return
    for note in lset.unsafe:
        diags.append(Diagnostic("labels", offset, f"{where}: {note} (pmdammv is unsafe here; sent what libpcp meant)"))
    for note in lset.problems():
        diags.append(Diagnostic("labels", offset, f"{where}: {note} (sent as pmdammv sends it)"))


def build(
    images: Sequence[FileImage],
    *,
    sticky: Mapping[str, int] | None = None,
    prefix_files: bool = True,
    relaxed_labels: bool = False,
) -> Export:
    """pmdammv's export for ``images`` (in scan order).

    ``sticky`` maps file names to clusters they had before, so automatic
    clusters survive a rescan (stable PMIDs).  ``relaxed_labels``: label
    names as PCP 7.2+ checks them (an invalid member is skipped, not the
    payload).
    """
    diags: list[tuple[str, Diagnostic]] = []
    loaded, clusters, reload = _admit(images, dict(sticky or {}), diags)
    metrics: list[ExportMetric] = []
    indoms: dict[int, ExportIndom] = {}
    names: set[str] = set()
    for img, mf, c in loaded:
        labels = _FileLabels(mf, img.name, relaxed_labels, diags)
        _add_indoms(img.data, mf, c, labels, indoms)

        def cluster_pred(f: int, i: int, n: int, c: int = c) -> bool:
            return bool(f & 0x08) and i == c

        cluster_labels = labels.find(cluster_pred, 0x08, f"cluster {c}")
        index = _value_index(mf)
        seen_items: set[int] = set()
        refused = 0
        for rec in mf.metrics:
            dup = rec.item in seen_items
            seen_items.add(rec.item)
            if not rec.name:
                continue
            rel = rec.name.decode("latin-1")
            full = "mmv." + (f"{img.name}." if prefix_files and not mf.flags & MmvFlags.NOPREFIX else "") + rel
            why = _refused(rec, full, names, dup)
            if why is not None:
                refused += 1
                if refused <= MAX_DIAGNOSTICS:  # the others are counted (a million bad records cost a count)
                    diags.append((img.name, Diagnostic("metrics", rec.offset, why)))
                continue
            names.add(full)
            metrics.append(_metric(img, mf, c, rec, full[4:], index, cluster_labels, labels.find))
        if refused > MAX_DIAGNOSTICS:
            more = (
                f"{refused - MAX_DIAGNOSTICS} more metric records refused (only the first {MAX_DIAGNOSTICS} are named)"
            )
            diags.append((img.name, Diagnostic("metrics", 0, more)))
    return Export(metrics, indoms, clusters, len(loaded), reload, diags)


def _admit(
    images: Sequence[FileImage], sticky: Mapping[str, int], diags: list[tuple[str, Diagnostic]]
) -> tuple[list[tuple[FileImage, MmvFile, int]], dict[str, int], bool]:
    """The files pmdammv loads, in scan order, each with its cluster (and
    file name -> cluster); whether a file was in flux (a rescan is due)."""
    parsed: list[tuple[FileImage, MmvFile | None, MmvFormatError | None]] = []
    for img in images:
        mf: MmvFile | None = None
        try:
            failed = img.error  # (not raised here: the traceback would make a cycle through img)
            if failed is None:
                mf = img.parsed if img.parsed is not None else MmvFile.from_buffer(img.data)
        except MmvFormatError as err:
            failed = err.with_traceback(None)
        parsed.append((img, None if failed is not None else mf, failed))
    # the clusters the files of this scan ask for, and every one a file was
    # given before: a file given one automatically takes none of them while
    # there are others, so a file that comes does not move the others'
    # clusters (their PMIDs), nor take one that goes and comes back
    claimed = set(sticky.values())
    claimed.update(mf.cluster for img, mf, _failed in parsed if mf is not None and not _writer_gone(img, mf))
    clusters: dict[str, int] = {}
    loaded: list[tuple[FileImage, MmvFile, int]] = []
    reload = False
    used: set[int] = set()
    per_owner: dict[int, int] = {}  # instance entries of each owner's files taken so far
    for img, mf, failed in parsed:
        if mf is None:
            assert failed is not None
            if "in flux" in str(failed):
                reload = True
            diags.append((img.name, Diagnostic(failed.section, failed.offset, f"file not loaded: {failed}")))
            continue
        if _writer_gone(img, mf):
            diags.append((img.name, Diagnostic("header", 32, f"writer pid {mf.process} is gone: file skipped")))
            continue
        entries = per_owner.get(img.owner, 0) + sum(len(ind.instances) for ind in mf.indoms)
        if entries > layout.MAX_OWNER_INSTANCES:
            why = f"its owner's files name more than {layout.MAX_OWNER_INSTANCES} instances in all: file skipped"
            diags.append((img.name, Diagnostic("instances", 0, why)))
            continue
        c = _cluster(img.name, mf.cluster, sticky, used, claimed, clusters, diags)
        if c is None:
            continue
        per_owner[img.owner] = entries
        used.add(c)
        clusters[img.name] = c
        loaded.append((img, mf, c))
        for d in mf.diagnostics:
            diags.append((img.name, d))
    return loaded, clusters, reload


def _writer_gone(img: FileImage, mf: MmvFile) -> bool:
    return bool(mf.flags & MmvFlags.PROCESS) and mf.process != 0 and not img.pid_alive


def _cluster(
    name: str,
    want: int,
    sticky: Mapping[str, int],
    used: set[int],
    claimed: set[int],
    clusters: Mapping[str, int],
    diags: list[tuple[str, Diagnostic]],
) -> int | None:
    """The file's cluster: the one it asks for, or (0: automatic) the one
    it had, else the lowest free one that no file of the scan asks for and
    no file had (the lowest free one if there is no such); None (and why,
    in ``diags``) if none."""
    if want < 0 or want > 4095:
        diags.append((name, Diagnostic("header", 36, f"cluster {want} out of range: file skipped")))
        return None
    if want == 0:
        c = sticky.get(name, 0)
        if c == 0 or c in used:
            c = next((k for k in range(1, 4096) if k not in used and k not in claimed), 0)
            if c == 0:
                c = next((k for k in range(1, 4096) if k not in used), 4096)
        if c > 4095:
            diags.append((name, Diagnostic("header", 36, "no free cluster: file skipped")))
            return None
        return c
    if want in used:
        other = next(n for n, k in clusters.items() if k == want)
        why = f"cluster {want} already taken by {other}: file rejected (pmdammv would mix them)"
        diags.append((name, Diagnostic("header", 36, why)))
        return None
    return want


#: a label record's (flags, identity, internal instance id) -> whether it is for the subject
_LabelPred = Callable[[int, int, int], bool]


@attrs.define
class _FileLabels:
    """One file's label sets, as libpcp's __pmAddLabels builds them from
    each matching record in file order (mmv_label_lookup, mmv_labelCallBack);
    what pmdammv gets wrong in them goes into ``diags``."""

    mf: MmvFile
    fname: str
    relaxed: bool
    diags: list[tuple[str, Diagnostic]]

    def find(self, pred: _LabelPred, level: int, where: str) -> PcpLabelSet | None:
        recs = [lb for lb in self.mf.labels if pred(lb.flags, lb.identity, lb.internal)]
        if not recs:
            return None
        payloads = [(lb.payload, lb.flags) for lb in recs]
        if level == 0x20:
            lset: PcpLabelSet | None = instance_labels(payloads, relaxed=self.relaxed)
        else:
            lset = level_labels(payloads, level, relaxed=self.relaxed)
        local: list[Diagnostic] = []
        _label_diags(lset, where, recs[0].offset, local)
        self.diags.extend((self.fname, d) for d in local)
        return lset


def _add_indoms(data: Image, mf: MmvFile, c: int, labels: _FileLabels, indoms: dict[int, ExportIndom]) -> None:
    """The file's indoms under their 22-bit PCP serials (an indom a file
    repeats gains the new instance ids only)."""
    # the instance ids instance label records name (a file's instances are
    # each looked up only if named: up to 255 records, not per instance)
    labelled = {lb.internal & 0xFFFFFFFF for lb in mf.labels if lb.flags & 0x20}
    for ind in mf.indoms:
        serial = ((c << 11) | ind.serial) & 0x3FFFFF
        insts: dict[int, str] = {}
        entries = [(inst.internal, inst.name.decode("utf-8", "replace")) for inst in ind.instances]
        for k, v in entries:
            insts.setdefault(k, v)
        one, hlp = _text(data, ind.shorttext), _text(data, ind.helptext)
        existing = indoms.get(serial)
        if existing is not None:
            for k, v in insts.items():
                existing.instances.setdefault(k, v)
            continue

        def indom_pred(f: int, i: int, n: int, serial: int = serial, c: int = c) -> bool:
            return bool(f & 0x04) and ((c << 11) | i) & 0xFFFFFFFF == serial

        inst_labels: dict[int, PcpLabelSet] = {}
        for k in insts:
            if k & 0xFFFFFFFF not in labelled:  # no record can be for it: the records are not searched
                continue

            def inst_pred(f: int, i: int, n: int, serial: int = serial, k: int = k, c: int = c) -> bool:
                return bool(f & 0x20) and n & 0xFFFFFFFF == k & 0xFFFFFFFF and ((c << 11) | i) & 0xFFFFFFFF == serial

            got = labels.find(inst_pred, 0x20, f"instance {k} of indom {ind.serial}")
            if got is not None:
                inst_labels[k] = got
        indoms[serial] = ExportIndom(
            serial,
            insts,
            one if isinstance(one, str) else None,
            hlp if isinstance(hlp, str) else None,
            labels.find(indom_pred, 0x04, f"indom {ind.serial}"),
            inst_labels,
            ind.serial,
            entries if len(entries) != len(insts) else None,
        )


def _value_index(mf: MmvFile) -> dict[int, dict[int | None, int]]:
    """metric record offset -> {instance id | None: value slot} (the first
    value record of each pair)."""
    index: dict[int, dict[int | None, int]] = {}
    if mf.values_offset >= 0:
        for val in mf.values:
            slot = (val.offset - mf.values_offset) // VALUE.size
            index.setdefault(val.metric, {}).setdefault(val.instance, slot)
    return index


def _refused(rec: MmvMetric, full: str, names: set[str], dup: bool) -> str | None:
    """Why pmdammv does not export a metric record (None: it does)."""
    if not _name_ok(full.encode("latin-1")):
        return f"invalid metric name {full!r}"
    if full in names:
        return f"duplicate metric name {full}"
    if rec.item > 1023:
        return f"item {rec.item} > 1023"
    if dup:
        return f"duplicate item {rec.item}"
    if rec.type not in _KNOWN_TYPES:
        return f"unsupported type {rec.type}"
    return None


def _metric(
    img: FileImage,
    mf: MmvFile,
    c: int,
    rec: MmvMetric,
    name: str,
    index: dict[int, dict[int | None, int]],
    cluster_labels: PcpLabelSet | None,
    lab: Callable[[_LabelPred, int, str], PcpLabelSet | None],
) -> ExportMetric:
    elapsed = rec.type == MMV_TYPE_ELAPSED
    serial = None if rec.indom in (0, -1) else ((c << 11) | (rec.indom & 0xFFFFFFFF)) & 0x3FFFFF
    sem = rec.sem if rec.sem != 0 else PmSem.COUNTER
    m = ExportMetric(
        name=name,
        cluster=c,
        item=rec.item,
        type=PmType.I64 if elapsed else rec.type,
        sem=PmSem.COUNTER if elapsed else sem,
        units=PmUnits.from_int(_ELAPSED_UNITS if elapsed else rec.units & 0xFFFFFFFF),
        indom=serial,
        oneline=_text(img.data, rec.shorttext) if rec.type != -1 else PmErr.PMID,
        help=_text(img.data, rec.helptext) if rec.type != -1 else PmErr.PMID,
        file=img.name,
        elapsed=elapsed,
        sentinel=bool(mf.flags & MmvFlags.SENTINEL),
        cluster_labels=cluster_labels,
        item_labels=lab(lambda f, i, n: bool(f & 0x10) and i == rec.item, 0x10, f"item {rec.item}"),
        values_offset=mf.values_offset,
    )
    slots = index.get(rec.offset, {})
    if serial is None:
        if None in slots:
            m.slots = [(None, slots[None])]
        elif slots:
            m.slots = [(None, next(iter(slots.values())))]
    else:
        m.slots = [(k, s) for k, s in slots.items() if k is not None]
    if m.slots and all(m.slots[k][1] == m.slots[0][1] + k for k in range(len(m.slots))):
        m.strided = (m.slots[0][1], len(m.slots))
    m.insts = [-1 if i is None else i for i, _ in m.slots]
    m.insts_u32 = array("I", [i & 0xFFFFFFFF for i in m.insts])
    return m


def _section(image: Image, offset: int, length: int) -> memoryview:
    """``length`` bytes at ``offset`` (fewer where the image ends) as a view."""
    if isinstance(image, FileRegions):
        return image.view(offset, length)
    return memoryview(image)[offset : offset + length]


def slot_runs(runs: Iterable[tuple[int, int]], gap: int = 128) -> list[tuple[int, int]]:
    """``runs`` of value records (``(first, count)`` each) merged where
    they overlap or are fewer than ``gap`` records apart (one read, not
    two)."""
    merged: list[list[int]] = []
    for first, n in sorted(runs):
        if merged and first <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], first + n)
        else:
            merged.append([first, first + n])
    return [(a, b - a) for a, b in merged]


def needed_runs(m: ExportMetric) -> list[tuple[int, int]]:
    """The value records a fetch of ``m`` reads, as ``(first, count)`` runs."""
    if m.strided is not None:
        return [m.strided]
    return [(s, 1) for _, s in m.slots]


def _run(image: Image, values_offset: int, first: int, n: int) -> memoryview | None:
    """Value records ``first`` to ``first + n`` as one view (None: the
    image no longer holds them all, a file that shrank)."""
    view = _section(image, values_offset + first * VALUE.size, n * VALUE.size)
    return view if len(view) == n * VALUE.size else None


def packed_values(image: Image, values_offset: int, runs: Sequence[tuple[int, int]]) -> array[int] | None:
    """The first 8 bytes of the value slots ``runs`` (``(first, count)``
    each, consecutive slots) of a file image, big-endian, in one array: the
    encoder's bytes for 64-bit values.  None when the image no longer holds
    them (a file that shrank: :func:`read_values` says what is left)."""
    if values_offset < 0:
        return None
    out = array("Q")
    for first, n in runs:  # one strided slice per run
        run = _run(image, values_offset, first, n)
        if run is None:
            return None
        out.frombytes(run.cast("Q")[::4].tobytes())
    if sys.byteorder == "little":
        out.byteswap()
    return out


def read_values(
    m: ExportMetric,
    image: Image,
    order: Sequence[int] | None = None,
    now: float | None = None,
) -> tuple[Sequence[int], Sequence[MmvScalar]]:
    """The metric's current values from a file image (a private copy, or
    the regions of the file read for this fetch: the records of
    :func:`needed_runs`, at least).

    Returns ``(insts, values)`` in instance order (``order``: the indom's
    instance order); instances whose value record is missing or past the
    end are left out; SENTINEL values are dropped.
    """
    if m.values_offset < 0 or not m.slots:
        return [], []
    base = m.values_offset
    t = m.type
    code, per = _COLUMNS.get(t, _OTHER_COLUMN)
    if m.strided is not None and order is None and not (m.sentinel or m.elapsed or t == PmType.STRING):
        # the fast path: one strided cast, no per-value Python work
        run = _run(image, base, *m.strided)
        if run is not None:
            column: array[int] | array[float] = array(code)
            column.frombytes(run.cast(code)[::per].tobytes())
            return m.insts_u32, column
    slots = m.slots
    if order is not None and m.indom is not None:
        pos = dict(slots)
        slots = [(i, pos[i]) for i in order if i in pos]
    # each kept instance with its whole record (one that is cut off: left out)
    kept: list[tuple[int, memoryview]] = []
    for i, s in slots:
        rec = _section(image, base + s * VALUE.size, VALUE.size)
        if len(rec) == VALUE.size:
            kept.append((PM_IN_NULL_ if i is None else i, rec))
    insts = [i for i, _ in kept]
    records = [rec for _, rec in kept]
    nums: list[int | float] = [rec.cast(code)[0] for rec in records]
    if t == PmType.STRING:
        return _present(m, insts, records, _strings(image, records))
    if m.elapsed:
        now_usec = (time.time() if now is None else now) * 1e6
        extras = [rec.cast("q")[1] for rec in records]
        nums = [v + int(now_usec + x) if x < 0 else v for v, x in zip(nums, extras)]
    if m.sentinel:
        return _present(m, insts, records, nums)
    return insts, nums


def _strings(image: Image, records: Sequence[memoryview]) -> list[str | None]:
    """STRING values: each record's second word is the offset of its text."""
    offsets = [rec.cast("q")[1] for rec in records]
    if isinstance(image, FileRegions):  # every text in as few reads as it takes, within a budget
        image.read_texts([o for o in offsets if o > 0], STRING_SIZE - 1)
    vals: list[str | None] = []
    for off in offsets:
        if off <= 0 or off >= len(image):
            vals.append(None)
        else:
            vals.append(cstring(image, off, STRING_SIZE - 1).decode("utf-8", "replace"))
    return vals


def _present(
    m: ExportMetric,
    insts: Sequence[int],
    records: Sequence[memoryview],
    vals: Sequence[MmvScalar | None],
) -> tuple[list[int], list[MmvScalar]]:
    """The values a client sees: no string where none is written, and with
    SENTINEL set, no NaN, empty string or all-ones word."""
    t = m.type
    out_i: list[int] = []
    out_v: list[MmvScalar] = []
    for inst, rec, v in zip(insts, records, vals):
        if v is None:
            continue
        if m.sentinel:
            if t in (PmType.FLOAT, PmType.DOUBLE) and isinstance(v, float) and math.isnan(v):
                continue
            if t == PmType.STRING and v == "":
                continue
            if t not in (PmType.FLOAT, PmType.DOUBLE, PmType.STRING) and rec.cast("Q")[0] == 0xFFFFFFFFFFFFFFFF:
                continue
        out_i.append(inst)
        out_v.append(v)
    return out_i, out_v


PM_IN_NULL_ = -1
_NumberCode = Literal["i", "I", "q", "Q", "f", "d"]
#: a value record's first word read as each numeric type: the ``array`` code
#: (pmapi.TYPES) and the record's length in such words, the stride of a column
#: of records; any other type (STRING, NOSUPPORT) reads the first 8 bytes as
#: a signed word
_COLUMNS: Final[Mapping[int, tuple[_NumberCode, int]]] = {
    t: (cast(_NumberCode, info.code), VALUE.size // info.size) for t, info in TYPES.items() if info.code
}
_OTHER_COLUMN: Final[tuple[_NumberCode, int]] = ("q", VALUE.size // 8)
