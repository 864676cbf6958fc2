"""libpcp's label parser (``labels.c`` over the jsonsl streaming parser),
transcribed sans-IO so that a drop-in replies with the label sets a C PMDA
would: used by the MMV table (pmdammv's label records) and by ``pmda-py
compat`` (``pcp.pmda`` scripts' label strings)."""

from __future__ import annotations

from pmda_py.pcplabels.parser import PcpLabelSet, add_labels, instance_labels, level_labels, parse_labels

__all__ = ["PcpLabelSet", "add_labels", "level_labels", "instance_labels", "parse_labels"]
