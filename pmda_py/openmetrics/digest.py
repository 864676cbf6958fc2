"""A scraped document digested into a :class:`~.records.Digest`, sans-IO.

The scraper (in a worker process, or in the daemon) owns a source's
:class:`~.model.SourceModel`: it parses each document, ingests it (names
and ids), and sends the daemon a :func:`digest`: the source's metric
metadata (only when it changed: new metrics, instances or labels) and each
present metric's values, already packed for the fetch (instances as a
native ``uint32`` array image, numeric values as big-endian 8-byte words).
The daemon keeps a mirror of the model (:func:`apply_meta`) for names,
descriptors and labels, and swaps the packed values in with little work.
"""

from __future__ import annotations

import functools
import marshal
import sys
from array import array
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from pmda_py.openmetrics.exposition import Limits, Parsed, parse_document
from pmda_py.openmetrics.model import MetricState, NameTable, SourceConfig, SourceModel, interned, pairs_dict
from pmda_py.openmetrics.records import Digest, Meta, Value
from pmda_py.pmapi import TYPES, PmUnits

__all__ = ["UNUSED", "apply_meta", "as_mirror", "digest", "instance_labels", "PACK_CODES", "pack_values"]

_LITTLE = sys.byteorder == "little"


#: the ``array`` code of each type whose values are packed: the 8-byte numbers (I64, U64, DOUBLE)
PACK_CODES: dict[int, str] = {int(t): info.code for t, info in TYPES.items() if info.size == 8}


def pack_values(mtype: int, values: Sequence[Value]) -> bytes | None:
    """``values`` as big-endian 8-byte words (I64, U64, DOUBLE), else None."""
    code = PACK_CODES.get(mtype)
    if code is None:
        return None
    try:
        arr = array(code, cast("Sequence[float]", values))  # (a text among them: TypeError)
    except (TypeError, OverflowError):
        return None
    if _LITTLE:
        arr.byteswap()
    return arr.tobytes()


def _meta(model: SourceModel) -> Meta:
    meta = Meta()
    for m in model.metrics.values():
        meta.names.append(m.name)
        meta.items.append(int(m.item))
        meta.leaves.append(m.leaf)
        meta.types.append(int(m.type))
        meta.sems.append(int(m.sem))
        meta.units.append(m.units.to_int())
        meta.singular.append(m.singular)
        meta.pcp.append(m.pcp)
        meta.oneline.append(m.oneline)
        meta.help.append(m.help)
        meta.indom_serials.append(None if m.indom_serial is None else int(m.indom_serial))
        meta.inst_names.append(None if m.table is None else list(m.table.names))
        meta.prefix_mode.append(m.table is not None and m.table.prefix_mode)
        meta.labels.append(dict(m.labels))
        meta.optional.append(None if m.optional is None else dict(m.optional))
        meta.inst_labels.append({k: pairs_dict(v) for k, v in m.inst_labels.items()})
    return meta


def digest(
    model: SourceModel,
    config: SourceConfig,
    text: str | Parsed,
    limits: Limits,
    with_meta: bool = False,
    describe: bool = True,
) -> tuple[Digest, list[tuple[int, NameTable]]]:
    """Parse and ingest ``text`` into ``model`` (or ingest a document
    :func:`~pmda_py.openmetrics.exposition.parse_document` parsed already,
    e.g. in a thread: parsing touches no model): the digest and the name
    tables it changed (``(serial, table)``, to save).

    Its ``changed`` is false unless ``with_meta`` or the document changed the
    metadata (new metrics, new instances, changed labels), and its ``meta``
    None unless ``changed`` and ``describe`` (a scraper in the daemon does
    not describe: the daemon reads ``model`` itself); values come for
    each metric with values, instances in ascending order (as pmdaFetch
    walks an indom); ``problems`` are the log lines the document deserves.
    """
    parsed = parse_document(text, limits) if isinstance(text, str) else text
    res = model.ingest(parsed.samples, config)
    problems = list(res.errors)
    if parsed.error is not None:
        problems.insert(0, f"line {parsed.error[0]}: {parsed.error[1]} (rest of the document skipped)")
    problems += list(res.refused)  # (texts that stay the same while the state lasts: logged once)
    if parsed.dropped:
        problems.append(f"samples over the limit of {limits.max_samples} dropped ({parsed.dropped})")
    items: list[int] = []
    images: list[bytes] = []
    blobs: list[bytes | None] = []
    values: list[list[Value] | None] = []
    for m in model.metrics.values():
        if not m.values:
            continue
        insts = sorted(m.values)
        vals = [m.values[i] for i in insts]
        blob = pack_values(m.type, vals)
        items.append(int(m.item))
        images.append(array("I", [i & 0xFFFFFFFF for i in insts]).tobytes())
        blobs.append(blob)
        values.append(vals if blob is None else None)
        m.values = {}  # (packed: what the next scrape finds fills a new one)
    changed = with_meta or bool(res.new) or res.new_instances or res.labels_changed
    out = Digest(
        meta=_meta(model) if changed and describe else None,
        items=items,
        images=images,
        blobs=blobs,
        values=values,
        problems=problems,
        changed=changed,
    )
    return out, res.dirty


