"""libpcp's label parser, as pmdammv runs it on MMV label payloads.

pmdammv hands every label record's payload to ``__pmAddLabels`` (libpcp
``labels.c``), which feeds it through the jsonsl streaming parser
(``vendor/github.com/mnunberg/jsonsl``) and builds the label set from the
parser's push/pop callbacks: the JSON text with whitespace removed, one
index entry per value found at a key's level, nested maps flattened into
COMPOUND labels whose full ``a.b.c`` name lives only in a side hash (the
index points at the innermost name), names sorted with ``qsort_r`` (glibc:
a merge sort) and duplicates refused; a second payload for the same subject
is merged into the first (``__pmMergeLabelSets``), which rewrites the text
as ``"full.name":value`` pairs.  Every step, quirk included, is transcribed
here, sans-IO, so the drop-in replies byte for byte what pmdammv replies:

* values of a key holding an array of objects "leak" the objects' members as
  labels; members after a nested map keep their place; a list value's index
  entry spans the *input* text (whitespace included) but points into the
  compacted output;
* nothing is checked once the top-level object ends early or the text is cut
  (the labels found so far are kept, the text may be invalid JSON);
* PCP 7.2+ (``relaxed``) skips a member with an invalid name instead of
  refusing the payload, and accepts names starting with a digit or ``_``.

Where pmdammv's own result depends on memory it does not own (a list value
holding a list, a merge copying a value from past its text, an instance label
count beyond the labels found, a NULL label array), :class:`PcpLabelSet`
carries an ``unsafe`` note and what libpcp meant (see docs/mmv.md);
``problems()`` names what pmdammv sends that clients cannot use as is.
"""

from __future__ import annotations

import json as _json
from collections.abc import Callable, Sequence

import attrs

__all__ = ["PcpLabelSet", "add_labels", "level_labels", "instance_labels", "parse_labels"]

PM_LABEL_COMPOUND = 0x40
PM_LABEL_OPTIONAL = 0x80
PM_LABEL_INSTANCES = 0x20
PM_MAXLABELS = 255
PM_MAXLABELJSONLEN = 65535
MAXLABELNAMELEN = 255
MAX_RECURSION_DEPTH = 256
MAX_DESCENT_LEVEL = 64
EINVAL = -22
E2BIG = -7

# ------------------------------------------------------------------ jsonsl

_STRINGY = 0xFFFF00
T_ROOT = 0
T_STRING = ord('"') | _STRINGY
T_HKEY = ord("#") | _STRINGY
T_OBJECT = ord("{")
T_LIST = ord("[")
T_SPECIAL = ord("^")

S_SIGNED = 1 << 0
S_UNSIGNED = 1 << 1
S_TRUE = 1 << 2
S_FALSE = 1 << 3
S_NULL = 1 << 4
S_FLOAT = 1 << 5
S_EXPONENT = 1 << 6
S_INF = 1 << 9
S_ZERO = 1 << 11 | S_UNSIGNED
S_DASH = 1 << 12
S_NUMERIC = S_SIGNED | S_UNSIGNED

_SPECIAL = [0] * 256
_SPECIAL[ord("-")] = S_DASH
_SPECIAL[ord("0")] = S_ZERO
for _c in b"123456789":
    _SPECIAL[_c] = S_UNSIGNED
_SPECIAL[ord("f")] = S_FALSE
_SPECIAL[ord("n")] = S_NULL  # JSONSL_PARSE_NAN is not defined in PCP builds
_SPECIAL[ord("t")] = S_TRUE
_SPECIAL_END = frozenset(b'\t\n\r ",:[\\]{}')
_WHITESPACE = frozenset(b" \t\n\r")
_NO_PASSTHROUGH = frozenset(range(0x14)) | {ord('"'), ord("\\")}
_ESCAPES = frozenset(b'"/\\bfnrtu')
_DIGITS = frozenset(b"0123456789")
_LITERALS = {S_TRUE: b"true\0", S_FALSE: b"false\0", S_NULL: b"null\0"}

PUSH, POP = 1, 2


