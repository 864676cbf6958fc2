"""The daemon-worker protocol (pmda_py.openmetrics.records): every message
comes back as the record it was, fields travel by name (no tuple on the
pipe: nothing is read by position), and a frame that is not one of the
records is refused as a ValueError (the pool then treats the worker as
unreadable and replaces it)."""

from __future__ import annotations

import marshal
import struct

import pytest

from pmda_py.openmetrics.digest import apply_meta, digest, instance_labels
from pmda_py.openmetrics.exposition import Limits
from pmda_py.openmetrics.model import MAX_METRIC, NameTable, SourceConfig, SourceModel
from pmda_py.openmetrics.records import (
    Answer,
    Flush,
    Forget,
    LogEntry,
    ProtocolError,
    Reply,
    Request,
    ScrapeJob,
    decode_answer,
    decode_request,
    encode_answer,
    encode_request,
    frame,
    frame_limit,
    read_frames,
)
from pmda_py.pmapi import PmType

DOC = (
    "# HELP req_total Requests.\n# TYPE req_total counter\n"
    'req_total{code="200"} 5\nreq_total{code="500"} 1\n'
    "# TYPE temp gauge\ntemp 21.5\n"
    '# TYPE build info\nbuild_info{version="1.2"} 1\n'
)


def _model() -> SourceModel:
    return SourceModel("s", 1, NameTable(MAX_METRIC), lambda _s, m: NameTable(m), Limits())


def _digest(with_meta: bool = True) -> Reply:
    result, _dirty = digest(_model(), SourceConfig(url="http://x/"), DOC, Limits(), with_meta)
    logs = [LogEntry("openmetrics_config", {"problem": "line 2: odd", "n": 3, "x": None})]
    return Reply("ok", code=200, fetch_ms=4, parse_ms=5, url="http://x/", logs=logs, digest=result)


def _tuples(obj: object) -> list[object]:
    """Every tuple inside ``obj`` (dicts, lists)."""
    if isinstance(obj, tuple):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tuples(v)]
    if isinstance(obj, list):
        return [t for v in obj for t in _tuples(v)]
    return []


def test_answers_come_back_as_they_were_sent() -> None:
    for reply in (_digest(), _digest(with_meta=False), Reply.fail("timed out", 0, None), Reply("ok")):
        buf = bytearray(encode_answer(Answer(9, reply)))
        (msg,) = read_frames(buf)
        assert buf == b""
        assert decode_answer(msg) == Answer(9, reply)


def test_requests_come_back_as_they_were_sent() -> None:
    reqs: list[Request] = [ScrapeJob(3, "a.b", 7, "/etc/x.url", False), Forget("a.b"), Flush(4)]
    buf = bytearray(b"".join(encode_request(r) for r in reqs))
    assert [decode_request(m) for m in read_frames(buf)] == reqs


def test_a_frame_over_the_limit_is_refused_before_it_is_buffered() -> None:
    limit = 1000
    ok = frame({"x": b"a" * 900})
    assert len(ok) - 4 <= limit
    buf = bytearray(ok)
    assert read_frames(buf, limit) == [{"x": b"a" * 900}] and buf == b""
    for n in (limit + 1, 0xFFFFFFFF):  # only the length has arrived: refused at once
        with pytest.raises(ProtocolError, match="over the limit"):
            read_frames(bytearray(struct.pack(">I", n)), limit)
    big = frame({"x": b"a" * 2000})
    with pytest.raises(ProtocolError):
        read_frames(bytearray(big), limit)
    # the OpenMetrics limits make the answers' bound: a digest of the largest
    # document carries it a few times at most
    assert frame_limit(Limits().max_bytes, Limits().max_label_bytes) > 4 * (
        Limits().max_bytes + Limits().max_label_bytes
    )


def test_no_tuple_crosses_the_pipe() -> None:
    """Fields by name, at every level: the old protocol's 7-tuple replies and
    15-field metadata tuples would show here."""
    data = encode_answer(Answer(1, _digest()))
    image = marshal.loads(data[4:])
    assert isinstance(image, dict) and _tuples(image) == []
    assert image["reply"]["digest"]["meta"]["names"] == ["req_total", "temp", "build_info"]


def test_the_mirror_holds_what_the_worker_has() -> None:
    """The daemon's mirror, made from the metadata as it arrives, describes
    each metric as the worker's model does."""
    worker = _model()
    result, _dirty = digest(worker, SourceConfig(url="http://x/"), DOC, Limits(), True)
    (msg,) = read_frames(bytearray(encode_answer(Answer(1, Reply("ok", digest=result)))))
    got = decode_answer(msg).reply.digest
    assert got is not None and got.meta is not None
    mirror = _model()
    apply_meta(mirror, got.meta)
    for name, m in worker.metrics.items():
        ours = mirror.metrics[name]
        assert (ours.item, ours.leaf, ours.type, ours.sem, ours.units, ours.oneline, ours.help) == (
            m.item,
            m.leaf,
            m.type,
            m.sem,
            m.units,
            m.oneline,
            m.help,
        )
        assert (ours.table is None) == (m.table is None)
        if m.table is not None and ours.table is not None:
            assert ours.table.names == m.table.names
        assert (ours.labels, ours.optional, instance_labels(ours)) == (m.labels, m.optional, instance_labels(m))
    assert mirror.metrics["temp"].type == PmType.DOUBLE


