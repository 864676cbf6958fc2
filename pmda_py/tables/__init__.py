"""Built-in tables: ``simple`` (PCP's simple PMDA rebuilt), ``control`` (the
daemon's own metrics), ``mmv`` (the MMV harvester) and test tables."""

from __future__ import annotations

__all__: list[str] = []
