"""What every stage of the PMNS code shares: the error and the include
resolver's type, and the dynamic-subtree marker."""

from __future__ import annotations

import re
from collections.abc import Callable

from pmda_py.pmapi import DYNAMIC_PMID, pmid_domain, pmid_item

__all__ = ["NAME", "PmnsError", "Resolver", "is_dynamic_root", "unwritable_name"]

#: one part of a name as libpcp's PMNS reader takes it: a letter, then letters, digits and _
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

#: ``resolve(target, angle, including_file) -> (path, text)``: the file an
#: ``#include`` names (``angle``: written ``<target>``); raises ``OSError``
#: when there is none.
Resolver = Callable[[str, bool, str], "tuple[str, str]"]


class PmnsError(ValueError):
    """A PMNS file is malformed: ``file:line: reason`` (line 0: the whole
    file, or an error found after reading it)."""

    def __init__(self, file: str, line: int, reason: str, *, printed: str | None = None) -> None:
        super().__init__(f"{file}:{line}: {reason}" if line > 0 else f"{file}: {reason}")
        self.file = file
        self.line = line
        self.reason = reason
        #: what libpcp's loader (and pmcpp before it) print for this error,
        #: line for line, where the parser knows it (dbpmda and pminfo show it)
        self.printed = printed


def is_dynamic_root(p: int) -> bool:
    """Is PMID ``p`` the marker of a dynamic subtree (``511.DOMAIN.0``)?"""
    return pmid_domain(p) == DYNAMIC_PMID and pmid_item(p) == 0


def unwritable_name(name: str) -> str | None:
    """Why a PMNS file cannot hold ``name`` (None: it can): libpcp's
    reader takes a part of a name only if it begins with a letter and has
    only letters, digits and ``_`` (a name served dynamically, as an MMV or
    OpenMetrics one, never goes into a file)."""
    for part in name.split("."):
        if not NAME.fullmatch(part):
            what = "an empty part" if not part else f"the part {part!r}"
            return (
                f"metric name {name!r} has {what}: a PMNS file takes parts that begin with a letter "
                "and have only letters, digits and _ (pmcd could not load it)"
            )
    return None
