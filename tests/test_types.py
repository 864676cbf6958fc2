"""The one type model (:data:`pmda_py.pmapi.TYPES`) is self-consistent:
every code packs exactly its size, an integer type's range is what its
code can hold (one past either end cannot be packed), and every array code
it accepts holds values of the type's size or more of the same kind."""

from __future__ import annotations

import struct
from array import array

import pytest

from pmda_py.pmapi import TYPES, PmType


@pytest.mark.parametrize("t", list(TYPES), ids=lambda t: t.name)
def test_type_info_agrees_with_struct(t: PmType) -> None:
    info = TYPES[t]
    if info.form == "var":
        assert info.code == "" and info.size == 0 and info.low is None
        return
    assert struct.calcsize("=" + info.code) == info.size
    assert info.form == ("insitu" if info.size == 4 and info.integer else "fixed")
    assert info.code in info.array_codes
    for code in info.array_codes:
        assert array(code).itemsize >= info.size
    if info.integer:
        assert info.low is not None and info.high is not None
        struct.pack("=" + info.code, info.low)
        struct.pack("=" + info.code, info.high)
        for outside in (info.low - 1, info.high + 1):
            with pytest.raises(struct.error):
                struct.pack("=" + info.code, outside)
    else:
        assert float in info.python


def test_every_value_type_is_described() -> None:
    assert set(TYPES) == set(PmType) - {PmType.NOSUPPORT, PmType.UNKNOWN}
