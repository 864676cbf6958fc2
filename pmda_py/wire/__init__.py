"""Sans-IO codec for the pmcd <-> PMDA PDU protocol.

Imports only the standard library, :mod:`attrs` and the lower pmda_py layers
(:mod:`pmda_py.errors`, :mod:`pmda_py.pmapi`); never trio, structlog, os or
socket.
"""

from __future__ import annotations

from pmda_py.wire.framing import DEFAULT_MAX_LENGTH, PduReader
from pmda_py.wire.pdus import *  # noqa: F403
from pmda_py.wire.pdus import __all__ as _pdus_all

__all__ = ["DEFAULT_MAX_LENGTH", "PduReader", *_pdus_all]
