"""Label payloads for the libpcp label-parser transcription, and MMV files
carrying them, compared live with the installed pmdammv.

``payloads(seed, n)`` generates JSON label texts of every shape libpcp's
parser meets in MMV files: objects nested in objects and arrays, members
after them, escapes, odd numbers and names, whitespace, and invalid texts
(cut, duplicated names, bad names, trailing bytes, other top-level values).
``plan_items`` lays them out as label records: each payload alone as an
ITEM label (libpcp's direct parse), consecutive pairs merged on one item, a
cluster and an indom set of several; ``plan_insts`` as instance labels (the
merge path, and pmdammv's count of payloads).  ``write_file`` writes an MMV v3 file with those records (the
file layout is plain MMV; what matters is what pmdammv makes of it).

    python -m tests.mmv.labelgen --seed 7 --count 2000 [--capture FILE]

compares that many generated payloads live (our drop-in against the
installed pmdammv) and prints the figures; ``--capture`` stores pmdammv's
replies per subject (the golden data of ``tests/mmv/test_pcplabels.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from pmda_py.testing.support import pmda_py_argv, traversable_dir

MAX_PAYLOAD = 243  #: the payload field is 244 bytes with its NUL
ITEM, CLUSTER, INDOM, INSTANCES, OPTIONAL = 0x10, 0x08, 0x04, 0x20, 0x80

_NAMES = [
    b"a",
    b"b",
    b"ab",
    b"name",
    b"Name_2",
    b"x9",
    b"zz_top",
    b"a1",
    b"A",
    b"z",
    b"aa",
    b"ab_c",
]
_ODD_NAMES = [
    b"1abc",
    b"_lead",
    b"a.b",
    b"a-b",
    b"",
    b"a b",
    b"caf\xc3\xa9",
    b"a\\u0041",
    b'a\\"q',
    b"__",
    b"9",
    b"a.b.c",
    b".a",
]
_NUMBERS = [
    b"0",
    b"-0",
    b"1",
    b"42",
    b"-12",
    b"3.25",
    b"-0.50e-2",
    b"1E+3",
    b"1e5",
    b"0.0",
    b"123456789012345678901234567890",
    b"2E-7",
    b"0e0",
]
_BAD_NUMBERS = [b"01", b"-", b"1.", b"1e", b".5", b"+1", b"1.2.3", b"0x10", b"NaN", b"Infinity", b"-Infinity", b"1e+"]
_STRINGS = [
    b'""',
    b'"s"',
    b'"two words"',
    b'"tab\\there"',
    b'"nl\\n"',
    b'"q\\"q"',
    b'"\\u00e9t\\u00E9"',
    b'"\\/slash"',
    b'"caf\xc3\xa9"',
    b'"\\\\"',
    b'"\x15ctl"',
    b'"{\\"not\\":1}"',
    b'"a,b:c"',
    b'"[1]"',
]
_BAD_STRINGS = [b'"\x01ctl"', b'"\\x41"', b'"\\uZZZZ"', b"'single'", b'"open', b'"\t"']
_WS = [b"", b"", b"", b" ", b"  ", b"\t", b"\n", b"\r\n", b" \n "]


class _Gen:
    def __init__(self, rnd: random.Random) -> None:
        self.r = rnd

    def ws(self, p: float) -> bytes:
        return self.r.choice(_WS) if self.r.random() < p else b""

    def name(self, odd: float) -> bytes:
        if self.r.random() < odd:
            return self.r.choice(_ODD_NAMES)
        return self.r.choice(_NAMES)

    def value(self, depth: int, p: dict[str, float]) -> bytes:
        r = self.r.random()
        if depth < 4 and r < p["object"]:
            return self.obj(depth + 1, p)
        r -= p["object"]
        if depth < 4 and r < p["array"]:
            return self.array(depth + 1, p)
        r = self.r.random()
        if r < 0.35:
            return self.r.choice(_BAD_NUMBERS if self.r.random() < p["bad"] else _NUMBERS)
        if r < 0.7:
            return self.r.choice(_BAD_STRINGS if self.r.random() < p["bad"] else _STRINGS)
        return self.r.choice(
            [b"true", b"false", b"null", b"tru", b"nul", b"falsey"][: 6 if self.r.random() < p["bad"] else 3]
        )

    def array(self, depth: int, p: dict[str, float]) -> bytes:
        n = self.r.choice([0, 1, 1, 2, 3])
        w = p["ws"]
        items = [self.ws(w) + self.value(depth, p) + self.ws(w) for _ in range(n)]
        return b"[" + b",".join(items) + (b"," if self.r.random() < p["bad"] / 4 else b"") + b"]"

    def obj(self, depth: int, p: dict[str, float]) -> bytes:
        n = self.r.choice([0, 1, 1, 2, 2, 3, 4] if depth > 1 else [1, 1, 2, 2, 3, 4, 5, 0])
        names = [self.name(p["odd"]) for _ in range(n)]
        if n > 1 and self.r.random() < p["dup"]:
            names[-1] = names[0]
        w = p["ws"]
        members = [
            self.ws(w) + b'"' + nm + b'"' + self.ws(w) + b":" + self.ws(w) + self.value(depth, p) + self.ws(w)
            for nm in names
        ]
        return b"{" + b",".join(members) + (b"," if self.r.random() < p["bad"] / 4 else b"") + self.ws(w) + b"}"

    def payload(self) -> bytes:
        r = self.r
        style = r.random()
        p = {
            "object": r.choice([0.0, 0.15, 0.3]),
            "array": r.choice([0.0, 0.1, 0.25]),
            "bad": r.choice([0.0, 0.0, 0.05, 0.2]),
            "odd": r.choice([0.0, 0.0, 0.1, 0.3]),
            "dup": r.choice([0.0, 0.1, 0.3]),
            "ws": r.choice([0.0, 0.0, 0.2, 0.6]),
        }
        text = self.obj(1, p)
        if style < 0.06:  # top level other than an object
            text = r.choice([self.array(1, p), self.value(4, p), b"", b" ", b"{}", b"[]"])
        elif style < 0.14:  # cut short
            text = text[: r.randrange(len(text) + 1)]
        elif style < 0.18:  # trailing bytes
            text += r.choice([b" ", b"x", b"}", b"{}", b',"a":1}', b"\n", b"]"])
        elif style < 0.2:  # leading whitespace or garbage
            text = r.choice([b" ", b"\n", b"x", b"\xef\xbb\xbf"]) + text
        if r.random() < 0.01:  # fills the field: no NUL
            text = (text + b" " * MAX_PAYLOAD)[: MAX_PAYLOAD + 1]
        return text[: MAX_PAYLOAD + 1].replace(b"\0", b"")


def payloads(seed: int, n: int) -> list[bytes]:
    """``n`` label texts (at most 244 bytes, no NUL), the same for a seed."""
    g = _Gen(random.Random(seed))
    return [g.payload() for _ in range(n)]


#: payloads every run includes: the shapes the guide names, and libpcp's known quirks
FIXED = [
    b'{"item_label3":{"a":1,"b":[2,{"c":3}]}}',
    b'{"item_label1":{"x":{"y":"z"}},"plain":7}',
    b'{"a":{"b":{"c":1},"d":2}}',
    b'{"a":{"b":{"c":{"d":1}}},"e":{"f":2}}',
    b'{"a": [1, 2]}',
    b'{"a":[ 1 ,{"b":2} ]}',
    b'{"a":{},"b":{"c":{}}}',
    b'{"b":1,"a":2,"c":3}',
    b'{"a":1,"a":2}',
    b'{"a":{"x":1},"b":{"x":2}}',
    b'{"1a":1,"b":2}',
    b'{"_a":1}',
    b'{"a-b":1,"c":2}',
    b'{"a":1',
    b'{"a":1,"b":',
    b'{"a":1}}',
    b"{}",
    b"[1,2]",
    b'{"a":"\\u0041\\n","b":-0.5E+2}',
    b'{"x":[true,false,null],"y":"s"}',
    # a list whose inner whitespace outweighs the text before it: its value
    # offset wraps below 0 and PCP's decoders refuse the set
    b'{"a":[          1          ]}',
    # filling the 244-byte field with no NUL: pmdammv's strlen() runs on into its stack
    b'{"a":"' + b"x" * 236 + b'"}',
    b'{"a":1,"c":"' + b"y" * 232,
]


@attrs.frozen
class Subject:
    """One label request and the records pmdammv reads for it."""

    key: str  #: ``ITEM <item>``, ``CLUSTER``, ``INDOM``, ``INST <inst>``
    level: int
    records: tuple[tuple[bytes, int], ...]  #: (payload, record flags) in file order


#: put before a payload on an instance when libpcp finds no label in it: pmdammv
#: counts accepted payloads, not labels, and reads that many entries of the label
#: array (a NULL one when there are none: it crashes)
SENTINEL = b'{"zz_s1":1,"zz_s2":2}'


def plan_items(chunk: Sequence[bytes], cluster: int) -> tuple[list[tuple[int, int, int, bytes]], list[Subject]]:
    """Label records (flags, identity, internal, payload) for one file, and
    the subjects they make: each payload alone as an ITEM label (items 1..n),
    consecutive pairs merged on items n+1.., three on the cluster, two on the
    indom; at most 255 records."""
    n = len(chunk)
    recs: list[tuple[int, int, int, bytes]] = []
    subjects: list[Subject] = []
    for j, p in enumerate(chunk):
        flags = ITEM | (OPTIONAL if j % 3 == 0 else 0)
        recs.append((flags, j + 1, -1, p))
        subjects.append(Subject(f"ITEM {j + 1}", ITEM, ((p, flags),)))
    pairs = min((255 - n - 5) // 2, n - 1)
    for k in range(pairs):
        item = n + 1 + k
        a, b = chunk[k], chunk[k + 1]
        recs += [(ITEM, item, -1, a), (ITEM, item, -1, b)]
        subjects.append(Subject(f"ITEM {item}", ITEM, ((a, ITEM), (b, ITEM))))
    if n:
        cl = [chunk[-1], chunk[0], chunk[n // 2]]
        recs += [(CLUSTER, cluster, -1, p) for p in cl]
        subjects.append(Subject("CLUSTER", CLUSTER, tuple((p, CLUSTER) for p in cl)))
        ind = [chunk[n // 3], chunk[-1]]
        recs += [(INDOM, 1, -1, p) for p in ind]
        subjects.append(Subject("INDOM", INDOM, tuple((p, INDOM) for p in ind)))
    return recs, subjects


def plan_insts(chunk: Sequence[tuple[bytes, bool]]) -> tuple[list[tuple[int, int, int, bytes]], list[Subject]]:
    """Each payload as the labels of one instance (0, 1, ...): alone when
    ``safe`` (libpcp finds a label in it), else after :data:`SENTINEL`."""
    recs: list[tuple[int, int, int, bytes]] = []
    subjects: list[Subject] = []
    for j, (p, safe) in enumerate(chunk):
        flags = INSTANCES | (OPTIONAL if j % 4 == 1 else 0)
        these = ((p, flags),) if safe else ((SENTINEL, INSTANCES), (p, flags))
        recs += [(f, 1, j, q) for q, f in these]
        subjects.append(Subject(f"INST {j}", INSTANCES, these))
    return recs, subjects


CHUNK = 90  #: payloads per items file: 90 + 2 * 80 pairs + 5 = 255 records
INST_CHUNK = 120  #: payloads per instances file (at most 2 records each)


def write_file(
    path: Path,
    cluster: int,
    n_items: int,
    n_insts: int,
    records: Sequence[tuple[int, int, int, bytes]],
    split: int | None = None,
) -> None:
    """An MMV v3 file: items 1..n_items (U32; item 1 over indom 1 of
    ``n_insts`` instances, the others singular), the label records, values;
    ``split``: the records in two LABELS sections, the first of that many."""
    strings: list[bytes] = []

    def string(s: bytes) -> int:
        strings.append(s)
        return len(strings) - 1

    names = [string(b"m%d" % i) for i in range(1, n_items + 1)]
    inames = [string(b"i%d" % k) for k in range(n_insts)]
    tocs = 6 if split is None else 7
    head = 40 + 16 * tocs
    off_indoms = head
    off_insts = off_indoms + 32
    off_metrics = off_insts + 24 * n_insts
    off_values = off_metrics + 48 * n_items
    n_values = n_insts + (n_items - 1)
    off_strings = off_values + 32 * n_values
    off_labels = off_strings + 256 * len(strings)
    size = off_labels + 256 * len(records)
    buf = bytearray(size)
    gen = 0x5F5E100 + cluster
    struct.pack_into("=4siQQiIii", buf, 0, b"MMV\0", 3, gen, gen, tocs, 0, 0, cluster)
    toc = [
        (1, 1, off_indoms),
        (2, n_insts, off_insts),
        (3, n_items, off_metrics),
        (4, n_values, off_values),
        (5, len(strings), off_strings),
        (6, len(records), off_labels),
    ]
    if split is not None:
        toc[-1:] = [(6, split, off_labels), (6, len(records) - split, off_labels + 256 * split)]
    for t, (ttype, count, off) in enumerate(toc):
        struct.pack_into("=IIQ", buf, 40 + 16 * t, ttype, count, off)
    struct.pack_into("=IIQQQ", buf, off_indoms, 1, n_insts, off_insts, 0, 0)
    for k in range(n_insts):
        struct.pack_into("=QIiQ", buf, off_insts + 24 * k, off_indoms, 0, k, off_strings + 256 * inames[k])
    for i in range(n_items):
        indom = 1 if i == 0 else -1
        struct.pack_into(
            "=QIiIIiIQQ", buf, off_metrics + 48 * i, off_strings + 256 * names[i], i + 1, 2, 3, 0, indom, 0, 0, 0
        )
    v = 0
    for k in range(n_insts):
        struct.pack_into("=8sqQQ", buf, off_values + 32 * v, struct.pack("=Q", k), 0, off_metrics, off_insts + 24 * k)
        v += 1
    for i in range(1, n_items):
        struct.pack_into("=8sqQQ", buf, off_values + 32 * v, struct.pack("=Q", i), 0, off_metrics + 48 * i, 0)
        v += 1
    for k, s in enumerate(strings):
        buf[off_strings + 256 * k : off_strings + 256 * k + len(s)] = s
    for k, (flags, ident, internal, payload) in enumerate(records):
        assert len(payload) <= MAX_PAYLOAD + 1 and b"\0" not in payload
        struct.pack_into("=IIi244s", buf, off_labels + 256 * k, flags, ident, internal, payload)
    path.write_bytes(bytes(buf))


@attrs.frozen
class Layout:
    """Files of a run: per file name, its cluster and subjects."""

    files: dict[str, tuple[int, list[Subject]]]


def write_items(root: Path, all_payloads: Sequence[bytes]) -> Layout:
    """Files ``lab0``, ``lab1``, ... under ``root/mmv`` (clusters 40, 41, ...)."""
    (root / "mmv").mkdir(mode=0o755, exist_ok=True)
    files: dict[str, tuple[int, list[Subject]]] = {}
    for f, start in enumerate(range(0, len(all_payloads), CHUNK)):
        chunk = all_payloads[start : start + CHUNK]
        recs, subjects = plan_items(chunk, 40 + f)
        n_items = max([int(s.key.split()[1]) for s in subjects if s.level == ITEM] + [1])
        _write(root, f"lab{f}", 40 + f, n_items, len(chunk), recs)
        files[f"lab{f}"] = (40 + f, subjects)
    return Layout(files)


def write_insts(root: Path, all_payloads: Sequence[tuple[bytes, bool]]) -> Layout:
    """Files ``ins0``, ``ins1``, ... (clusters 400, 401, ...): instance labels."""
    (root / "mmv").mkdir(mode=0o755, exist_ok=True)
    files: dict[str, tuple[int, list[Subject]]] = {}
    for f, start in enumerate(range(0, len(all_payloads), INST_CHUNK)):
        chunk = all_payloads[start : start + INST_CHUNK]
        recs, subjects = plan_insts(chunk)
        _write(root, f"ins{f}", 400 + f, 1, len(chunk), recs)
        files[f"ins{f}"] = (400 + f, subjects)
    return Layout(files)


def _write(root: Path, name: str, cluster: int, n_items: int, n_insts: int, recs: Any) -> None:
    write_file(root / "mmv" / name, cluster, n_items, n_insts, recs)
    (root / "mmv" / name).chmod(0o644)


def decode_frame(frame: bytes) -> Any:
    """A LABEL or ERROR reply frame as comparable data, read leniently (pmdammv
    sends index entries outside their JSON text; the harness's decoder refuses
    those): an error code, or per set ``[inst, nlabels, JSON hex, index]``."""
    ptype = struct.unpack_from("!I", frame, 4)[0]
    if ptype == 0x7000:  # ERROR
        return struct.unpack_from("!i", frame, 12)[0]
    assert ptype == 0x7013, hex(ptype)  # LABEL
    nsets = struct.unpack_from("!i", frame, 24)[0]
    pos = 28
    heads = []
    for _ in range(nsets):
        inst, nlabels, json_off, jsonlen = struct.unpack_from("!iiii", frame, pos)
        pos += 16
        index = []
        for _ in range(max(nlabels, 0)):
            name, namelen, flags, value, valuelen = struct.unpack_from("!HBBHH", frame, pos)
            index.append([name, namelen, flags, value, valuelen])
            pos += 8
        heads.append([inst, nlabels, frame[json_off : json_off + jsonlen].hex(), index])
    return heads


async def label_replies(pmda: Any, layout: Layout) -> dict[str, Any]:
    """Every subject's LABEL reply (decoded leniently) from one PMDA."""
    from pmda_py.pmapi import LabelType
    from pmda_py.wire import LabelReqPdu

    out: dict[str, Any] = {}

    async def ask(ident: int, level: int) -> Any:
        return decode_frame(await pmda.request_raw(LabelReqPdu(ident, level, 0).encode()))

    for name, (_, subjects) in layout.files.items():
        m1 = await pmda.pmid(f"mmv.{name}.m1")
        indom = (await pmda.desc(m1)).indom
        for s in subjects:
            key = f"{name} {s.key}"
            if s.level == ITEM:
                out[key] = await ask((m1 & ~0x3FF) | int(s.key.split()[1]), LabelType.ITEM)
            elif s.level == CLUSTER:
                out[key] = await ask(m1, LabelType.CLUSTER)
            elif s.level == INDOM:
                out[key] = await ask(indom, LabelType.INDOM)
        if any(s.level == INSTANCES for s in subjects):
            reply = await ask(indom, LabelType.INSTANCES)
            if isinstance(reply, int):
                out[f"{name} INSTANCES"] = reply
            else:
                for head in reply:
                    out[f"{name} INST {head[0]}"] = [head]
    return out


