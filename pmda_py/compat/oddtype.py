"""Metrics of a type number PCP does not define (a pmdaMetric of type 99,
255 or -2): the binding keeps them.  Its DESC gives the number as the script
set it; its fetch callback is called and answered as for PM_TYPE_NOSUPPORT
(its type switch knows neither), so here such a metric is a NOSUPPORT
:class:`~pmda_py.table.Metric` whose DESC says the script's number."""

from __future__ import annotations

from typing import Any

import attrs

from pmda_py.pmapi import PmDesc, PmType
from pmda_py.table import Metric
from pmda_py.table.metric import METRIC_TYPES

__all__ = ["UndefinedTypeMetric", "script_metric"]


@attrs.frozen(eq=False, kw_only=True)
class UndefinedTypeMetric(Metric):
    """A NOSUPPORT metric whose DESC gives ``desc_type``, the script's type number."""

    desc_type: int = int(PmType.NOSUPPORT)

    def desc(self, domain: int) -> PmDesc:
        return attrs.evolve(super().desc(domain), type=self.desc_type)


def script_metric(type_: int, name: str, **fields: Any) -> Metric:
    """The Metric of a script's metric of type number ``type_`` (its other
    ``fields`` as :class:`~pmda_py.table.Metric` takes them): of that type,
    or NOSUPPORT with the number in its DESC if PCP does not define it."""
    if type_ in METRIC_TYPES:  # the types a Metric may have: served as they are
        return Metric(name, type=type_, **fields)
    return UndefinedTypeMetric(name, type=PmType.NOSUPPORT, desc_type=type_, **fields)