@attrs.define
class _State:
    level: int
    type: int = T_ROOT
    nelem: int = 0
    special_flags: int = 0
    nescapes: int = 0
    pos_begin: int = 0


def _jsonsl_feed(s: bytes, callback: _Parser) -> None:
    """jsonsl_feed() over the whole of ``s`` with every callback enabled,
    ``max_callback_level`` 64 and 256 levels; the error callback stops it."""
    stack = [_State(0)]  # jsonsl_new() callocs 256 levels: grown on demand here
    level = 0
    tok_last = 0
    can_insert = True
    expecting = 0
    in_escape = False
    n = len(s)
    i = 0

    def cb(action: int, st: _State, at: int) -> None:
        if st.level < MAX_DESCENT_LEVEL:
            callback.token_callback(action, st, at)

    def error() -> None:
        callback.error = EINVAL

    def push(level: int, at: int, new_type: int) -> _State | None:
        """jsonsl's STACK_PUSH: the state one level down, begun at ``at``
        as ``new_type``; None past the recursion limit (an error)."""
        if level >= MAX_RECURSION_DEPTH - 1:
            return None
        level += 1
        if level == len(stack):
            stack.append(_State(level))
        pushed = stack[level]
        pushed.pos_begin = at
        pushed.type = new_type
        return pushed

    while i < n:
        c = s[i]
        state = stack[level]
        stype = state.type
        goto = ""
        if stype & _STRINGY:
            if in_escape:
                in_escape = False
                if c not in _ESCAPES:
                    return error()
                i += 1
                continue
            while i < n and s[i] not in _NO_PASSTHROUGH:
                i += 1
            if i == n:
                return
            c = s[i]
            if c == 0x22:
                goto = "quote"
            elif c == 0x5C:
                goto = "escape"
            else:
                return error()
        elif stype == T_SPECIAL:
            flags = state.special_flags
            numeric = False
            if flags in (S_UNSIGNED, S_SIGNED):
                while i < n and s[i] in _DIGITS:
                    i += 1
                if i == n:
                    return
                c = s[i]
                numeric = True
            elif flags == S_DASH:
                if c not in _DIGITS:
                    return error()
                state.special_flags = S_ZERO | S_SIGNED if c == 0x30 else S_SIGNED
                i += 1
                continue
            elif flags == S_ZERO:
                if c in _DIGITS:
                    return error()
                state.special_flags = S_UNSIGNED
                numeric = True
            flags = state.special_flags
            pop = False
            if numeric or (flags & S_NUMERIC and not flags & S_INF):
                if c in _DIGITS:
                    tok_last = 0x31
                    i += 1
                    continue
                if c == 0x2E:
                    if flags & S_FLOAT:
                        return error()
                    state.special_flags |= S_FLOAT
                    tok_last = 0x2E
                    i += 1
                    continue
                if c in (0x65, 0x45):
                    if flags & S_EXPONENT:
                        return error()
                    state.special_flags |= S_EXPONENT
                    tok_last = 0x65
                    i += 1
                    continue
                if c in (0x2D, 0x2B):
                    if tok_last != 0x65:
                        return error()
                    tok_last = 0x2D
                    i += 1
                    continue
                if c not in _SPECIAL_END:
                    return error()
                pop = True
            if not pop and c not in _SPECIAL_END:
                state.nescapes += 1
                lit = _LITERALS.get(flags)
                if lit is not None:
                    k = i - state.pos_begin
                    if k >= len(lit) or c != lit[k]:
                        return error()
                i += 1
                continue
            # GT_SPECIAL_POP
            can_insert = False
            flags = state.special_flags
            if flags in (S_UNSIGNED, S_SIGNED):
                pass
            elif flags in (S_ZERO, S_ZERO | S_SIGNED):
                state.special_flags = S_UNSIGNED
            elif flags == S_DASH:
                return error()
            elif flags & S_NUMERIC:
                if tok_last != 0x31:
                    return error()
            elif flags in (S_TRUE, S_NULL):
                if state.nescapes != 4:
                    return error()
            elif flags == S_FALSE and state.nescapes != 5:
                return error()
            cb(POP, state, i)
            if callback.stop:
                return
            state.nescapes = 0
            level -= 1
            state = stack[level]
            expecting = 0x2C
            tok_last = 0
            if c in _WHITESPACE:
                i += 1
                continue
            goto = "structural"
        elif c in _WHITESPACE:
            i += 1
            continue
        elif _SPECIAL[c]:
            goto = "special"

        if not goto and c == 0x22:
            goto = "quote"
        elif not goto and c == 0x5C:
            goto = "escape"
        if goto == "quote":
            can_insert = False
            if stype in (T_STRING, T_HKEY):
                cb(POP, state, i)
                state.nescapes = 0
                level -= 1
                i += 1
                continue
            if stype == T_OBJECT:
                state.nelem += 1
                if (state.nelem - 1) % 2:
                    if tok_last != 0x3A:
                        return error()
                    expecting = 0x2C
                    tok_last = 0
                    new_type = T_STRING
                else:
                    if expecting != 0x22:
                        return error()
                    tok_last = 0
                    expecting = 0x3A
                    new_type = T_HKEY
            elif stype == T_LIST:
                state.nelem += 1
                expecting = 0x2C
                tok_last = 0
                new_type = T_STRING
            else:
                return error()
            pushed = push(level, i, new_type)
            if pushed is None:
                return error()
            state, level = pushed, pushed.level
            cb(PUSH, state, i)
            i += 1
            continue
        if goto == "escape":
            if not state.type & _STRINGY:
                return error()
            state.nescapes += 1
            in_escape = True
            i += 1
            continue
        if goto != "special":
            # GT_STRUCTURAL_TOKEN
            if c == 0x3A:
                if expecting != c:
                    return error()
                tok_last = 0x3A
                can_insert = True
                expecting = 0x22
                i += 1
                continue
            if c == 0x2C:
                if expecting != c:
                    return error()
                if state.type != T_OBJECT:
                    can_insert = True
                tok_last = 0x2C
                expecting = 0x22
                i += 1
                continue
            if c in (0x7B, 0x5B):
                if not can_insert:
                    return error()
                if state.nelem % 2 == 0 and state.type == T_OBJECT:
                    return error()
                state.nelem += 1
                pushed = push(level, i, c)
                if pushed is None:
                    return error()
                state, level = pushed, pushed.level
                state.nelem = 0
                can_insert = True
                if c == 0x7B:
                    expecting = 0x22
                cb(PUSH, state, i)
                tok_last = 0
                i += 1
                continue
            if c in (0x7D, 0x5D):
                if tok_last == 0x2C:
                    return error()
                can_insert = False
                level -= 1
                expecting = 0x2C
                tok_last = 0
                if c == 0x5D:
                    if state.type != T_LIST:
                        return error()
                else:
                    if state.type != T_OBJECT:
                        return error()
                    if state.nelem and state.nelem % 2 != 0:
                        return error()
                cb(POP, state, i)
                if level < 0:  # unreachable: the root is never a container
                    return error()
                i += 1
                continue
        # GT_SPECIAL_BEGIN
        if state.type != T_SPECIAL:
            flags = _SPECIAL[c]
            if not flags:
                return error()
            if state.nelem % 2 == 0 and state.type == T_OBJECT:
                return error()
            state.nelem += 1
            if not can_insert:
                return error()
            pushed = push(level, i, T_SPECIAL)
            if pushed is None:
                return error()
            state, level = pushed, pushed.level
            state.special_flags = flags
            state.nescapes = 1
            tok_last = 0x31 if flags == S_UNSIGNED else 0x2D
            cb(PUSH, state, i)
        i += 1