PMDAMMV = "/var/lib/pcp/pmdas/mmv/pmdammv"


async def _run(root: Path, layout: Layout) -> tuple[dict[str, Any], dict[str, Any]]:
    from pmda_py.testing.client import open_pipe_pmda

    env = {"PCP_TMP_DIR": str(root)}
    async with open_pipe_pmda([PMDAMMV, "-d", "70", "-l", str(root / "pmdammv.log")], env=env) as ref:
        theirs = await label_replies(ref, layout)
    cmd = pmda_py_argv("run", "--mmv-compat", "-l", str(root / "ours.log"))
    async with open_pipe_pmda(cmd, env=env) as pmda:
        ours = await label_replies(pmda, layout)
    return theirs, ours


def _has_label(reply: Any) -> bool:
    return isinstance(reply, list) and len(reply) == 1 and len(reply[0][3]) > 0


def compare(all_payloads: Sequence[bytes]) -> tuple[Layout, dict[str, Any], dict[str, Any]]:
    """Write the payloads' files, then (pmdammv's replies, ours): first as
    item, cluster and indom labels, then as instance labels (alone where
    pmdammv's item reply shows a label, else after :data:`SENTINEL`; not
    where PCP's decoders refuse the item reply)."""
    import trio

    with traversable_dir("pmda_py-mmvlabgen-") as root:  # pmdammv drops to the pcp user
        (root / "items").mkdir(mode=0o755)
        layout = write_items(root / "items", all_payloads)
        theirs, ours = trio.run(_run, root / "items", layout)
        safe = []
        for name, (_, subjects) in layout.files.items():
            for s in subjects:
                reply = theirs.get(f"{name} {s.key}")
                # one instance set PCP's decoders refuse costs the whole INSTANCES
                # reply (we answer PM_ERR_TOOBIG): such payloads stay item labels
                if s.level == ITEM and len(s.records) == 1 and not refused(reply):
                    safe.append((s.records[0][0], _has_label(reply)))
        (root / "insts").mkdir(mode=0o755)
        layout2 = write_insts(root / "insts", safe)
        theirs2, ours2 = trio.run(_run, root / "insts", layout2)
    return Layout({**layout.files, **layout2.files}), {**theirs, **theirs2}, {**ours, **ours2}


