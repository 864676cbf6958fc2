"""__pmParseLabels(): one label payload into a label set, as libpcp
``labels.c`` builds it from the jsonsl tokenizer's push/pop callbacks (see
:mod:`pmda_py.pcplabels.jsonsl`): the JSON text with whitespace removed,
one index entry per value found at a key's level, nested maps flattened into
COMPOUND labels whose full ``a.b.c`` name lives only in a side hash (the
index points at the innermost name), names sorted with ``qsort_r`` (glibc:
a merge sort) and duplicates refused.

Also the pieces the merge of a second payload shares (:mod:`.labelset`):
the index entry (:class:`Label`), the side hash (:class:`LabelHash`) and
the name comparison.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pmda_py.pcplabels.jsonsl import EINVAL, PUSH, T_HKEY, T_LIST, T_OBJECT, T_STRING, State, feed

__all__ = ["Label", "LabelHash", "Unsafe", "cstr", "name_of", "namecmp6", "parse_labels"]

PM_LABEL_COMPOUND = 0x40
PM_LABEL_OPTIONAL = 0x80
PM_LABEL_INSTANCES = 0x20
PM_MAXLABELS = 255
PM_MAXLABELJSONLEN = 65535
MAXLABELNAMELEN = 255
E2BIG = -7


class LabelHash:
    """__pmHashCtl: chained buckets, growth and walk order as hash.c has them
    (duplicate keys are possible; search finds the newest)."""

    def __init__(self) -> None:
        self.nodes = 0
        self.hsize = 0
        self.buckets: list[list[tuple[int, bytes]]] = []

    def add(self, key: int, data: bytes) -> None:
        self.nodes += 1
        if self.hsize == 0:
            self.hsize = 1
            self.buckets = [[]]
        elif self.nodes // 4 > self.hsize:
            old = self.buckets
            size = self.hsize * 2
            if size % 2:
                size += 1
            if size % 3:
                size += 2
            if size % 5:
                size += 2
            self.hsize = size
            self.buckets = [[] for _ in range(size)]
            for chain in reversed(old):
                for node in chain:  # each re-linked at the head of its new chain
                    self.buckets[node[0] % size].insert(0, node)
        self.buckets[key % self.hsize].insert(0, (key, data))

    def search(self, key: int) -> bytes | None:
        if self.hsize == 0:
            return None
        for k, data in self.buckets[key % self.hsize]:
            if k == key:
                return data
        return None

    def clear(self) -> None:
        self.hsize = 0
        self.buckets = []

    def duplicate(self) -> LabelHash:
        out = LabelHash()
        for chain in self.buckets:
            for key, data in chain:
                out.add(key, data)
        return out


@attrs.define
class Label:
    """pmLabel, with its bitfield widths applied on assignment."""

    name: int
    namelen: int
    flags: int
    value: int
    valuelen: int

    def __attrs_post_init__(self) -> None:
        self.name &= 0xFFFF
        self.namelen &= 0xFF
        self.flags &= 0xFF
        self.value &= 0xFFFF
        self.valuelen &= 0xFFFF


def cstr(buf: bytes, off: int) -> bytes | None:
    """The C string at ``buf + off`` (None: outside the text libpcp wrote)."""
    if off > len(buf):
        return None
    end = buf.find(b"\0", off)
    return buf[off:] if end < 0 else buf[off:end]


class Unsafe(Exception):
    """pmdammv reads or writes memory it does not own here."""


def name_of(lp: Label, json: bytes, lc: LabelHash | None) -> tuple[bytes, int]:
    """label_name_length(): the name (a C string from its start) and length."""
    if lp.flags & PM_LABEL_COMPOUND and lc is not None:
        full = lc.search(lp.name)
        if full is not None:
            return full, len(full)
    s = cstr(json, lp.name)
    if s is None:
        raise Unsafe("label name outside the JSON text")
    return s, lp.namelen


def _strncmp(a: bytes, b: bytes, n: int) -> int:
    x, y = a[:n], b[:n]
    return (x > y) - (x < y)


def namecmp6(ap: Label, a_s: bytes, ac: LabelHash | None, bp: Label, b_s: bytes, bc: LabelHash | None) -> int:
    """namecmp6(): two labels' names, each from its own text and hash."""
    if ap.namelen > bp.namelen:
        name, length = name_of(bp, b_s, bc)
        sts = _strncmp(name_of(ap, a_s, ac)[0], name, length)
        return sts if sts else 1
    if ap.namelen < bp.namelen:
        name, length = name_of(ap, a_s, ac)
        sts = _strncmp(name, name_of(bp, b_s, bc)[0], length)
        return sts if sts else -1
    name, length = name_of(ap, a_s, ac)
    return _strncmp(name, name_of(bp, b_s, bc)[0], length)


