"""OpenMetrics (Prometheus text exposition) harvesting, sans-IO.

:mod:`.exposition` turns a scraped document into samples the way PCP's
pmdaopenmetrics reads it (same line grammar, same tolerance, plus limits);
:mod:`.model` holds pmdaopenmetrics' naming and numbering: sources as
clusters, metrics as items, one indom per metric, the persisted name tables
(``$PCP_VAR_DIR/config/pmda/144.N.py``) and the metadata heuristics.  The
trio side (scraping, serving) is :mod:`pmda_py.openmetrics.table`.
"""

from __future__ import annotations

from pmda_py.openmetrics.exposition import Limits, Parsed, Sample, parse_document, parse_sample_line
from pmda_py.openmetrics.model import (
    MAX_CLUSTER,
    MAX_METRIC,
    MetricState,
    NameTable,
    SourceConfig,
    SourceModel,
    indom_serial,
    metric_metadata,
    parse_url_config,
)

__all__ = [
    "MAX_CLUSTER",
    "MAX_METRIC",
    "Limits",
    "MetricState",
    "NameTable",
    "Parsed",
    "Sample",
    "SourceConfig",
    "SourceModel",
    "indom_serial",
    "metric_metadata",
    "parse_document",
    "parse_sample_line",
    "parse_url_config",
]