def capture(layout: Layout, theirs: dict[str, Any], version: str) -> dict[str, Any]:
    """pmdammv's replies as golden cases: per subject its records and set."""
    cases = []
    for name, (_, subjects) in layout.files.items():
        for s in subjects:
            reply = theirs.get(f"{name} {s.key}")
            cases.append(
                {
                    "subject": f"{name} {s.key}",
                    "level": s.level,
                    "records": [[p.hex(), f] for p, f in s.records],
                    "reply": reply,
                }
            )
    return {"pcp": version, "cases": cases}


TOOBIG = -12444  #: PM_ERR_TOOBIG


def refused(reply: Any) -> bool:
    """Whether PCP's decoders refuse this LABEL reply (an index entry outside
    its set's JSON text: PM_ERR_IPC, and pmcd drops the agent): the drop-in
    answers PM_ERR_TOOBIG instead (dispatch's _label_fits)."""
    if not isinstance(reply, list):
        return False
    for _, _, text, index in reply:
        n = len(text) // 2
        if any(a + b > n or c + d > n for a, b, _, c, d in index):
            return True
    return False


def classify(
    layout: Layout, theirs: dict[str, Any], ours: dict[str, Any], relaxed: bool
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(identical, refused by PCP's decoders, pmdammv memory-unsafe, other
    differences) among pmdammv's replies."""
    subjects = {f"{n} {s.key}": s for n, (_, ss) in layout.files.items() for s in ss}
    same, bad, unsafe, differ = [], [], [], []
    for k, want in theirs.items():
        name = k.split()[0]
        got = ours.get(k, ours.get(f"{name} INSTANCES") if " INST " in k else None)
        if got == want:
            same.append(k)
        elif k in subjects and unsafe_subject(subjects[k], relaxed):
            unsafe.append(k)
        elif got == TOOBIG and (
            refused(want)
            or (" INST " in k and any(refused(v) for j, v in theirs.items() if j.startswith(f"{name} INST ")))
        ):
            bad.append(k)
        else:
            differ.append(k)
    differ += [k for k in ours if k not in theirs and not k.endswith(" INSTANCES")]
    return same, bad, unsafe, differ


def unsafe_notes(s: Subject, relaxed: bool) -> tuple[str, ...]:
    """Where our transcription says pmdammv relies on memory it does not
    own for this subject (its reply then depends on addresses)."""
    from pmda_py.pcplabels import instance_labels, level_labels

    got = (
        instance_labels(s.records, relaxed=relaxed)
        if s.level == INSTANCES
        else level_labels(s.records, s.level, relaxed=relaxed)
    )
    notes = got.unsafe if got is not None else ()
    if any(len(p) > MAX_PAYLOAD for p, _ in s.records):
        notes += ("a payload filling its field: pmdammv reads on into its stack",)
    return notes


def unsafe_subject(s: Subject, relaxed: bool) -> bool:
    return bool(unsafe_notes(s, relaxed))


def main(argv: Sequence[str] | None = None) -> int:
    from pmda_py.pcpversion import pcp_version

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=900)
    ap.add_argument("--fixed", action="store_true", help="also the FIXED payloads")
    ap.add_argument("--capture", type=Path, help="write pmdammv's replies as golden cases (JSON)")
    args = ap.parse_args(argv)
    todo = (FIXED if args.fixed else []) + payloads(args.seed, args.count)
    layout, theirs, ours = compare(todo)
    subjects = {f"{n} {s.key}": s for n, (_, ss) in layout.files.items() for s in ss}
    version = ".".join(map(str, pcp_version()))
    relaxed = pcp_version() >= (7, 2, 0)
    same, bad, unsafe, differ = classify(layout, theirs, ours, relaxed)
    print(
        f"PCP {version}: {len(todo)} payloads, {len(theirs)} label replies compared: {len(same)} identical, "
        f"{len(bad)} refused by PCP's decoders (we answer PM_ERR_TOOBIG), "
        f"{len(unsafe)} differ where pmdammv is memory-unsafe (logged), {len(differ)} differ otherwise"
    )
    from collections import Counter

    for note, n in Counter(x for k in unsafe for x in unsafe_notes(subjects[k], relaxed)).items():
        print(f"  {n} x {note}")
    for k in differ[:20]:
        s = subjects.get(k)
        print(f"  {k}: records {[p for p, _ in s.records] if s else '?'}")
        print(f"    pmdammv {theirs.get(k)}")
        print(f"    ours    {ours.get(k)}")
    if args.capture:
        cap = capture(layout, theirs, version)
        lines = ",\n".join(json.dumps(c) for c in cap["cases"])
        args.capture.write_text(
            f'{{"pcp": "{version}", "command": {json.dumps(" ".join(sys.argv[1:]))},\n"cases": [\n{lines}\n]}}\n'
        )
    return 1 if differ else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
