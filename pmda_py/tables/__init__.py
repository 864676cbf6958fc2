"""Built-in tables: ``simple`` (PCP's simple PMDA rebuilt) and ``control``
(the daemon's own metrics).  The harvesters' tables live with their
harvesters (:mod:`pmda_py.mmv.table`, :mod:`pmda_py.openmetrics.table`)."""

from __future__ import annotations

__all__: list[str] = []
