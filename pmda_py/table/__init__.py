"""The table API: what a table author writes against (how to write one:
:mod:`pmda_py.table.base`).

A :class:`Table` (``base.py``) declares :class:`Metric`\\ s (``metric.py``)
and :class:`InDom`\\ s (``indom.py``), is asked through the records of
``requests.py`` and answers in the value forms of ``values.py``; the
dispatcher (:mod:`pmda_py.dispatch`) serves it over PCP's protocol.
"""

from __future__ import annotations

from pmda_py.pmapi import EventFlag
from pmda_py.table.base import CheckMode, LabelSubject, Table
from pmda_py.table.indom import InDom, InstanceCache
from pmda_py.table.metric import Metric, units
from pmda_py.table.requests import FetchRequest, InstanceProfile, StoreRequest, TableContext
from pmda_py.table.values import (
    PACKED_TYPECODES,
    Columns,
    Event,
    FetchResult,
    Labels,
    LabelText,
    PackedColumns,
    PackedFetch,
    Scalar,
    Value,
    Values,
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
    "LabelSubject",
    "LabelText",
    "Labels",
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