#: what a mirror's metric never fills (its scraper's model does): one empty mapping for all of
#: them, read-only (a write raises TypeError) so that nothing can fill the one of every metric at once
UNUSED: Mapping[int, Any] = MappingProxyType({})


def instance_labels(m: MetricState) -> dict[int, dict[str, str]]:
    """The instance labels of a mirror's metric (decoded from its image),
    or of a model's (its own: the daemon's scraper shares its model)."""
    if m.inst_labels is not UNUSED:
        return {k: pairs_dict(v) for k, v in m.inst_labels.items()}
    got = marshal.loads(m.packed_labels) if m.packed_labels else {}
    return got if isinstance(got, dict) else {}


def _blank_table(_serial: int, maxnum: int) -> NameTable:
    return NameTable(maxnum)


def as_mirror(model: SourceModel) -> None:
    """Make a scraper's model (the daemon's own scraper's, which the daemon
    used as it was) a mirror in place, its source now scraped by a worker:
    what only a scraper keeps is dropped, the instance labels packed, and
    each metric keeps its :class:`MetricState` object (the table maps
    exported metrics to it; the worker's first digest describes them again)."""
    for m in model.metrics.values():
        if m.inst_labels is not UNUSED:
            m.packed_labels = marshal.dumps(instance_labels(m)) if m.inst_labels else b""
        m.inst_labels = cast("dict[int, tuple[str, ...]]", UNUSED)
        m.values = cast("dict[int, Value]", UNUSED)
        m.seen = m.cost = None
    model.load_table = _blank_table


@functools.lru_cache(maxsize=256)
def _units(word: int) -> PmUnits:
    """The (immutable, shared) units of a pmUnits word: a source's metrics have a few."""
    return PmUnits.from_int(word)


def apply_meta(model: SourceModel, meta: Meta) -> None:
    """Make ``model`` (the daemon's mirror) hold the metadata ``meta``; a
    metric already known keeps its :class:`MetricState` object (the table
    maps exported metrics to it)."""
    columns = zip(
        meta.names,
        meta.items,
        meta.leaves,
        meta.types,
        meta.sems,
        meta.units,
        meta.singular,
        meta.pcp,
        meta.oneline,
        meta.help,
        meta.indom_serials,
        meta.inst_names,
        meta.prefix_mode,
        meta.labels,
        meta.optional,
        meta.inst_labels,
    )
    for (
        name,
        item,
        leaf,
        mtype,
        sem,
        units,
        singular,
        pcp,
        oneline,
        help_text,
        serial,
        names,
        prefix,
        labels,
        optional,
        inst_labels,
    ) in columns:
        table = None if names is None else NameTable(0x7FFFFFFF, list(names), prefix)
        m = model.by_item.get(item)
        if m is None or m.name != name:
            m = MetricState(
                sys.intern(name),
                item,
                sys.intern(leaf),
                mtype,
                sem,
                _units(units),
                singular,
                pcp,
                sys.intern(oneline),
                sys.intern(help_text),
                serial,
                table,
                inst_labels=cast("dict[int, tuple[str, ...]]", UNUSED),
                values=cast("dict[int, Value]", UNUSED),
            )
            model.metrics[name] = m
            model.by_item[item] = m
        else:
            m.table = table
        m.labels = interned(labels)
        m.optional = None if optional is None else interned(optional)
        m.packed_labels = marshal.dumps(inst_labels) if inst_labels else b""
