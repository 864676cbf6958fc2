"""The table API: what a table author writes against.

A :class:`Table` declares its metrics (:class:`Metric`) and instance domains
(:class:`InDom`) and answers fetches (:class:`FetchRequest`) and stores
(:class:`StoreRequest`); the dispatcher (:mod:`pmda_py.dispatch`) serves
them over PCP's protocol.
"""

from __future__ import annotations

from pmda_py.table.core import (
    PACKED_TYPECODES,
    CheckMode,
    Columns,
    Event,
    EventFlag,
    FetchRequest,
    FetchResult,
    InDom,
    InstanceCache,
    InstanceProfile,
    LabelText,
    Metric,
    PackedColumns,
    PackedFetch,
    Scalar,
    StoreRequest,
    Table,
    TableContext,
    Value,
    Values,
    units,
)

__all__ = [
    "CheckMode",
    "Columns",
    "Event",
    "EventFlag",
    "FetchRequest",
    "FetchResult",
    "InDom",
    "InstanceCache",
    "InstanceProfile",
    "LabelText",
    "Metric",
    "PACKED_TYPECODES",
    "PackedColumns",
    "PackedFetch",
    "Scalar",
    "StoreRequest",
    "Table",
    "TableContext",
    "Value",
    "Values",
    "units",
]