def test_a_partial_frame_waits_for_the_rest() -> None:
    data = encode_request(Forget("a"))
    buf = bytearray(data[:-1])
    assert read_frames(buf) == [] and len(buf) == len(data) - 1
    buf += data[-1:]
    assert [decode_request(m) for m in read_frames(buf)] == [Forget("a")]


@pytest.mark.parametrize(
    "image",
    [
        [1, 2],  # not a dict
        {"op": "reboot"},  # no such request
    ],
)
def test_what_is_not_a_request_is_refused(image: list[int] | dict[str, str]) -> None:
    with pytest.raises(ValueError):  # noqa: PT012
        for msg in read_frames(bytearray(_raw(image))):
            decode_request(msg)


def test_a_reply_with_an_unknown_outcome_is_refused() -> None:
    wire = Reply("ok").wire()
    wire["outcome"] = "maybe"
    (msg,) = read_frames(bytearray(frame({"rid": 1, "reply": wire})))
    with pytest.raises(ProtocolError):
        decode_answer(msg)


def _raw(obj: list[int] | dict[str, str]) -> bytes:
    data = marshal.dumps(obj)
    return len(data).to_bytes(4, "big") + data


def _mirrored(doc: str) -> SourceModel:
    """A daemon's mirror made from a worker's digest of ``doc``, as it travels."""
    result, _dirty = digest(_model(), SourceConfig(url="http://x/"), doc, Limits(), True)
    (msg,) = read_frames(bytearray(encode_answer(Answer(1, Reply("ok", digest=result)))))
    got = decode_answer(msg).reply.digest
    assert got is not None and got.meta is not None
    mirror = _model()
    apply_meta(mirror, got.meta)
    return mirror


def test_the_mirror_keeps_labels_compactly() -> None:
    """What the daemon keeps per instance is small: no label dict per
    instance (one image per metric), one string for a label name or value
    however many sources and instances have it, and no name index."""
    a, b = _mirrored(DOC), _mirrored(DOC)  # (two sources, each digest unmarshalled afresh)
    for name, ma in a.metrics.items():
        mb = b.metrics[name]
        assert ma.inst_labels == {} and ma.values == {} and ma.seen is None and ma.cost is None
        if ma.table is not None:
            assert ma.packed_labels and instance_labels(ma)
            assert ma.table._index is None  # (made on a first lookup: the mirror never looks a name up)
        for (ka, va), (kb, vb) in zip(ma.labels.items(), mb.labels.items()):
            assert ka is kb and va is vb
        assert ma.help is mb.help and ma.leaf is mb.leaf


def test_the_mirrors_unused_fields_cannot_be_written() -> None:
    """The fields a mirror never fills are one empty mapping for every metric
    of every source: a write to one must fail, not fill all of them."""
    a, b = _mirrored(DOC), _mirrored(DOC)
    ma, mb = next(iter(a.metrics.values())), next(iter(b.metrics.values()))
    for m in (ma, mb):
        with pytest.raises(TypeError):
            m.values[0] = 1.0
        with pytest.raises(TypeError):
            m.inst_labels[0] = ("x", "y")
        with pytest.raises((TypeError, AttributeError)):
            m.values.update({1: 2.0})
        with pytest.raises((TypeError, AttributeError)):
            m.inst_labels.setdefault(1, ())
    assert ma.values == {} and mb.inst_labels == {}


def test_a_models_instance_labels_are_compact_and_order_free() -> None:
    """A scraper's model keeps an instance's labels as one tuple of interned
    names and values, sorted by name (not a dict each): labels given in
    another order are no change (no metadata sent again), a changed value
    is (a new instance); they read back as the dict they were, as the daemon's scraper
    answers them, and travel to a mirror as such."""
    model = _model()
    config = SourceConfig(url="http://x/")
    first, _ = digest(model, config, 'm{b="2",a="1"} 1\n', Limits())
    pairs = model.metrics["m"].inst_labels[0]
    assert first.changed and pairs == ("a", "1", "b", "2")
    again, _ = digest(model, config, 'm{a="1",b="2"} 2\n', Limits())
    assert not again.changed and model.metrics["m"].inst_labels[0] is pairs
    changed, _ = digest(model, config, 'm{a="1",b="3"} 2\n', Limits(), describe=False)
    assert changed.changed and changed.meta is None  # (the daemon's own scraper: no description)
    assert instance_labels(model.metrics["m"]) == {0: {"a": "1", "b": "2"}, 1: {"a": "1", "b": "3"}}
    assert _mirrored('m{b="2",a="1"} 1\n').metrics["m"].packed_labels == marshal.dumps({0: {"a": "1", "b": "2"}})
