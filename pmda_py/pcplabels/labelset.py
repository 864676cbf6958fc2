"""__pmAddLabels() and what pmdammv sends: a second payload for the same
subject merged into the first (``__pmMergeLabelSets``, which rewrites the
text as ``"full.name":value`` pairs), and the set a DOMAIN/INDOM/CLUSTER/ITEM
or an instance request gets (``pmdaLabel``'s count of payloads for
instances)."""

from __future__ import annotations

import json as _json
from collections.abc import Sequence

import attrs

from pmda_py.pcplabels.parser import (
    E2BIG,
    PM_LABEL_COMPOUND,
    PM_LABEL_INSTANCES,
    PM_LABEL_OPTIONAL,
    PM_MAXLABELJSONLEN,
    PM_MAXLABELS,
    Label,
    LabelHash,
    Unsafe,
    cstr,
    name_of,
    namecmp6,
    parse_labels,
)

__all__ = ["PcpLabelSet", "add_labels", "instance_labels", "level_labels", "level_labels_status"]


def _stash_label(
    lp: Label, json: bytes, lc: LabelHash | None, out: bytearray, olabels: list[Label], unsafe: list[str]
) -> int:
    name, namelen = name_of(lp, json, lc)
    if namelen + 2 + 1 + lp.valuelen + 1 >= PM_MAXLABELJSONLEN - len(out):
        return E2BIG
    start = len(out)
    if lp.valuelen:
        value = cstr(json, lp.value)
        if value is None:
            # libpcp copies from memory past the text (a value offset that
            # wrapped below 0): we copy nothing, and say so
            unsafe.append("a merged label's value lies past its text: pmdammv copies memory it does not own")
            value = b""
        out += b'"' + name[:namelen] + b'":' + value[: lp.valuelen] + b","
        valuelen = lp.valuelen
    else:
        out += b'"' + name[:namelen] + b'":null,'
        valuelen = 4
    olabels.append(Label(start + 1, namelen, lp.flags, start + 1 + namelen + 2, valuelen))
    return 0


def _merge(
    a: list[Label],
    abuf: bytes,
    ac: LabelHash | None,
    b: list[Label],
    bbuf: bytes,
    bc: LabelHash | None,
    unsafe: list[str],
) -> tuple[int, bytes, list[Label]]:
    """__pmMergeLabelSets() with no filter: (length or -errno, text, labels)."""
    out = bytearray(b"{")
    olabels: list[Label] = []
    na, nb = len(a), len(b)
    i = j = 0
    while True:
        # an a-label before the current b-label (or after the last), unless
        # the previous b-label has its name
        if i < na and (j >= nb or namecmp6(a[i], abuf, ac, b[j], bbuf, bc) < 0):
            if j and namecmp6(a[i], abuf, ac, b[j - 1], bbuf, bc) == 0:
                i += 1
            else:
                if _stash_label(a[i], abuf, ac, out, olabels, unsafe) < 0:
                    return E2BIG, b"", []
                i += 1
        if j < nb and (i >= na or namecmp6(a[i], abuf, ac, b[j], bbuf, bc) >= 0):
            if _stash_label(b[j], bbuf, bc, out, olabels, unsafe) < 0:
                return E2BIG, b"", []
            j += 1
        if not (i < na or j < nb):
            break
    if na or nb:
        del out[-1:]
    out += b"}"
    return len(out), bytes(out), olabels


@attrs.define
class _LabelSet:
    """pmLabelSet as __pmAddLabels keeps it."""

    nlabels: int = 0
    json: bytes = b""
    labels: list[Label] = attrs.field(factory=list)
    hash: LabelHash | None = None
    unsafe: list[str] = attrs.field(factory=list)


