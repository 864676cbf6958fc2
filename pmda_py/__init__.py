"""pmda_py: a pure-Python, async Performance Co-Pilot agent (PMDA) framework."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
