"""The one cache of replies: DESC, TEXT, LABEL and INSTANCE replies
remembered by their request's bytes.

One staleness rule: a remembered reply stands until the index changes (a
table's ``generation`` moved: the dispatcher then clears the cache), and
an INSTANCE reply also only while its indom's ``version`` (moved by every
new ``instances`` map: the map itself is read-only) is the one it was
built from.  Which
replies may be remembered at all is decided in :mod:`.meta`
(:meth:`~pmda_py.dispatch.meta.MetaRequests.remember`).

Beside them, the encoded instance list of an indom whose table refreshes
it (:meth:`~pmda_py.table.Table.refresh_instances`) is kept by indom, and
reused while the indom's ``version`` is the one it was built from.
"""

from __future__ import annotations

from typing import Final

import attrs

from pmda_py.session import MEMO_TYPES
from pmda_py.table import InDom
from pmda_py.wire import EncodedPdu

__all__ = ["ReplyCache"]

#: remembered replies per request type (bounded whatever clients ask: TEXT of any ident, say)
LIMIT: Final = 1 << 16


@attrs.frozen
class _Entry:
    """A remembered reply (its bytes, ``from`` 0), and for INSTANCE the
    indom and the version of its map when the reply was built."""

    reply: EncodedPdu
    indom: InDom | None = None
    version: int = 0

    def fresh(self) -> bool:
        ind = self.indom
        return ind is None or ind.version == self.version


class ReplyCache:
    """Replies by request type and request bytes (after the header)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._by_type: dict[int, dict[bytes, _Entry]] = {t: {} for t in MEMO_TYPES}
        #: whether replies are remembered (off: always built)
        self.enabled = True
        #: requests answered from here
        self.hits = 0
        #: indom id -> (the indom version an instance list was built from, its bytes)
        self._listings: dict[int, tuple[int, bytes]] = {}

    def get(self, pdu_type: int, key: bytes | None) -> EncodedPdu | None:
        """The reply remembered for this request, if it is still fresh."""
        if key is None:
            return None
        memo = self._by_type.get(pdu_type)
        if memo is None:
            return None
        entry = memo.get(key)
        if entry is None or not entry.fresh():
            return None
        self.hits += 1
        return entry.reply

    def put(self, pdu_type: int, key: bytes, data: bytes, indom: InDom | None = None) -> None:
        memo = self._by_type[pdu_type]
        if len(memo) >= self.limit:
            memo.clear()
        # (typed by the request: the bytes may be an ERROR's, PM_ERR_TEXT)
        reply = EncodedPdu(pdu_type, data)
        if indom is None:
            memo[key] = _Entry(reply)
        else:
            memo[key] = _Entry(reply, indom, indom.version)

    def listing(self, indom: InDom) -> bytes | None:
        """The INSTANCE reply listing every instance of ``indom``, if its
        map is the one it was built from."""
        kept = self._listings.get(indom.id)
        if kept is None or kept[0] != indom.version:
            return None
        return kept[1]

    def put_listing(self, indom: InDom, data: bytes) -> None:
        self._listings[indom.id] = (indom.version, data)

    def clear(self) -> None:
        """Forget the replies remembered by request (the index changed)."""
        for memo in self._by_type.values():
            memo.clear()