def add_labels(
    lsp: _LabelSet | None, extras: bytes, flags: int, *, relaxed: bool = False
) -> tuple[_LabelSet | None, int]:
    """__pmAddLabels(): parse ``extras`` into a new set, or merge it into ``lsp``."""
    if len(extras) + 1 >= PM_MAXLABELJSONLEN:
        return lsp, E2BIG
    compound = LabelHash()
    sts, buffer, inp, unsafe = parse_labels(extras, flags, compound, relaxed=relaxed)
    if sts < 0:
        if lsp is not None:
            lsp.unsafe += unsafe
        return lsp, sts
    if lsp is not None:
        try:
            size, result, output = _merge(lsp.labels, lsp.json, lsp.hash, inp, buffer, compound, unsafe)
        except Unsafe as err:
            unsafe.append(str(err))
            size, result, output = len(lsp.json), lsp.json, lsp.labels  # what libpcp meant is unknowable
        compound.clear()
        if size < 0:
            return lsp, size
        if size >= PM_MAXLABELJSONLEN:
            return lsp, E2BIG
        if len(output) > PM_MAXLABELS:
            unsafe.append(f"{len(output)} merged labels overflow libpcp's array of {PM_MAXLABELS}")
        lsp.nlabels, lsp.json, lsp.labels = len(output), result, output
        lsp.unsafe += unsafe
        return lsp, len(output)
    new = _LabelSet(sts, buffer, inp, None, unsafe)
    if compound.hsize > 0 and compound.nodes > 0:
        new.hash = compound.duplicate()
    return new, sts


@attrs.frozen
class PcpLabelSet:
    """One label set as pmdammv sends it: the JSON text (``jsonlen`` bytes)
    and the index entries ``(name, namelen, flags, value, valuelen)``.
    ``unsafe`` says where pmdammv itself relies on memory it does not own
    (the set then holds what libpcp meant)."""

    json: bytes
    labels: tuple[tuple[int, int, int, int, int], ...]
    unsafe: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """What pmdammv sends here that a client cannot use as is."""
        out: list[str] = []
        if self.json:
            try:
                _json.loads(self.json.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                out.append(f"label text {self.json[:80]!r} is not valid JSON")
        for name, namelen, _, value, valuelen in self.labels:
            if name + namelen > len(self.json) or value + valuelen > len(self.json):
                out.append("a label index entry reaches past the JSON text")
                break
        return out


def _export(lsp: _LabelSet, count: int, flags: int, unsafe: list[str]) -> PcpLabelSet:
    labels = [(lb.name, lb.namelen, (lb.flags | flags) & 0xFF, lb.value, lb.valuelen) for lb in lsp.labels[:count]]
    return PcpLabelSet(lsp.json, tuple(labels), tuple(dict.fromkeys(unsafe)))


def level_labels(payloads: Sequence[tuple[bytes, int]], level: int, *, relaxed: bool = False) -> PcpLabelSet | None:
    """mmv_label_lookup() then pmdaLabel() for a DOMAIN/INDOM/CLUSTER/ITEM
    request: the payloads (with their record flags) in pmdammv's order; None
    when pmdammv sends no set."""
    return level_labels_status(payloads, level, relaxed=relaxed)[0]


def level_labels_status(
    payloads: Sequence[tuple[bytes, int]], level: int, *, relaxed: bool = False
) -> tuple[PcpLabelSet | None, list[int]]:
    """:func:`level_labels`, and what __pmAddLabels() returned for each
    payload (below 0: libpcp refused it; an agent may answer that error)."""
    lsp: _LabelSet | None = None
    statuses = []
    for payload, flags in payloads:
        lsp, sts = add_labels(lsp, payload, flags, relaxed=relaxed)
        statuses.append(sts)
    if lsp is None:
        return None, statuses
    level &= ~(PM_LABEL_COMPOUND | PM_LABEL_OPTIONAL)
    return _export(lsp, lsp.nlabels, level, list(lsp.unsafe)), statuses


def instance_labels(payloads: Sequence[tuple[bytes, int]], *, relaxed: bool = False) -> PcpLabelSet:
    """mmv_labelCallBack() then pmdaLabel() for one instance: the set's label
    count is the number of payloads libpcp accepted, not of labels."""
    lsp = _LabelSet()
    count = 0
    for payload, flags in payloads:
        lsp2, sts = add_labels(lsp, payload, flags, relaxed=relaxed)
        assert lsp2 is not None
        lsp = lsp2
        if sts >= 0:
            count += 1
    unsafe = list(lsp.unsafe)
    if count > len(lsp.labels):
        unsafe.append(
            f"{count} payloads accepted but {len(lsp.labels)} labels: pmdammv "
            + ("dereferences a NULL label array" if not lsp.labels else "reads past its label array")
        )
        count = len(lsp.labels)
    if count == 0:
        return PcpLabelSet(lsp.json, (), tuple(unsafe))
    return _export(lsp, count, PM_LABEL_INSTANCES, unsafe)
