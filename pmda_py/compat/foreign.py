"""Indoms a script made with another domain's number (``(5 << 22) | 1`` in
a PMDA of domain 418): the binding keeps each as the number it was given,
beside the PMDA's own indom of the same serial.  Its metrics' DESC gives
that number, INSTANCE answers for it (libpcp_pmda looks an indom up by its
whole number), and the PMDA's own number of that serial names only what
the script added with it."""

from __future__ import annotations

import attrs

from pmda_py.pmapi import indom_domain, indom_serial
from pmda_py.table import InDom

__all__ = ["ForeignInDom", "script_indom"]


@attrs.define(eq=False)
class ForeignInDom(InDom):
    """An indom whose pmInDom is ``given``, whatever the PMDA's domain."""

    given: int = 0

    @property
    def id(self) -> int:
        return self.given


def script_indom(it: int, domain: int) -> InDom:
    """The InDom of the script's indom number ``it`` in a PMDA of ``domain``."""
    if indom_domain(it) == domain:
        return InDom(indom_serial(it))
    return ForeignInDom(indom_serial(it), given=it)
