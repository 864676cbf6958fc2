"""The real-PCP fixtures of the integration tests, shared."""

from __future__ import annotations

from tests.integration.conftest import pcp_env, pmdas_dir

__all__ = ["pcp_env", "pmdas_dir"]
