"""What the daemon and its scraper worker processes say to each other, sans-IO.

Every message is a frozen attrs record with named fields: requests
(:class:`ScrapeJob`, :class:`Forget`, :class:`Flush`) in, :class:`Answer`
(a request's :class:`Reply`) out.  On the pipe a message is a frame: a
4-byte big-endian length and a ``marshal`` image of a dict keyed by the
field names (:func:`frame`, :func:`read_frames`); ``marshal`` builds only
builtin values (and code objects, which nothing here runs), never instances of
a class: a worker that parsed hostile documents cannot make the daemon run
anything.  A worker runs as the daemon's user, so what a broken one could do
to the daemon through its frames is no more than it could do by signals; a
frame's length is still bounded before any of it is buffered
(:func:`frame_limit`).  Field names travel with the values, so no side reads
a field by its position.

A :class:`Digest` carries a scrape's values column by column (items,
instance images, packed values): one dict per scrape, not one per metric,
which keeps the daemon's share of a round small.
"""

from __future__ import annotations

import marshal
import struct
from collections.abc import Mapping
from typing import Any, Literal, Optional, Union

import attrs

__all__ = [
    "MAX_FRAME",
    "Answer",
    "Digest",
    "Flush",
    "Forget",
    "LogEntry",
    "Meta",
    "Reply",
    "Request",
    "ScrapeJob",
    "Value",
    "decode_answer",
    "decode_request",
    "encode_answer",
    "encode_request",
    "frame",
    "frame_limit",
    "read_frames",
]

#: a sample's value, as the exposition gives it (float, int or text)
Value = Union[float, int, str]
#: a log field's value (what a worker may send for the daemon to log)
LogValue = Union[str, int, float, None]
#: how a scrape ended
Outcome = Literal["ok", "fail"]

#: a record as it travels: its fields by name (what ``marshal`` gives back is
#: builtins of any type: the record's constructor takes them as they come)
Wire = Mapping[str, Any]
#: a record on its way out (builtins only)
WireOut = dict[str, object]

_LEN = struct.Struct(">I")

#: the largest frame :func:`read_frames` takes by default (the daemon's requests)
MAX_FRAME = 64 << 20


def frame_limit(max_bytes: int, max_label_bytes: int) -> int:
    """The largest answer frame a worker may send for sources bounded by a
    document of ``max_bytes`` and ``max_label_bytes`` of instance names and
    labels (the OpenMetrics limits): a digest carries each document byte a
    few times at most (a name as its leaf too, help text as its one-line
    summary too, a value as 8 packed bytes), so eight times both, and
    :data:`MAX_FRAME` for the rest."""
    return 8 * (max_bytes + max_label_bytes) + MAX_FRAME


class ProtocolError(ValueError):
    """A frame that is not one of these records (a worker bug)."""


@attrs.frozen
class LogEntry:
    """A line for the daemon to log for the source (event and fields)."""

    event: str
    fields: Mapping[str, LogValue] = attrs.field(factory=dict)

    def wire(self) -> WireOut:
        return {"event": self.event, "fields": dict(self.fields)}

    @classmethod
    def unwire(cls, d: Wire) -> LogEntry:
        return cls(event=d["event"], fields=dict(_mapping(d["fields"])))