def _msort(items: list[Label], compare: Callable[[Label, Label], int]) -> list[Label]:
    """glibc's qsort_r for small arrays: a top-down merge sort (msort.c)."""
    n = len(items)
    if n <= 1:
        return items
    n1 = n // 2
    b1 = _msort(items[:n1], compare)
    b2 = _msort(items[n1:], compare)
    out: list[Label] = []
    i = j = 0
    while i < len(b1) and j < len(b2):
        if compare(b1[i], b2[j]) <= 0:
            out.append(b1[i])
            i += 1
        else:
            out.append(b2[j])
            j += 1
    out.extend(b1[i:])
    out.extend(b2[j:])
    return out


def _verify_label_name(name: bytes, nested: bool, relaxed: bool) -> int:
    """__pmVerifyLabelName(): negative refused, 1 a dotted (nested) name."""
    if not name:
        return EINVAL
    if len(name) >= MAXLABELNAMELEN:
        return E2BIG
    sts = 0
    rest = name
    if not relaxed:
        if not (0x41 <= name[0] <= 0x5A or 0x61 <= name[0] <= 0x7A):
            return EINVAL
        rest = name[1:]
    for c in rest:
        if 0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or c == 0x5F:
            continue
        if c == 0x2E and nested:
            sts = 1
            continue
        return EINVAL
    return sts


