"""A scraped document digested into plain data, sans-IO.

The scraper (in a worker process, or in the daemon) owns a source's
:class:`~.model.SourceModel`: it parses each document, ingests it (names
and ids), and sends the daemon a :func:`digest`: the source's metric
metadata (only when it changed: new metrics, instances or labels) and each
present metric's values, already packed for the fetch (instances as a
native ``uint32`` array image, numeric values as big-endian 8-byte words).
The daemon keeps a mirror of the model (:func:`apply_meta`) for names,
descriptors and labels, and swaps the packed values in with little work.

Everything in a digest is a ``marshal``-able builtin (tuples, lists, dicts,
str, bytes, int, float, bool, None): no objects, no code.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from typing import Any

from pmda_py.openmetrics.exposition import Limits, parse_document
from pmda_py.openmetrics.model import MetricState, NameTable, SourceConfig, SourceModel
from pmda_py.pmapi import PmType, PmUnits

__all__ = ["Digest", "apply_meta", "digest", "pack_values"]

#: (meta or None, values, problems); see :func:`digest`
Digest = tuple[Any, list[tuple[int, bytes, Any, Any]], list[str]]

_PACK: dict[int, str] = {PmType.DOUBLE: "d", PmType.I64: "q", PmType.U64: "Q"}
_LITTLE = sys.byteorder == "little"


def pack_values(mtype: int, values: Sequence[Any]) -> bytes | None:
    """``values`` as big-endian 8-byte words (I64, U64, DOUBLE), else None."""
    code = _PACK.get(mtype)
    if code is None:
        return None
    try:
        arr = array(code, values)
    except (TypeError, OverflowError):
        return None
    if _LITTLE:
        arr.byteswap()
    return arr.tobytes()


def _units(u: PmUnits) -> tuple[int, ...]:
    return (u.dim_space, u.dim_time, u.dim_count, u.scale_space, u.scale_time, u.scale_count, u.extra)


def _meta(model: SourceModel) -> list[tuple[Any, ...]]:
    return [
        (
            m.name,
            int(m.item),
            m.leaf,
            int(m.type),
            int(m.sem),
            _units(m.units),
            m.singular,
            m.pcp,
            m.oneline,
            m.help,
            None if m.indom_serial is None else int(m.indom_serial),
            None if m.table is None else (list(m.table.names), m.table.prefix_mode),
            dict(m.labels),
            None if m.optional is None else dict(m.optional),
            {k: dict(v) for k, v in m.inst_labels.items()},
        )
        for m in model.metrics.values()
    ]


def digest(
    model: SourceModel, config: SourceConfig, text: str, limits: Limits, with_meta: bool = False
) -> tuple[Digest, list[tuple[int, NameTable]]]:
    """Parse and ingest ``text`` into ``model``: ``((meta, values, problems),
    dirty name tables)``.

    ``meta`` is None unless ``with_meta`` or the document changed the
    metadata (new metrics, new instances, changed labels); ``values`` is
    ``(item, instance array image, packed values or None, values or None)``
    for each metric with values, instances in ascending order (as pmdaFetch
    walks an indom); ``problems`` are the log lines the document deserves.
    """
    parsed = parse_document(text, limits)
    res = model.ingest(parsed.samples, config)
    problems = list(res.errors)
    if parsed.error is not None:
        problems.insert(0, f"line {parsed.error[0]}: {parsed.error[1]} (rest of the document skipped)")
    problems += list(res.refused)  # (texts that stay the same while the state lasts: logged once)
    if parsed.dropped:
        problems.append(f"{parsed.dropped} samples over the limit of {limits.max_samples} dropped")
    values: list[tuple[int, bytes, Any, Any]] = []
    for m in model.metrics.values():
        if not m.values:
            continue
        insts = sorted(m.values)
        vals = [m.values[i] for i in insts]
        blob = pack_values(m.type, vals)
        image = array("I", [i & 0xFFFFFFFF for i in insts]).tobytes()
        values.append((int(m.item), image, blob, vals if blob is None else None))
    changed = with_meta or bool(res.new) or res.new_instances or res.labels_changed
    return (_meta(model) if changed else None, values, problems), res.dirty


def apply_meta(model: SourceModel, meta: Sequence[tuple[Any, ...]]) -> None:
    """Make ``model`` (the daemon's mirror) hold the metadata ``meta``; a
    metric already known keeps its :class:`MetricState` object (the table
    maps exported metrics to it)."""
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
        labels,
        optional,
        inst_labels,
    ) in meta:
        table = None
        if names is not None:
            table = NameTable(0x7FFFFFFF, list(names[0]), bool(names[1]))
        m = model.by_item.get(item)
        if m is None or m.name != name:
            m = MetricState(
                name,
                item,
                leaf,
                mtype,
                sem,
                PmUnits(
                    dim_space=units[0],
                    dim_time=units[1],
                    dim_count=units[2],
                    scale_space=units[3],
                    scale_time=units[4],
                    scale_count=units[5],
                    extra=units[6],
                ),
                singular,
                pcp,
                oneline,
                help_text,
                serial,
                table,
            )
            model.metrics[name] = m
            model.by_item[item] = m
        else:
            m.table = table
        m.labels = labels  # (the caller's to give: a digest is unmarshalled afresh)
        m.optional = optional
        m.inst_labels = inst_labels