@attrs.frozen
class Meta:
    """The metadata of a source's metrics, field by field: metric ``k`` is
    index ``k`` of every list (one record per scrape, not one per metric:
    a first round of 1 000 sources brings 100 000 metrics to the daemon)."""

    names: list[str] = attrs.field(factory=list)  #: the exposition names
    items: list[int] = attrs.field(factory=list)
    leaves: list[str] = attrs.field(factory=list)  #: the names under ``openmetrics.SOURCE.``
    types: list[int] = attrs.field(factory=list)
    sems: list[int] = attrs.field(factory=list)
    units: list[int] = attrs.field(factory=list)  #: pmUnits words (:meth:`PmUnits.to_int`)
    singular: list[bool] = attrs.field(factory=list)
    pcp: list[bool] = attrs.field(factory=list)
    oneline: list[str] = attrs.field(factory=list)
    help: list[str] = attrs.field(factory=list)
    indom_serials: list[Optional[int]] = attrs.field(factory=list)
    inst_names: list[Optional[list[str]]] = attrs.field(factory=list)  #: instance names (None: singular)
    prefix_mode: list[bool] = attrs.field(factory=list)
    labels: list[dict[str, str]] = attrs.field(factory=list)
    optional: list[Optional[dict[str, str]]] = attrs.field(factory=list)
    inst_labels: list[dict[int, dict[str, str]]] = attrs.field(factory=list)

    def __len__(self) -> int:
        return len(self.names)

    def wire(self) -> WireOut:
        return attrs.asdict(self, recurse=False)

    @classmethod
    def unwire(cls, d: Wire) -> Meta:
        return cls(**d)


@attrs.frozen
class Digest:
    """A scraped document digested: metadata (None unless it changed),
    values column by column (for each metric with values: its item, its
    instances as a native ``uint32`` array image in ascending order, its
    values packed as big-endian 8-byte words or None, and its values as a
    list when they could not be packed), and the problems to log."""

    meta: Optional[Meta]
    items: list[int]
    images: list[bytes]
    blobs: list[Optional[bytes]]
    values: list[Optional[list[Value]]]
    problems: list[str]
    #: the metadata changed (new metrics, instances or labels): ``meta`` holds it, or, from a
    #: scraper in the daemon (whose model is the daemon's, not mirrored), the model does
    changed: bool = False

    def wire(self) -> WireOut:
        return {
            "meta": None if self.meta is None else self.meta.wire(),
            "items": self.items,
            "images": self.images,
            "blobs": self.blobs,
            "values": self.values,
            "problems": self.problems,
            "changed": self.changed,
        }

    @classmethod
    def unwire(cls, d: Wire) -> Digest:
        meta = d["meta"]
        return cls(
            meta=None if meta is None else Meta.unwire(_mapping(meta)),
            items=d["items"],
            images=d["images"],
            blobs=d["blobs"],
            values=d["values"],
            problems=d["problems"],
            changed=bool(d.get("changed", meta is not None)),
        )


@attrs.frozen
class Reply:
    """How one scrape went.  ``outcome`` "ok": ``code`` is the HTTP status
    (0 for a file or script), the times are the fetch's and the digest's,
    ``digest`` the document's; "fail": ``status`` says why.  ``url`` is
    the config's URL when the config was (re)read; ``logs`` are lines for
    the daemon to log."""

    outcome: Outcome
    status: str = ""
    code: int = 0
    fetch_ms: int = 0
    parse_ms: int = 0
    url: Optional[str] = None
    logs: list[LogEntry] = attrs.field(factory=list)
    digest: Optional[Digest] = None
    #: a hand-over's answer: the source's name tables not saved yet (serial -> file image)
    tables: dict[int, bytes] = attrs.field(factory=dict)

    @classmethod
    def fail(cls, status: str, code: int = 0, url: str | None = None, logs: list[LogEntry] | None = None) -> Reply:
        return cls("fail", status=status, code=code, url=url, logs=logs or [])

    def wire(self) -> WireOut:
        return {
            "outcome": self.outcome,
            "status": self.status,
            "code": self.code,
            "fetch_ms": self.fetch_ms,
            "parse_ms": self.parse_ms,
            "url": self.url,
            "logs": [e.wire() for e in self.logs],
            "digest": None if self.digest is None else self.digest.wire(),
            "tables": self.tables,
        }

    @classmethod
    def unwire(cls, d: Wire) -> Reply:
        outcome = d["outcome"]
        if outcome not in ("ok", "fail"):
            raise ProtocolError(f"outcome {outcome!r}")
        dig = d["digest"]
        return cls(
            outcome="ok" if outcome == "ok" else "fail",
            status=d["status"],
            code=d["code"],
            fetch_ms=d["fetch_ms"],
            parse_ms=d["parse_ms"],
            url=d["url"],
            logs=[LogEntry.unwire(e) for e in d["logs"]],
            digest=None if dig is None else Digest.unwire(_mapping(dig)),
            tables=_tables(d.get("tables", {})),
        )