# ------------------------------------------------------------------ hash


class _Hash:
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

    def duplicate(self) -> _Hash:
        out = _Hash()
        for chain in self.buckets:
            for key, data in chain:
                out.add(key, data)
        return out


# ------------------------------------------------------------------ labels


@attrs.define
class _Label:
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


def _cstr(buf: bytes, off: int) -> bytes | None:
    """The C string at ``buf + off`` (None: outside the text libpcp wrote)."""
    if off > len(buf):
        return None
    end = buf.find(b"\0", off)
    return buf[off:] if end < 0 else buf[off:end]


class _Unsafe(Exception):
    """pmdammv reads or writes memory it does not own here."""


def _name_of(lp: _Label, json: bytes, lc: _Hash | None) -> tuple[bytes, int]:
    """label_name_length(): the name (a C string from its start) and length."""
    if lp.flags & PM_LABEL_COMPOUND and lc is not None:
        full = lc.search(lp.name)
        if full is not None:
            return full, len(full)
    s = _cstr(json, lp.name)
    if s is None:
        raise _Unsafe("label name outside the JSON text")
    return s, lp.namelen


def _strncmp(a: bytes, b: bytes, n: int) -> int:
    x, y = a[:n], b[:n]
    return (x > y) - (x < y)


def _namecmp6(ap: _Label, a_s: bytes, ac: _Hash | None, bp: _Label, b_s: bytes, bc: _Hash | None) -> int:
    if ap.namelen > bp.namelen:
        name, length = _name_of(bp, b_s, bc)
        sts = _strncmp(_name_of(ap, a_s, ac)[0], name, length)
        return sts if sts else 1
    if ap.namelen < bp.namelen:
        name, length = _name_of(ap, a_s, ac)
        sts = _strncmp(name, _name_of(bp, b_s, bc)[0], length)
        return sts if sts else -1
    name, length = _name_of(ap, a_s, ac)
    return _strncmp(name, _name_of(bp, b_s, bc)[0], length)


