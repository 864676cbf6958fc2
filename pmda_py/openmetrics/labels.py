"""Labels as the OpenMetrics harvester keeps and answers them, sans-IO."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping

__all__ = ["interned", "label_items", "label_pairs", "pairs_dict"]

_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,253}")


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
