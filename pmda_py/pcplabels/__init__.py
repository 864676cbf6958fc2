"""libpcp's label parser, as pmdammv runs it on MMV label payloads (and as
``pmda-py compat`` runs it on a ``pcp.pmda`` script's label strings).

pmdammv hands every label record's payload to ``__pmAddLabels`` (libpcp
``labels.c``), which feeds it through the jsonsl streaming parser
(:mod:`.jsonsl`), builds the label set from the parser's callbacks
(:mod:`.parser`) and merges a second payload for the same subject into the
first (:mod:`.labelset`).  Every step, quirk included, is transcribed here,
sans-IO, so the drop-in replies byte for byte what pmdammv replies:

* values of a key holding an array of objects "leak" the objects' members as
  labels; members after a nested map keep their place; a list value's index
  entry spans the *input* text (whitespace included) but points into the
  compacted output;
* nothing is checked once the top-level object ends early or the text is cut
  (the labels found so far are kept, the text may be invalid JSON);
* PCP 7.2+ (``relaxed``) skips a member with an invalid name instead of
  refusing the payload, and accepts names starting with a digit or ``_``.

Where pmdammv's own result depends on memory it does not own (a list value
holding a list, a merge copying a value from past its text, an instance label
count beyond the labels found, a NULL label array), :class:`PcpLabelSet`
carries an ``unsafe`` note and what libpcp meant (see docs/mmv.md);
``problems()`` names what pmdammv sends that clients cannot use as is.
"""

from __future__ import annotations

from pmda_py.pcplabels.labelset import PcpLabelSet, add_labels, instance_labels, level_labels, level_labels_status
from pmda_py.pcplabels.parser import parse_labels

__all__ = ["PcpLabelSet", "add_labels", "level_labels", "level_labels_status", "instance_labels", "parse_labels"]