def _msort(items: list[_Label], compare: Callable[[_Label, _Label], int]) -> list[_Label]:
    """glibc's qsort_r for small arrays: a top-down merge sort (msort.c)."""
    n = len(items)
    if n <= 1:
        return items
    n1 = n // 2
    b1 = _msort(items[:n1], compare)
    b2 = _msort(items[n1:], compare)
    out: list[_Label] = []
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
    """parser_t and labels_token_callback()."""

    def __init__(self, s: bytes, flags: int, maxlabels: int, compound: _Hash, relaxed: bool) -> None:
        self.s = s
        self.error = 0
        self.stop = False
        self.nlabels = 0
        self.maxlabels = maxlabels
        self.compound = compound
        self.labels: list[_Label] = []
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
            self.labels.append(_Label(self.name, self.namelen, flags, value, valuelen))
            self.nlabels += 1
        self.name = self.namelen = 0

    def token_callback(self, action: int, state: _State, at: int) -> None:
        t = state.type
        if action == PUSH:
            if t in (T_OBJECT, T_LIST):
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
            elif t == T_HKEY:
                if self.skipping:
                    return
                self.rewind = (len(self.out), self.buflen, self.comma)
                if self.comma:
                    self.stash(b",")
                self.token = at
                self.comma = 0
            else:  # STRING, SPECIAL
                if self.skipping:
                    return
                if self.comma:
                    self.stash(b",")
                self.token = at
                self.comma = 1
            return
        # POP
        if t == T_OBJECT:
            if self.skipping:
                self.skipping -= 1
                if self.skipping == 1:
                    self.skipping = 0
                return
            self.stash(b"}")
            if self.namelevel == state.level and self.name != 0:
                self.add_label_value(2, True)
            self.pop_label_name()
            self.comma = 1
        elif t == T_LIST:
            if self.skipping:
                self.skipping -= 1
                if self.skipping == 1:
                    self.skipping = 0
                return
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
        elif t == T_HKEY:
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
        else:  # STRING, SPECIAL
            if self.skipping:
                if self.skipping == 1:
                    self.skipping = 0
                self.token = None
                return
            assert self.token is not None
            length = at - self.token + (1 if t == T_STRING else 0)
            self.stash(self.s[self.token : self.token + length])
            if self.namelevel == state.level and self.name != 0:
                self.add_label_value(length, False)
            self.token = None