@attrs.frozen
class Answer:
    """A worker's answer to request ``rid``; ``rid`` 0 is news of its own
    (its logs), the first one when it is up."""

    rid: int
    reply: Reply


@attrs.frozen
class ScrapeJob:
    """Scrape the source ``name`` (its cluster, its config file or script).
    ``tables``: its name tables not saved yet, from the worker it moved
    from (serial -> file image): they come before the saved files."""

    rid: int
    name: str
    cluster: int
    path: str
    scripted: bool
    tables: dict[int, bytes] = attrs.field(factory=dict)


@attrs.frozen
class Forget:
    """Drop the source ``name`` (its config file went)."""

    name: str


@attrs.frozen
class Flush:
    """Save every changed name table now; answered when done.  With
    ``source``: that source is handed over (to another worker): forget it
    and answer with its name tables not saved yet (:attr:`Reply.tables`)."""

    rid: int
    source: str = ""


Request = Union[ScrapeJob, Forget, Flush]


def encode_request(req: Request) -> bytes:
    if isinstance(req, ScrapeJob):
        d: WireOut = {"op": "scrape", **attrs.asdict(req)}
    elif isinstance(req, Forget):
        d = {"op": "forget", "name": req.name}
    else:
        d = {"op": "flush", "rid": req.rid, "source": req.source}
    return frame(d)


def decode_request(d: Wire) -> Request:
    op = d.get("op")
    if op == "scrape":
        return ScrapeJob(
            rid=d["rid"],
            name=d["name"],
            cluster=d["cluster"],
            path=d["path"],
            scripted=bool(d["scripted"]),
            tables=_tables(d.get("tables", {})),
        )
    if op == "forget":
        return Forget(d["name"])
    if op == "flush":
        return Flush(d["rid"], str(d.get("source", "")))
    raise ProtocolError(f"request {op!r}")


def encode_answer(answer: Answer) -> bytes:
    return frame({"rid": answer.rid, "reply": answer.reply.wire()})


def decode_answer(d: Wire) -> Answer:
    return Answer(d["rid"], Reply.unwire(_mapping(d["reply"])))


def frame(d: WireOut) -> bytes:
    """One frame (raises ValueError for what ``marshal`` cannot carry)."""
    data = marshal.dumps(d)
    return _LEN.pack(len(data)) + data


def read_frames(buf: bytearray, limit: int = MAX_FRAME) -> list[Wire]:
    """The whole frames at the start of ``buf`` (removed from it).

    Raises:
        ProtocolError: a frame says it is longer than ``limit`` bytes (as
            soon as its length has arrived: the peer is broken, and what
            follows is not buffered), or is not a dict of fields.
    """
    out = []
    pos = 0
    while len(buf) - pos >= 4:
        (n,) = _LEN.unpack_from(buf, pos)
        if n > limit:
            raise ProtocolError(f"a frame of {n} bytes, over the limit of {limit}")
        if len(buf) - pos - 4 < n:
            break
        obj = marshal.loads(bytes(buf[pos + 4 : pos + 4 + n]))
        out.append(_mapping(obj))
        pos += 4 + n
    del buf[:pos]
    return out


def _tables(obj: object) -> dict[int, bytes]:
    """Name table images by serial, as they travel (anything else: ProtocolError)."""
    if not isinstance(obj, dict) or not all(type(k) is int and type(v) is bytes for k, v in obj.items()):
        raise ProtocolError("name tables: expected a dict of int to bytes")
    return obj


def _mapping(obj: object) -> Wire:
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a dict, got {type(obj).__name__}")
    return obj