class _Parser:
    """parser_t and labels_token_callback(): the compacted text, the label
    index, the stack of enclosing map names; in relaxed mode (PCP 7.2+) a
    member with an invalid name is skipped, nested values included."""

    def __init__(self, s: bytes, flags: int, maxlabels: int, compound: LabelHash, relaxed: bool) -> None:
        self.s = s
        self.error = 0
        self.nlabels = 0
        self.maxlabels = maxlabels
        self.compound = compound
        self.labels: list[Label] = []
        self.out = bytearray()
        self.buflen = PM_MAXLABELJSONLEN
        self.comma = 0
        self.token: int | None = None
        self.array: int | None = None
        self.lists: list[int] = []  #: where each open list starts in the output (libpcp keeps only the last)
        self.name = 0
        self.namelen = 0
        self.namelevel = 0
        self.compound_style = False
        self.stackdepth = 0
        self.stack: bytearray | None = None  # raw memory: push_label_name writes past the NUL
        self.stacklen = 0
        self.labelflags = flags
        self.relaxed = relaxed
        self.skipping = 0
        self.skipped = 0
        self.rewind = (0, 0, 0)
        self.unsafe: list[str] = []

    def stash(self, data: bytes) -> None:
        if len(data) >= self.buflen:
            return
        self.out += data
        self.buflen -= len(data)

    def push_label_name(self) -> None:
        if self.name:
            this = self.s_name()
            size = self.namelen + 1
            if self.stack is None:
                self.stack = bytearray(this + b"\0")
            else:
                size += self.stacklen + 1
                # realloc to size, then ".name" written at stacklen, which
                # counts the NUL after a first name: "a\0.b" reads as "a"
                del self.stack[size:]
                self.stack += bytes(max(0, size - len(self.stack)))
                self.stack[self.stacklen : size] = b"." + this + b"\0"
            self.stacklen = size
            self.compound_style = True
            self.stackdepth += 1
        else:
            self.compound_style = False

    def s_name(self) -> bytes:
        return bytes(self.out[self.name : self.name + self.namelen])

    def c_stack(self) -> bytes:
        assert self.stack is not None
        return bytes(self.stack[: self.stack.index(0)])

    def pop_label_name(self) -> None:
        if self.stackdepth > 1:
            self.compound_style = True
            self.stackdepth -= 1
        else:
            self.compound_style = False
            self.stackdepth = 0
        if self.stack is None:
            return
        dot = self.c_stack().rfind(b".")
        if dot >= 0:
            self.stack[dot] = 0
            self.stacklen = dot
        else:
            self.stack = None
            self.stacklen = 0

    def add_label_value(self, valuelen: int, noop: bool) -> None:
        value = len(self.out) - valuelen
        if self.nlabels >= self.maxlabels:
            self.error = E2BIG
        else:
            if not noop and self.compound_style:
                # pmsprintf(stack, stacklen + 1 + namelen + 1, "%s.%.*s", ...)
                full = (self.c_stack() if self.stack is not None else b"(null)") + b"." + self.s_name()
                self.compound.add(self.name, full[: self.stacklen + self.namelen + 1])
            flags = self.labelflags | (PM_LABEL_COMPOUND if self.compound_style else 0)
            self.labels.append(Label(self.name, self.namelen, flags, value, valuelen))
            self.nlabels += 1
        self.name = self.namelen = 0

    def token_callback(self, action: int, state: State, at: int) -> None:
        t = state.type
        if action == PUSH:
            if t in (T_OBJECT, T_LIST):
                self._open(t, at)
            elif t == T_HKEY:
                self._key_begins(at)
            else:  # STRING, SPECIAL
                self._value_begins(at)
        elif t in (T_OBJECT, T_LIST):
            self._close(state, at)
        elif t == T_HKEY:
            self._key_ends(state, at)
        else:
            self._value_ends(state, at)

    def _open(self, t: int, at: int) -> None:
        if self.skipping:
            self.skipping += 1
            return
        if self.comma:
            self.stash(b",")
        if t == T_OBJECT:
            self.stash(b"{")
            self.push_label_name()
        else:
            self.lists.append(len(self.out))
            self.stash(b"[")
            self.array = at
        self.comma = 0

    def _close(self, state: State, at: int) -> None:
        if self.skipping:
            self.skipping -= 1
            if self.skipping == 1:
                self.skipping = 0
            return
        if state.type == T_OBJECT:
            self.stash(b"}")
            if self.namelevel == state.level and self.name != 0:
                self.add_label_value(2, True)
            self.pop_label_name()
        else:
            self.stash(b"]")
            start = self.lists.pop() if self.lists else len(self.out)
            if self.namelevel == state.level and self.name != 0:
                if self.array is None:
                    # libpcp: length = at - NULL + 1, the address of the byte
                    # in pmdammv's mapping of the file; we index the list's text
                    self.unsafe.append("a list value holding a list: pmdammv indexes it by a memory address")
                    self.add_label_value(len(self.out) - start, False)
                else:
                    self.add_label_value(at - self.array + 1, False)
            self.array = None
        self.comma = 1

    def _key_begins(self, at: int) -> None:
        if self.skipping:
            return
        self.rewind = (len(self.out), self.buflen, self.comma)
        if self.comma:
            self.stash(b",")
        self.token = at
        self.comma = 0

    def _key_ends(self, state: State, at: int) -> None:
        if self.skipping:
            return
        assert self.token is not None
        string = self.s[self.token + 1 : at]
        sts = _verify_label_name(string, bool(self.labelflags & PM_LABEL_COMPOUND), self.relaxed)
        if sts < 0:
            if self.relaxed:
                self.skipping = 1
                self.skipped += 1
                out_len, self.buflen, self.comma = self.rewind
                del self.out[out_len:]
                self.token = None
                return
            self.error = sts
        self.name = len(self.out) + 1
        if sts > 0:
            self.compound.add(self.name, string)
        self.namelen = len(string)
        self.namelevel = state.level
        self.stash(self.s[self.token : at])
        self.stash(b'":')
        self.token = None

    def _value_begins(self, at: int) -> None:
        if self.skipping:
            return
        if self.comma:
            self.stash(b",")
        self.token = at
        self.comma = 1

    def _value_ends(self, state: State, at: int) -> None:
        if self.skipping:
            if self.skipping == 1:
                self.skipping = 0
            self.token = None
            return
        assert self.token is not None
        length = at - self.token + (1 if state.type == T_STRING else 0)
        self.stash(self.s[self.token : self.token + length])
        if self.namelevel == state.level and self.name != 0:
            self.add_label_value(length, False)
        self.token = None


def parse_labels(
    s: bytes, flags: int, compound: LabelHash, *, maxlabels: int = PM_MAXLABELS, relaxed: bool = False
) -> tuple[int, bytes, list[Label], list[str]]:
    """__pmParseLabels(): (count or -errno, JSON text, sorted labels, unsafe notes)."""
    p = _Parser(s, flags, maxlabels, compound, relaxed)
    feed(s, p)
    if p.error:
        compound.clear()
        return p.error, b"", [], p.unsafe
    if p.nlabels == 0:
        compound.clear()
        return (EINVAL if relaxed and p.skipped else 0), b"", [], p.unsafe
    out = bytes(p.out)
    try:
        labels = _msort(p.labels, lambda a, b: namecmp6(a, out, compound, b, out, compound))
        for k in range(len(labels) - 1):
            if namecmp6(labels[k], out, compound, labels[k + 1], out, compound) == 0:
                compound.clear()
                return EINVAL, b"", [], p.unsafe
    except Unsafe as err:
        p.unsafe.append(str(err))
        labels = p.labels
    return len(labels), out, labels, p.unsafe
