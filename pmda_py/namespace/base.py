"""What every stage of the PMNS code shares: the error and the include
resolver's type, and the dynamic-subtree marker."""

from __future__ import annotations

from collections.abc import Callable

from pmda_py.pmapi import DYNAMIC_PMID, pmid_domain, pmid_item

__all__ = ["PmnsError", "Resolver", "is_dynamic_root"]

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
