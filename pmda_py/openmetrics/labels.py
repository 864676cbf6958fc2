"""Labels as the OpenMetrics harvester keeps and answers them, sans-IO."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping

__all__ = [
    "MAX_SET_JSON",
    "MAX_SET_LABELS",
    "interned",
    "label_cost",
    "label_items",
    "label_pairs",
    "pairs_dict",
    "set_fits",
]

_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,253}")

#: the most labels, and bytes of JSON, of one label set PCP's decoders take (p_label.c)
MAX_SET_LABELS = 254
MAX_SET_JSON = 65534


def label_cost(name: str, value: str) -> int:
    """The bytes label ``name`` adds to a set's JSON text (``"name":value,``),
    0 for a name :func:`label_items` leaves out."""
    if not _LABEL_NAME.fullmatch(name):
        return 0
    return len(name) + 4 + len(json.dumps(value, ensure_ascii=False).encode())


def set_fits(labels: Mapping[str, str], extra: Mapping[str, str] | None = None) -> bool:
    """Whether ``labels`` and ``extra`` (names not in ``labels``) make a
    label set PCP takes."""
    items = [*labels.items(), *(extra or {}).items()]
    # (JSON is at most 6 bytes a character, "\u0001": most sets are told without encoding them)
    if len(items) <= MAX_SET_LABELS and 1 + sum(len(k) + 6 + 6 * len(v) for k, v in items) <= MAX_SET_JSON:
        return True
    costs = [c for c in (label_cost(k, v) for k, v in items) if c]
    return len(costs) <= MAX_SET_LABELS and 1 + sum(costs) <= MAX_SET_JSON


def label_items(labels: Mapping[str, str], flags: int, skip: str | None = None) -> list[tuple[str, str, int]]:
    """Labels as ``(name, JSON text, flags)``; names PCP would refuse are left out."""
    out = []
    for k, v in labels.items():
        if k != skip and _LABEL_NAME.fullmatch(k):
            out.append((k, json.dumps(v, ensure_ascii=False), flags))
    return out


def label_pairs(labels: Mapping[str, str]) -> tuple[str, ...]:
    """``labels`` as ``(name, value, name, value, ...)``, sorted by name."""
    return tuple(x for pair in sorted(labels.items()) for x in pair)


def pairs_dict(pairs: tuple[str, ...]) -> dict[str, str]:
    """The labels of :func:`label_pairs` as a dict again."""
    return dict(zip(pairs[::2], pairs[1::2]))


def interned(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` with its names and values interned: the same few names
    and values (``code``, ``"200"``, a source's host) recur in every
    instance of every metric, one string each kept for all of them."""
    return {sys.intern(k): sys.intern(v) for k, v in labels.items()}
