"""A response body decoded under the document cap, sans-IO.

HTTP clients decode ``Content-Encoding`` a whole received chunk at a time,
so a few kilobytes of ``gzip, gzip`` can become gigabytes before any size
check runs.  :class:`BodyDecoder` is fed the raw (still encoded) bytes and
inflates them with ``zlib.decompressobj(...).decompress(data, max_length)``:
it never holds more than the cap (plus one byte) of decoded text, and stops
as soon as the cap is passed.  One encoding at most (``gzip``, ``x-gzip``,
``deflate``, ``identity``); stacked and unknown encodings are refused.
"""

from __future__ import annotations

import zlib

__all__ = ["ACCEPT_ENCODING", "BodyDecoder", "BodyRefused", "printable"]

#: what the scraper asks for (and can decode)
ACCEPT_ENCODING = "gzip, deflate"


class BodyRefused(ValueError):
    """The body cannot be taken (over the cap, or an encoding refused)."""


def printable(text: str, most: int = 40) -> str:
    """A bounded, sanitized rendering of text a source controls (for a
    status or a log line): printable ASCII, at most ``most`` characters."""
    cut = text[:most]
    out = "".join(c if " " <= c <= "~" else "?" for c in cut)
    return out + ("..." if len(text) > most else "")


class BodyDecoder:
    """Feed the raw body with :meth:`feed`; :meth:`finish` gives the decoded
    document.  Both raise :class:`BodyRefused`."""

    def __init__(self, content_encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._out = bytearray()
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1:
            raise BodyRefused(f"stacked Content-Encoding {printable(content_encoding or '')!r} refused")
        self.coding = codings[0] if codings else ""
        if self.coding not in ("", "gzip", "x-gzip", "deflate"):
            raise BodyRefused(f"unknown Content-Encoding {printable(self.coding)!r} refused")
        self._z: zlib._Decompress | None = None
        self._raw_deflate = False
        self._started = False
        if self.coding:
            self._z = self._new()

    def _new(self) -> zlib._Decompress:
        if self.coding == "deflate":
            return zlib.decompressobj(-zlib.MAX_WBITS if self._raw_deflate else zlib.MAX_WBITS)
        return zlib.decompressobj(zlib.MAX_WBITS | 16)

    def _take(self, data: bytes) -> None:
        self.total += len(data)
        if self.total > self.limit:
            raise BodyRefused(f"document larger than {self.limit} bytes (decoded)")
        self._out += data

    def feed(self, raw: bytes) -> None:
        if self._z is None:
            self._take(raw)
            return
        data = raw
        while data:
            room = self.limit + 1 - self.total
            try:
                chunk = self._z.decompress(data, room)
            except zlib.error as err:
                if self.coding == "deflate" and not self._started and not self._raw_deflate:
                    self._raw_deflate = True  # (servers that send raw deflate, as HTTP clients accept)
                    self._z = self._new()
                    continue
                raise BodyRefused(f"{self.coding} body undecodable: {err}") from err
            self._started = True
            self._take(chunk)
            if self._z.unconsumed_tail:
                data = self._z.unconsumed_tail
            elif self._z.eof and self._z.unused_data:
                data = self._z.unused_data  # another gzip member
                self._z = self._new()
            else:
                data = b""

    def finish(self) -> bytes:
        if self._z is not None and not self._z.eof and self._started:
            try:
                self._take(self._z.flush(self.limit + 1 - self.total))
            except zlib.error as err:
                raise BodyRefused(f"{self.coding} body undecodable: {err}") from err
        return bytes(self._out)
