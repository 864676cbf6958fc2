"""The transcription of libpcp's label parser (pmda_py.pcplabels)
against real pmdammv's LABEL replies, recorded per PCP version under
tests/data/mmv/labels/ (see the README there): for every recorded subject
(its label records in file order), the set we build is the one pmdammv sent,
JSON text and index byte for byte; where our transcription says pmdammv
relies on memory it does not own, the recorded reply is address-dependent
and only our own set's sanity is checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.pcplabels import PcpLabelSet, instance_labels, level_labels
from tests.mmv.labelgen import FIXED, INSTANCES

DATA = Path(__file__).resolve().parents[1] / "data" / "mmv" / "labels"
CAPTURES = sorted(DATA.glob("pmdammv-*.json"))
PM_IN_NULL = -1  #: as the reply's signed field carries it


def _version(path: Path) -> tuple[int, ...]:
    return tuple(int(x) for x in path.stem.split("-", 1)[1].split("."))


def _ours(case: dict[str, Any], relaxed: bool) -> tuple[Any, PcpLabelSet | None]:
    records = [(bytes.fromhex(p), f) for p, f in case["records"]]
    if case["level"] == INSTANCES:
        inst = int(case["subject"].rsplit(" ", 1)[1])
        got: PcpLabelSet | None = instance_labels(records, relaxed=relaxed)
        assert got is not None
        return [[inst, len(got.labels), got.json.hex(), [list(e) for e in got.labels]]], got
    got = level_labels(records, case["level"], relaxed=relaxed)
    if got is None:
        return [], None
    return [[PM_IN_NULL, len(got.labels), got.json.hex(), [list(e) for e in got.labels]]], got


def test_captures_exist() -> None:
    assert {p.name for p in CAPTURES} >= {"pmdammv-6.0.3.json", "pmdammv-6.3.8.json", "pmdammv-7.2.2.json"}


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_transcription_matches_pmdammv(path: Path) -> None:
    doc = json.loads(path.read_text())
    relaxed = _version(path) >= (7, 2, 0)
    assert doc["pcp"] == ".".join(map(str, _version(path)))
    differ, unsafe, same = [], 0, 0
    for case in doc["cases"]:
        if any(len(p) > 2 * 243 for p, _ in case["records"]):  # hex: a payload filling its field
            unsafe += 1  # pmdammv reads on into its stack; our reader skips the record
            continue
        want, got = _ours(case, relaxed)
        if got is not None and got.unsafe:
            unsafe += 1
            for name, namelen, _, value, valuelen in got.labels:
                assert name + namelen <= len(got.json) and value + valuelen <= len(got.json), case["subject"]
            continue
        if want != case["reply"]:
            differ.append((case["subject"], case["records"], case["reply"], want))
        else:
            same += 1
    assert not differ, differ[:3]
    assert same > 700 and unsafe < same // 10, (same, unsafe)


def _fixed_reply(path: Path, payload: bytes) -> Any:
    doc = json.loads(path.read_text())
    for case in doc["cases"]:
        if case["level"] == 0x10 and [r[0] for r in case["records"]] == [payload.hex()]:
            return case["reply"]
    raise AssertionError(f"{payload!r} not recorded")


def _index(reply: Any) -> list[tuple[bytes, int, bytes]]:
    _, _, text, index = reply[0]
    j = bytes.fromhex(text)
    return [(j[n : n + nl], fl, j[v : v + vl]) for n, nl, fl, v, vl in index]


@pytest.mark.parametrize("path", [p for p in CAPTURES if _version(p) < (7, 2, 0)], ids=lambda p: p.stem)
def test_recorded_quirks(path: Path) -> None:
    """What the recordings show libpcp does (docs/mmv.md), pinned so
    a re-recording that changes them is noticed."""
    assert FIXED[0] == b'{"item_label3":{"a":1,"b":[2,{"c":3}]}}'
    # an object inside an array: its members are labels of the enclosing map
    assert _index(_fixed_reply(path, FIXED[0])) == [(b"a", 0xD0, b"1"), (b"c", 0xD0, b"3")]
    # members after a nested map stay labels; the index names the innermost part
    assert _index(_fixed_reply(path, FIXED[1])) == [(b"y", 0x50, b'"z"'), (b"plain", 0x10, b"7")]
    # after an inner map closes, the full name of "d" is "(n" (a NULL stack
    # printed with %s and cut), which sorts before "a.c"
    assert _index(_fixed_reply(path, FIXED[2])) == [(b"d", 0x50, b"2"), (b"c", 0x50, b"1")]
    # a list value is indexed by its input length: whitespace shifts it
    assert _index(_fixed_reply(path, b'{"a": [1, 2]}')) == [(b"a", 0x10, b":[1,2]")]
    # a duplicate name, a name not starting with a letter: no set at all
    assert _fixed_reply(path, b'{"a":1,"a":2}') == []
    assert _fixed_reply(path, b'{"_a":1}') == []
    # a cut text keeps the labels read so far, and is sent as is (not JSON)
    assert _fixed_reply(path, b'{"a":1,"b":') == [[PM_IN_NULL, 1, b'{"a":1,"b":'.hex(), [[2, 1, 0x10, 5, 1]]]]
    # no label in the text: one empty set
    assert _fixed_reply(path, b"{}") == [[PM_IN_NULL, 0, "", []]]


def test_unsafe_and_invalid_sets_are_diagnosed(tmp_path: Path) -> None:
    """A set pmdammv builds from memory it does not own, and one whose text
    is not JSON, come with a diagnostic (logged as mmv_problem)."""
    from pmda_py.mmv.model import FileImage, build
    from tests.mmv.labelgen import write_file

    recs = [(0x10, 1, -1, b'{"a":[[1]]}'), (0x10, 2, -1, b'{"a":1,"b":'), (0x10, 3, -1, b'{"a":1}')]
    write_file(tmp_path / "f", 7, 3, 1, recs)
    export = build([FileImage("f", (tmp_path / "f").read_bytes())])
    reasons = [d.reason for _, d in export.diagnostics if d.section == "labels"]
    assert any("item 1" in r and "memory address" in r for r in reasons), reasons
    assert any("item 2" in r and "not valid JSON" in r for r in reasons), reasons
    assert not any("item 3" in r for r in reasons), reasons
    assert len(export.metrics) == 3


def test_sets_pcp_decoders_refuse_become_toobig() -> None:
    """A set whose index points outside its JSON text (pmdammv sends one for a
    list with wide inner whitespace) is refused by p_label.c with PM_ERR_IPC,
    and pmcd then drops the agent: the dispatcher answers PM_ERR_TOOBIG."""
    from pmda_py.dispatch.meta import _label_fits
    from pmda_py.dispatch.problems import ProblemLog
    from pmda_py.errors import PmErr
    from pmda_py.wire import ErrorPdu, Label, LabelPdu, LabelSet

    ok = LabelSet(-1 & 0xFFFFFFFF, b'{"a":[1]}', (Label(2, 1, 0x10, 5, 3),))
    wrapped = LabelSet(-1 & 0xFFFFFFFF, b'{"a":[1]}', (Label(2, 1, 0x10, 65533, 23),))
    assert _label_fits(LabelPdu(1, 0x10, (ok,)), ProblemLog()) == LabelPdu(1, 0x10, (ok,))
    assert _label_fits(LabelPdu(1, 0x10, (wrapped,)), ProblemLog()) == ErrorPdu(PmErr.TOOBIG)


_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True)
_SCALARS = (
    st.integers(-(2**63), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.none()
    | st.text(max_size=20)
)
_FLAT = st.dictionaries(_NAMES, _SCALARS, min_size=1, max_size=30)


@given(_FLAT, st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]))
@settings(max_examples=300)
def test_a_flat_object_round_trips(labels: dict[str, object], separators: tuple[str, str]) -> None:
    """labels.c on a plain map of valid names to scalars: the set's text is
    the same JSON with the whitespace gone, the index is in name order (by
    bytes, as strncmp) and each entry names its key and its value's text."""
    payload = json.dumps(labels, separators=separators).encode()
    got = level_labels([(payload, 0x10)], 0x10)
    assert got is not None and got.unsafe == () and got.problems() == []
    assert got.json == json.dumps(labels, separators=(",", ":")).encode()
    assert json.loads(got.json) == labels
    names = [got.json[n : n + nl] for n, nl, _, _, _ in got.labels]
    assert names == sorted(k.encode() for k in labels)
    for n, nl, flags, v, vl in got.labels:
        assert flags == 0x10
        key = got.json[n : n + nl].decode()
        assert got.json[v : v + vl] == json.dumps(labels[key]).encode()


@given(_FLAT, _FLAT)
@settings(max_examples=200)
def test_a_second_payload_overrides_the_first(first: dict[str, object], second: dict[str, object]) -> None:
    """__pmMergeLabelSets: two payloads on one subject make one set, the
    second's value winning for a name both have."""
    records = [(json.dumps(p).encode(), 0x10) for p in (first, second)]
    got = level_labels(records, 0x10)
    assert got is not None and got.unsafe == ()
    assert json.loads(got.json) == {**first, **second}
    assert [got.json[n : n + nl] for n, nl, _, _, _ in got.labels] == sorted(k.encode() for k in {**first, **second})
