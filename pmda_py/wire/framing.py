"""Streaming framer: split a byte stream into PDUs.

Sans-IO, in the manner of h11's ``ReceiveBuffer``: feed bytes with
:meth:`PduReader.receive_data`, take whole PDUs with :meth:`PduReader.next_pdu`
(or raw frames with :meth:`PduReader.next_frame`).  A declared length below
the header size, or above ``max_length``, raises
:class:`~pmda_py.errors.WireFormatError` *before* any buffer of that size is
allocated; the reader is then broken and refuses further use.
"""

from __future__ import annotations

import struct
from typing import Final

from pmda_py.errors import PmErr, WireFormatError
from pmda_py.wire.codec import HEADER_SIZE
from pmda_py.wire.pdus import Pdu, decode_pdu

__all__ = ["DEFAULT_MAX_LENGTH", "PduReader"]

#: Largest PDU accepted by default.  libpcp allows up to INT_MAX - 1024
#: between pmcd and a PMDA; we refuse anything above 64 MiB, which is far
#: beyond any real request (a 32768-PMID fetch is 128 KiB).
DEFAULT_MAX_LENGTH: Final = 64 * 1024 * 1024

_LEN = struct.Struct("!i")
_LEN_TYPE = struct.Struct("!ii")


class PduReader:
    """Accumulates bytes and yields complete PDUs in order."""

    __slots__ = ("_broken", "_buf", "_start", "_whole", "eof", "max_length")

    def __init__(self, max_length: int = DEFAULT_MAX_LENGTH) -> None:
        self.max_length = max_length
        self._buf = bytearray()
        self._start = 0
        #: bytes received while nothing else was buffered, kept as they came:
        #: the usual read is one whole request, which is then its own frame
        #: (not copied into the buffer and out again)
        self._whole: bytes | None = None
        #: True once ``b""`` (end of stream) was received
        self.eof = False
        self._broken: WireFormatError | None = None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the peer; ``b""`` means end of stream."""
        if not data:
            self.eof = True
            return
        if type(data) is bytes and self._whole is None and not self._buf:
            self._whole = data
            return
        self._spill()
        if self._start and self._start >= len(self._buf) // 2:
            del self._buf[: self._start]
            self._start = 0
        self._buf += data

    def _spill(self) -> None:
        """Move the bytes kept as they came into the buffer."""
        if self._whole is not None:
            self._buf += self._whole
            self._whole = None

    @property
    def pending(self) -> int:
        """Bytes received but not yet returned as a PDU."""
        self._spill()
        return len(self._buf) - self._start

    @property
    def truncated(self) -> bool:
        """True if the stream ended in the middle of a PDU."""
        return self.eof and self.pending > 0

    def needed(self) -> int:
        """Bytes still missing for the PDU being received (at least 1)."""
        avail = self.pending
        if avail < 4:
            return HEADER_SIZE - avail
        length = int(_LEN.unpack_from(self._buf, self._start)[0])
        return max(1, max(length, HEADER_SIZE) - avail)

    def peek_header(self) -> tuple[int, int | None] | None:
        """``(length, type)`` of the PDU being received, as far as it has
        arrived (type None before 8 bytes); None before 4 bytes."""
        avail = self.pending  # (bytes kept as they came are in the buffer now)
        if avail < 4:
            return None
        (length,) = _LEN.unpack_from(self._buf, self._start)
        if avail < 8:
            return int(length), None
        return int(length), int.from_bytes(self._buf[self._start + 4 : self._start + 8], "big", signed=True)

    def next_frame(self) -> bytes | None:
        """The next whole PDU as bytes, or None if more data is needed.

        Raises:
            WireFormatError: impossible length (PM_ERR_IPC) or one above
                ``max_length`` (PM_ERR_TOOBIG).  The reader stays broken.
        """
        if self._broken is not None:
            raise self._broken
        whole = self._whole
        if whole is not None:
            if len(whole) >= 8:
                length, pdu_type = _LEN_TYPE.unpack_from(whole)
                if length == len(whole) and HEADER_SIZE <= length <= self.max_length and pdu_type >= 0:
                    self._whole = None
                    return whole
            self._spill()  # part of a PDU, or more than one, or a bad one: the buffer's way
        buf, start = self._buf, self._start
        avail = len(buf) - start  # (pending, without a call: once per request and more)
        if avail < 4:
            return None
        if avail >= 8:
            length, pdu_type = _LEN_TYPE.unpack_from(buf, start)
        else:
            (length,) = _LEN.unpack_from(buf, start)
            pdu_type = 0  # not here yet
        if length < HEADER_SIZE:
            self._broken = WireFormatError(f"PDU length {length} < {HEADER_SIZE}", code=PmErr.IPC)
            raise self._broken
        if length > self.max_length:
            self._broken = WireFormatError(f"PDU length {length} > limit {self.max_length}", code=PmErr.TOOBIG)
            raise self._broken
        if pdu_type < 0:
            # __pmGetPDU: a negative type is PM_ERR_IPC, and libpcp_pmda exits
            self._broken = WireFormatError("negative PDU type", code=PmErr.IPC)
            raise self._broken
        if avail < length:
            return None
        if avail == length:  # the usual: the buffer holds this PDU and nothing more
            frame = bytes(buf[start:]) if start else bytes(buf)
            buf.clear()
            self._start = 0
            return frame
        frame = bytes(buf[start : start + length])
        self._start = start + length
        return frame

    def next_pdu(self) -> Pdu | None:
        """The next whole PDU decoded, or None if more data is needed.

        Raises:
            WireFormatError: framing or decoding failed.  A decode failure
                consumes that PDU only; the stream stays usable.
        """
        frame = self.next_frame()
        if frame is None:
            return None
        return decode_pdu(frame)