def parse_labels(
    s: bytes, flags: int, compound: _Hash, *, maxlabels: int = PM_MAXLABELS, relaxed: bool = False
) -> tuple[int, bytes, list[_Label], list[str]]:
    """__pmParseLabels(): (count or -errno, JSON text, sorted labels, unsafe notes)."""
    p = _Parser(s, flags, maxlabels, compound, relaxed)
    _jsonsl_feed(s, p)
    if p.error:
        compound.clear()
        return p.error, b"", [], p.unsafe
    if p.nlabels == 0:
        compound.clear()
        return (EINVAL if relaxed and p.skipped else 0), b"", [], p.unsafe
    out = bytes(p.out)
    try:
        labels = _msort(p.labels, lambda a, b: _namecmp6(a, out, compound, b, out, compound))
        for k in range(len(labels) - 1):
            if _namecmp6(labels[k], out, compound, labels[k + 1], out, compound) == 0:
                compound.clear()
                return EINVAL, b"", [], p.unsafe
    except _Unsafe as err:
        p.unsafe.append(str(err))
        labels = p.labels
    return len(labels), out, labels, p.unsafe


def _stash_label(
    lp: _Label, json: bytes, lc: _Hash | None, out: bytearray, olabels: list[_Label], unsafe: list[str]
) -> int:
    name, namelen = _name_of(lp, json, lc)
    if namelen + 2 + 1 + lp.valuelen + 1 >= PM_MAXLABELJSONLEN - len(out):
        return E2BIG
    start = len(out)
    if lp.valuelen:
        value = _cstr(json, lp.value)
        if value is None:
            # libpcp copies from memory past the text (a value offset that
            # wrapped below 0): we copy nothing, and say so
            unsafe.append("a merged label's value lies past its text: pmdammv copies memory it does not own")
            value = b""
        out += b'"' + name[:namelen] + b'":' + value[: lp.valuelen] + b","
        valuelen = lp.valuelen
    else:
        out += b'"' + name[:namelen] + b'":null,'
        valuelen = 4
    olabels.append(_Label(start + 1, namelen, lp.flags, start + 1 + namelen + 2, valuelen))
    return 0


def _merge(
    a: list[_Label],
    abuf: bytes,
    ac: _Hash | None,
    b: list[_Label],
    bbuf: bytes,
    bc: _Hash | None,
    unsafe: list[str],
) -> tuple[int, bytes, list[_Label]]:
    """__pmMergeLabelSets() with no filter: (length or -errno, text, labels)."""
    out = bytearray(b"{")
    olabels: list[_Label] = []
    na, nb = len(a), len(b)
    i = j = 0
    while True:
        # an a-label before the current b-label (or after the last), unless
        # the previous b-label has its name
        if i < na and (j >= nb or _namecmp6(a[i], abuf, ac, b[j], bbuf, bc) < 0):
            if j and _namecmp6(a[i], abuf, ac, b[j - 1], bbuf, bc) == 0:
                i += 1
            else:
                if _stash_label(a[i], abuf, ac, out, olabels, unsafe) < 0:
                    return E2BIG, b"", []
                i += 1
        if j < nb and (i >= na or _namecmp6(a[i], abuf, ac, b[j], bbuf, bc) >= 0):
            if _stash_label(b[j], bbuf, bc, out, olabels, unsafe) < 0:
                return E2BIG, b"", []
            j += 1
        if not (i < na or j < nb):
            break
    if na or nb:
        del out[-1:]
    out += b"}"
    return len(out), bytes(out), olabels


@attrs.define
class _LabelSet:
    """pmLabelSet as __pmAddLabels keeps it."""

    nlabels: int = 0
    json: bytes = b""
    labels: list[_Label] = attrs.field(factory=list)
    hash: _Hash | None = None
    unsafe: list[str] = attrs.field(factory=list)


