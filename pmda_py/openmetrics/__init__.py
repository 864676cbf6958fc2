"""The OpenMetrics harvester, a drop-in for PCP's pmdaopenmetrics.

Sans-IO: :mod:`.exposition` (the text format, as pmdaopenmetrics reads it,
with limits), :mod:`.decode` (bodies decoded under the cap), :mod:`.names`
and :mod:`.model` (pmdaopenmetrics' names and numbering: sources as
clusters, metrics as items, an indom per metric, the id tables),
:mod:`.metadata` (a metric's type, semantics, units and help),
:mod:`.digest` (a document as a worker sends it), :mod:`.records` (the
typed messages between the daemon and its workers), :mod:`.state` (the id
tables' files), :mod:`.answers` (digests swapped in, packed fetches).
Trio: :mod:`.scrape` (a worker process's scraper), :mod:`.pool` and
:mod:`.procs` (the workers seen from the daemon), :mod:`.scheduler` (timers,
deadlines, rounds), :mod:`.sources`, :mod:`.control` and :mod:`.table` (the
table ``--openmetrics-compat`` mounts).
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
