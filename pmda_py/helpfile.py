"""Read help text files built by PCP's ``newhelp`` (``NAME.dir`` + ``NAME.pag``).

``NAME.dir`` holds native-endian 12-byte records ``(id, off_oneline,
off_text)``: a header (magic ``0x50635068`` "PcPh", version word
``0x3132xxxx``, entry count) then the entries, PMIDs first and indoms last
with bit 31 set (libpcp_pmda ``help.c``).  ``NAME.pag`` holds the
NUL-terminated texts at those offsets.  Every offset is bounds-checked; a
malformed file raises ValueError.  The files are read as regular files of at
most :data:`MAX_HELP_FILE` bytes each (a FIFO, a device or a bigger file is
refused with :class:`~pmda_py.safefile.FileRefused`, an OSError), so a help
file path cannot stall or swell the agent at start.
"""

from __future__ import annotations

import struct

import attrs

from pmda_py.pmapi import TextType
from pmda_py.safefile import read_regular

__all__ = ["MAX_HELP_FILE", "HelpFile"]

#: bytes a help file (``.dir`` or ``.pag``) may have (newhelp's output for
#: PCP's largest agents is a few hundred KB)
MAX_HELP_FILE = 64 << 20

_IDX = struct.Struct("=Iii")
_MAGIC = 0x50635068


@attrs.frozen
class HelpFile:
    """Help texts by id; indoms are keyed with bit 31 set, as newhelp does."""

    entries: dict[int, tuple[str, str]]

    @classmethod
    def from_bytes(cls, dir_data: bytes, pag_data: bytes) -> HelpFile:
        if len(dir_data) < _IDX.size:
            raise ValueError("help .dir file too short")
        magic, version, count = _IDX.unpack_from(dir_data, 0)
        if magic != _MAGIC or (version & 0xFFFF0000) != 0x31320000:
            raise ValueError("not a newhelp .dir file (bad magic or version)")
        if count < 0 or (count + 1) * _IDX.size > len(dir_data):
            raise ValueError(f"help .dir file claims {count} entries")
        entries: dict[int, tuple[str, str]] = {}
        for k in range(1, count + 1):
            ident, off1, off2 = _IDX.unpack_from(dir_data, k * _IDX.size)
            entries.setdefault(ident & 0xFFFFFFFF, (_cstr(pag_data, off1), _cstr(pag_data, off2)))
        return cls(entries)

    @classmethod
    def open(cls, base: str) -> HelpFile:
        """Read ``base.dir`` and ``base.pag`` (regular files of at most
        :data:`MAX_HELP_FILE` bytes, else :class:`~pmda_py.safefile.FileRefused`)."""
        dir_data = read_regular(f"{base}.dir", MAX_HELP_FILE, whole=True)
        pag_data = read_regular(f"{base}.pag", MAX_HELP_FILE, whole=True)
        return cls.from_bytes(dir_data, pag_data)

    def text(self, ident: int, type_: int) -> str | None:
        """One-line or long text of a PMID (``type_ & PM_TEXT_PMID``) or indom."""
        key = ident | 0x80000000 if type_ & TextType.INDOM else ident
        entry = self.entries.get(key)
        if entry is None:
            return None
        return entry[0] if type_ & TextType.ONELINE else entry[1]


def _cstr(data: bytes, off: int) -> str:
    if not 0 <= off < len(data):
        raise ValueError(f"help text offset {off} outside the .pag file")
    end = data.find(b"\0", off)
    if end < 0:
        raise ValueError(f"help text at {off} is not terminated")
    return data[off:end].decode("utf-8", "replace")
