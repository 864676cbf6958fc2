"""pmdaopenmetrics' persisted name tables, read without ``pickle``, sans-IO.

A name table file (``$PCP_VAR_DIR/config/pmda/144.N.py``) is what
pmdaopenmetrics writes with ``pickle.dump(names, f, protocol=0)`` followed
by ``pickle.dump(prefix_mode, f, protocol=0)``.  It is written the same way
here (so either agent reads the other's files), but read by
:func:`parse_names`, a reader of exactly that subset of protocol 0 (a list
of strings: ``( l p V a g .`` and ``I01``/``I00`` for the flag): no object
but a string or a list can be made, and the text it yields (memo references
``gN`` counted again) can never exceed the file's own size, so a small file
cannot unfold into a large table.

A name's number is its position.  A number whose name went unseen for long
is *reclaimed* (:meth:`NameTable.reclaim`): the name is replaced by a
placeholder (``"\\x00reclaimed N"``, which no document can produce) so
numbers are never given again to another name, and the table keeps only
what is live.
"""

from __future__ import annotations

import codecs

import attrs

__all__ = ["HOLE", "NameTable", "parse_names"]

#: the placeholder prefix of a reclaimed number's name
HOLE = "\x00reclaimed "


def _line(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.find(b"\n", pos)
    if end < 0:
        raise ValueError("truncated")
    return data[pos:end], end + 1


def parse_names(data: bytes, maxnum: int) -> tuple[list[str], bool]:
    """``(names, prefix_mode)`` of a name table file image.

    Raises:
        ValueError: anything but pmdaopenmetrics' own form (truncated,
            corrupt, other objects, more than ``maxnum + 1`` names, a name
            twice, or more text than the file holds).
    """
    budget = len(data)  # characters the names may total (a memo reference counts again)
    memo: dict[int, object] = {}
    stack: list[object] = []
    marks: list[int] = []
    result: list[object] = []
    pos = 0
    n = len(data)
    while len(result) < 2 and pos < n:
        op = data[pos : pos + 1]
        pos += 1
        if op == b"(":
            marks.append(len(stack))
        elif op == b"l":
            if not marks:
                raise ValueError("list without a mark")
            start = marks.pop()
            items = stack[start:]
            if len(items) > maxnum + 1:  # (a list made whole, with no appends to count it)
                raise ValueError(f"more than {maxnum + 1} names")
            del stack[start:]
            stack.append(items)
        elif op == b"]":
            stack.append([])
        elif op in (b"p", b"g"):
            arg, pos = _line(data, pos)
            if not arg.isdigit() or len(arg) > 12:
                raise ValueError("bad memo index")
            key = int(arg)
            if op == b"p":
                if not stack:
                    raise ValueError("memo of nothing")
                memo[key] = stack[-1]
            else:
                obj = memo.get(key)
                if not isinstance(obj, str):
                    raise ValueError("memo reference to something other than a name")
                budget -= len(obj)
                if budget < 0:
                    raise ValueError("more text than the file holds")
                stack.append(obj)
        elif op == b"V":
            arg, pos = _line(data, pos)
            try:
                text = codecs.decode(arg, "raw_unicode_escape")
            except UnicodeDecodeError as err:
                raise ValueError(f"bad name: {err.reason}") from err
            stack.append(text)
        elif op in (b"a", b"e"):
            start = marks.pop() if op == b"e" and marks else len(stack) - 1
            if op == b"e" and start < 1:
                raise ValueError("appends without a list")
            lst = stack[start - 1] if start >= 1 else None
            if not isinstance(lst, list):
                raise ValueError("append to something other than a list")
            new = stack[start:]
            del stack[start:]
            if not all(isinstance(x, str) for x in new):
                raise ValueError("a name that is not a string")
            lst.extend(new)
            if len(lst) > maxnum + 1:
                raise ValueError(f"more than {maxnum + 1} names")
        elif op == b"I":
            arg, pos = _line(data, pos)
            if arg not in (b"00", b"01"):
                raise ValueError("an integer where a flag was expected")
            stack.append(arg == b"01")
        elif op == b".":
            if len(stack) != 1 or marks:
                raise ValueError("bad end of pickle")
            result.append(stack.pop())
            memo.clear()
        else:
            raise ValueError(f"opcode {op!r} refused")
    if not result:
        raise ValueError("truncated")
    names = result[0]
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise ValueError("not a list of names")
    if len(names) > maxnum + 1:
        raise ValueError(f"more than {maxnum + 1} names")
    if len(set(names)) != len(names):
        raise ValueError("a name given twice")
    return list(names), (len(result) > 1 and result[1] is True)


@attrs.define(eq=False)
class NameTable:
    """pmdaopenmetrics' PersistentNameTable: names get numbers in order of
    first sight, never given to another name (a reclaimed one keeps a
    placeholder).

    The name -> number index is made on the first lookup: the daemon's
    mirror of a source (names, instances) never looks a name up, and keeps
    only the list."""

    maxnum: int
    names: list[str] = attrs.field(factory=list)
    prefix_mode: bool = False
    dirty: bool = False
    frozen: bool = False  #: never saved (its file could not be read, nor moved aside)
    _index: dict[str, int] | None = attrs.field(default=None, init=False, repr=False)
    live: int = attrs.field(default=0, init=False)  #: names not reclaimed
    nbytes: int = attrs.field(default=0, init=False)  #: their characters

    def __attrs_post_init__(self) -> None:
        for n in self.names:
            if not n.startswith(HOLE):
                self.live += 1
                self.nbytes += len(n)

    def _by_name(self) -> dict[str, int]:
        index = self._index
        if index is None:
            index = self._index = {n: i for i, n in enumerate(self.names) if not n.startswith(HOLE)}
        return index

    def lookup(self, name: str) -> int:
        """The number of ``name``, assigned if new.

        Raises:
            ValueError: more than ``maxnum + 1`` names.
        """
        index = self._by_name()
        num = index.get(name)
        if num is not None:
            return num
        num = len(self.names)
        if num > self.maxnum:
            raise ValueError(f"too many ({num}) different names")
        self.names.append(name)
        index[name] = num
        self.live += 1
        self.nbytes += len(name)
        self.dirty = True
        return num

    def get(self, name: str) -> int | None:
        return self._by_name().get(name)

    def numbers(self) -> list[int]:
        """The live numbers, ascending."""
        return [i for i, n in enumerate(self.names) if not n.startswith(HOLE)]

    def is_live(self, num: int) -> bool:
        return 0 <= num < len(self.names) and not self.names[num].startswith(HOLE)

    def reclaim(self, num: int) -> int:
        """Forget the name of ``num`` (its number is not given again); its length."""
        if not self.is_live(num):
            return 0
        name = self.names[num]
        self._by_name().pop(name, None)
        self.names[num] = f"{HOLE}{num}"
        self.live -= 1
        self.nbytes -= len(name)
        self.dirty = True
        return len(name)

    def instance_name(self, num: int) -> str:
        """As the indom shows it (``"N name"`` in prefix mode)."""
        return f"{num} {self.names[num]}" if self.prefix_mode else self.names[num]

    def instances(self) -> dict[int, str]:
        """The live numbers and their names as the indom shows them, ascending."""
        if self.prefix_mode:
            return {i: f"{i} {n}" for i, n in enumerate(self.names) if not n.startswith(HOLE)}
        return {i: n for i, n in enumerate(self.names) if not n.startswith(HOLE)}

    @classmethod
    def loads(cls, data: bytes, maxnum: int) -> NameTable:
        """Read a saved table (a bad file raises ValueError)."""
        try:
            names, prefix = parse_names(data, maxnum)
        except ValueError as err:
            raise ValueError(f"unreadable name table: {err}") from err
        return cls(maxnum, names, prefix)

    def dumps(self) -> bytes:
        """The file image, as pmdaopenmetrics writes it."""
        import pickle

        return pickle.dumps(self.names, protocol=0) + pickle.dumps(self.prefix_mode, protocol=0)
