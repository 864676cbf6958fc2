"""The ``mmv`` table: ``$PCP_TMP_DIR/mmv`` served as pmdammv serves it
(:mod:`.table`: scans, requests, stores), from the objects each scan builds
(:mod:`.state`).  Loaded by name (``--table mmv``, ``--mmv-compat``)."""

from __future__ import annotations

from pmda_py.mmv.table.table import MmvTable

__all__ = ["MmvTable"]
