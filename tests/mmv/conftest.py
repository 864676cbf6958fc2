"""The MMV table freezes what exists after its scans out of the cyclic
collector (``gc.freeze``, see pmda_py.mmv.scanner); in the test process
that would hide objects from tools that look at referrers (hypothesis does):
each test gives them back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _unfreeze_after() -> Iterator[None]:
    yield
    gc.unfreeze()