def add_labels(
    lsp: _LabelSet | None, extras: bytes, flags: int, *, relaxed: bool = False
) -> tuple[_LabelSet | None, int]:
    """__pmAddLabels(): parse ``extras`` into a new set, or merge it into ``lsp``."""
    if len(extras) + 1 >= PM_MAXLABELJSONLEN:
        return lsp, E2BIG
    compound = _Hash()
    sts, buffer, inp, unsafe = parse_labels(extras, flags, compound, relaxed=relaxed)
    if sts < 0:
        if lsp is not None:
            lsp.unsafe += unsafe
        return lsp, sts
    if lsp is not None:
        try:
            size, result, output = _merge(lsp.labels, lsp.json, lsp.hash, inp, buffer, compound, unsafe)
        except _Unsafe as err:
            unsafe.append(str(err))
            size, result, output = len(lsp.json), lsp.json, lsp.labels  # what libpcp meant is unknowable
        compound.clear()
        if size < 0:
            return lsp, size
        if size >= PM_MAXLABELJSONLEN:
            return lsp, E2BIG
        if len(output) > PM_MAXLABELS:
            unsafe.append(f"{len(output)} merged labels overflow libpcp's array of {PM_MAXLABELS}")
        lsp.nlabels, lsp.json, lsp.labels = len(output), result, output
        lsp.unsafe += unsafe
        return lsp, len(output)
    new = _LabelSet(sts, buffer, inp, None, unsafe)
    if compound.hsize > 0 and compound.nodes > 0:
        new.hash = compound.duplicate()
    return new, sts


@attrs.frozen
class PcpLabelSet:
    """One label set as pmdammv sends it: the JSON text (``jsonlen`` bytes)
    and the index entries ``(name, namelen, flags, value, valuelen)``.
    ``unsafe`` says where pmdammv itself relies on memory it does not own
    (the set then holds what libpcp meant)."""

    json: bytes
    labels: tuple[tuple[int, int, int, int, int], ...]
    unsafe: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """What pmdammv sends here that a client cannot use as is."""
        out: list[str] = []
        if self.json:
            try:
                _json.loads(self.json.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                out.append(f"label text {self.json[:80]!r} is not valid JSON")
        for name, namelen, _, value, valuelen in self.labels:
            if name + namelen > len(self.json) or value + valuelen > len(self.json):
                out.append("a label index entry reaches past the JSON text")
                break
        return out


def _export(lsp: _LabelSet, count: int, flags: int, unsafe: list[str]) -> PcpLabelSet:
    labels = [(lb.name, lb.namelen, (lb.flags | flags) & 0xFF, lb.value, lb.valuelen) for lb in lsp.labels[:count]]
    return PcpLabelSet(lsp.json, tuple(labels), tuple(dict.fromkeys(unsafe)))


def level_labels(payloads: Sequence[tuple[bytes, int]], level: int, *, relaxed: bool = False) -> PcpLabelSet | None:
    """mmv_label_lookup() then pmdaLabel() for a DOMAIN/INDOM/CLUSTER/ITEM
    request: the payloads (with their record flags) in pmdammv's order; None
    when pmdammv sends no set."""
    lsp: _LabelSet | None = None
    for payload, flags in payloads:
        lsp, _ = add_labels(lsp, payload, flags, relaxed=relaxed)
    if lsp is None:
        return None
    level &= ~(PM_LABEL_COMPOUND | PM_LABEL_OPTIONAL)
    return _export(lsp, lsp.nlabels, level, list(lsp.unsafe))


def instance_labels(payloads: Sequence[tuple[bytes, int]], *, relaxed: bool = False) -> PcpLabelSet:
    """mmv_labelCallBack() then pmdaLabel() for one instance: the set's label
    count is the number of payloads libpcp accepted, not of labels."""
    lsp = _LabelSet()
    count = 0
    for payload, flags in payloads:
        lsp2, sts = add_labels(lsp, payload, flags, relaxed=relaxed)
        assert lsp2 is not None
        lsp = lsp2
        if sts >= 0:
            count += 1
    unsafe = list(lsp.unsafe)
    if count > len(lsp.labels):
        unsafe.append(
            f"{count} payloads accepted but {len(lsp.labels)} labels: pmdammv "
            + ("dereferences a NULL label array" if not lsp.labels else "reads past its label array")
        )
        count = len(lsp.labels)
    if count == 0:
        return PcpLabelSet(lsp.json, (), tuple(unsafe))
    return _export(lsp, count, PM_LABEL_INSTANCES, unsafe)
