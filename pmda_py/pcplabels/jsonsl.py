"""The jsonsl streaming tokenizer (``vendor/github.com/mnunberg/jsonsl``) as
libpcp's label parser runs it: every callback enabled, callbacks only above
:data:`MAX_DESCENT_LEVEL`, :data:`MAX_RECURSION_DEPTH` levels, and the error
callback stopping the feed with ``EINVAL``.

:func:`feed` walks the text once and tells a :class:`TokenSink` where each
string, key, literal, number, object and list begins (``PUSH``) and ends
(``POP``).  jsonsl is lenient where libpcp relies on it: a text cut short
simply ends the feed (no error), and what follows the top-level value's end
is fed like the rest.
"""

from __future__ import annotations

from typing import NoReturn, Protocol

import attrs

__all__ = ["EINVAL", "POP", "PUSH", "T_HKEY", "T_LIST", "T_OBJECT", "T_STRING", "State", "TokenSink", "feed"]

MAX_RECURSION_DEPTH = 256
MAX_DESCENT_LEVEL = 64
EINVAL = -22

PUSH, POP = 1, 2

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

# the characters, and jsonsl's token_last markers
_QUOTE, _BACKSLASH, _COLON, _COMMA = ord('"'), ord("\\"), ord(":"), ord(",")
_OPEN_MAP, _OPEN_LIST, _CLOSE_MAP, _CLOSE_LIST = ord("{"), ord("["), ord("}"), ord("]")
_ZERO, _DIGIT, _DOT, _EXP, _SIGN = ord("0"), ord("1"), ord("."), ord("e"), ord("-")
_EXPONENTS = frozenset(b"eE")
_SIGNS = frozenset(b"-+")

#: the special (literal or number) a character begins, 0 for none
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
_NO_PASSTHROUGH = frozenset(range(0x14)) | {_QUOTE, _BACKSLASH}
_ESCAPES = frozenset(b'"/\\bfnrtu')
_DIGITS = frozenset(b"0123456789")
_LITERALS = {S_TRUE: b"true\0", S_FALSE: b"false\0", S_NULL: b"null\0"}
_CONSUMED = -1  #: a step's result: the character was taken, go on with the next


@attrs.define
class State:
    """One level of jsonsl's stack (``struct jsonsl_state_st``)."""

    level: int
    type: int = T_ROOT
    nelem: int = 0
    special_flags: int = 0
    nescapes: int = 0
    pos_begin: int = 0


class TokenSink(Protocol):
    """What the tokenizer reports to: jsonsl's action callback, and the
    error its error callback sets."""

    error: int

    def token_callback(self, action: int, state: State, at: int) -> None: ...


class _Halt(Exception):
    """The feed ends here (the sink's ``error`` says whether in error)."""


def feed(s: bytes, sink: TokenSink) -> None:
    """jsonsl_feed() over the whole of ``s``; the first error sets
    ``sink.error`` to ``EINVAL`` and ends it."""
    _Tokenizer(s, sink).run()


class _Tokenizer:
    """jsonsl_feed()'s loop, one method per label of its ``goto``s."""

    def __init__(self, s: bytes, sink: TokenSink) -> None:
        self.s = s
        self.sink = sink
        self.stack = [State(0)]  # jsonsl_new() callocs 256 levels: grown on demand here
        self.level = 0
        self.tok_last = 0
        self.can_insert = True
        self.expecting = 0
        self.in_escape = False
        self.i = 0

    def run(self) -> None:
        s, n = self.s, len(self.s)
        try:
            while self.i < n:
                self._step(s[self.i])
        except _Halt:
            pass

    def _fail(self) -> NoReturn:
        self.sink.error = EINVAL
        raise _Halt

    def _callback(self, action: int, st: State, at: int) -> None:
        if st.level < MAX_DESCENT_LEVEL:
            self.sink.token_callback(action, st, at)

    def _push(self, at: int, new_type: int) -> State:
        """STACK_PUSH: the state one level down, begun at ``at`` as
        ``new_type`` (past the recursion limit, an error)."""
        if self.level >= MAX_RECURSION_DEPTH - 1:
            self._fail()
        self.level += 1
        if self.level == len(self.stack):
            self.stack.append(State(self.level))
        pushed = self.stack[self.level]
        pushed.pos_begin = at
        pushed.type = new_type
        return pushed

    def _step(self, c: int) -> None:
        """One character (or a run of them) at ``self.i``."""
        state = self.stack[self.level]
        if state.type & _STRINGY:
            c = self._in_string(c)
            if c == _QUOTE:
                self._quote(state)
            elif c != _CONSUMED:
                self._escape(state)
        elif state.type == T_SPECIAL:
            c = self._in_special(state, c)
            if c != _CONSUMED:  # the special ended at c: c is a structural token of the level above
                self._structural(self.stack[self.level], c)
        elif c in _WHITESPACE:
            self.i += 1
        elif _SPECIAL[c]:
            self._special_begin(state, c)
        elif c == _QUOTE:
            self._quote(state)
        elif c == _BACKSLASH:
            self._escape(state)
        else:
            self._structural(state, c)

    # ------------------------------------------------------------ strings

    def _in_string(self, c: int) -> int:
        """Inside a string or key: the character after an escape, then the
        plain run up to the next quote or backslash (returned)."""
        if self.in_escape:
            self.in_escape = False
            if c not in _ESCAPES:
                self._fail()
            self.i += 1
            return _CONSUMED
        s, n, i = self.s, len(self.s), self.i
        while i < n and s[i] not in _NO_PASSTHROUGH:
            i += 1
        self.i = i
        if i == n:
            raise _Halt
        c = s[i]
        if c not in (_QUOTE, _BACKSLASH):
            self._fail()
        return c

    def _quote(self, state: State) -> None:
        """A quote: the end of a string or key, or the start of one."""
        self.can_insert = False
        if state.type in (T_STRING, T_HKEY):
            self._callback(POP, state, self.i)
            state.nescapes = 0
            self.level -= 1
            self.i += 1
            return
        if state.type == T_OBJECT:
            state.nelem += 1
            if (state.nelem - 1) % 2:
                if self.tok_last != _COLON:
                    self._fail()
                self.expecting = _COMMA
                new_type = T_STRING
            else:
                if self.expecting != _QUOTE:
                    self._fail()
                self.expecting = _COLON
                new_type = T_HKEY
        elif state.type == T_LIST:
            state.nelem += 1
            self.expecting = _COMMA
            new_type = T_STRING
        else:
            self._fail()
        self.tok_last = 0
        pushed = self._push(self.i, new_type)
        self._callback(PUSH, pushed, self.i)
        self.i += 1

    def _escape(self, state: State) -> None:
        if not state.type & _STRINGY:
            self._fail()
        state.nescapes += 1
        self.in_escape = True
        self.i += 1

    # ------------------------------------------------------------ literals and numbers

    def _in_special(self, state: State, c: int) -> int:
        """Inside a literal or number: the character taken, or, when it
        ends the token, popped and the character returned (whitespace
        after the token is taken too)."""
        flags = state.special_flags
        if flags == S_DASH:
            if c not in _DIGITS:
                self._fail()
            state.special_flags = S_ZERO | S_SIGNED if c == _ZERO else S_SIGNED
            self.i += 1
            return _CONSUMED
        numeric = False
        if flags in (S_UNSIGNED, S_SIGNED):
            c = self._skip_digits()
            numeric = True
        elif flags == S_ZERO:
            if c in _DIGITS:
                self._fail()
            state.special_flags = S_UNSIGNED
            numeric = True
        flags = state.special_flags
        if numeric or (flags & S_NUMERIC and not flags & S_INF):
            if self._number_char(state, flags, c):
                return _CONSUMED
        elif c not in _SPECIAL_END:
            self._literal_char(state, flags, c)
            return _CONSUMED
        return self._special_end(state, c)

    def _skip_digits(self) -> int:
        s, n, i = self.s, len(self.s), self.i
        while i < n and s[i] in _DIGITS:
            i += 1
        self.i = i
        if i == n:
            raise _Halt
        return s[i]

    def _number_char(self, state: State, flags: int, c: int) -> bool:
        """A number's digit, point, exponent or exponent sign (taken: True),
        or the character ending it (False)."""
        if c in _DIGITS:
            self.tok_last = _DIGIT
        elif c == _DOT:
            if flags & S_FLOAT:
                self._fail()
            state.special_flags |= S_FLOAT
            self.tok_last = _DOT
        elif c in _EXPONENTS:
            if flags & S_EXPONENT:
                self._fail()
            state.special_flags |= S_EXPONENT
            self.tok_last = _EXP
        elif c in _SIGNS:
            if self.tok_last != _EXP:
                self._fail()
            self.tok_last = _SIGN
        elif c not in _SPECIAL_END:
            self._fail()
        else:
            return False
        self.i += 1
        return True

    def _literal_char(self, state: State, flags: int, c: int) -> None:
        """One more character of ``true``, ``false`` or ``null``."""
        state.nescapes += 1
        lit = _LITERALS.get(flags)
        if lit is not None:
            k = self.i - state.pos_begin
            if k >= len(lit) or c != lit[k]:
                self._fail()
        self.i += 1

    def _special_end(self, state: State, c: int) -> int:
        """GT_SPECIAL_POP: the token is complete (or an error)."""
        self.can_insert = False
        flags = state.special_flags
        if flags in (S_UNSIGNED, S_SIGNED):
            pass
        elif flags in (S_ZERO, S_ZERO | S_SIGNED):
            state.special_flags = S_UNSIGNED
        elif flags == S_DASH:
            self._fail()
        elif flags & S_NUMERIC:
            if self.tok_last != _DIGIT:
                self._fail()
        elif flags in (S_TRUE, S_NULL):
            if state.nescapes != 4:
                self._fail()
        elif flags == S_FALSE and state.nescapes != 5:
            self._fail()
        self._callback(POP, state, self.i)
        state.nescapes = 0
        self.level -= 1
        self.expecting = _COMMA
        self.tok_last = 0
        if c in _WHITESPACE:
            self.i += 1
            return _CONSUMED
        return c

    def _special_begin(self, state: State, c: int) -> None:
        """GT_SPECIAL_BEGIN: a literal or number starts at ``c`` (a character
        that starts none is an error)."""
        flags = _SPECIAL[c]
        if not flags:
            self._fail()
        if state.nelem % 2 == 0 and state.type == T_OBJECT:
            self._fail()
        state.nelem += 1
        if not self.can_insert:
            self._fail()
        pushed = self._push(self.i, T_SPECIAL)
        pushed.special_flags = flags
        pushed.nescapes = 1
        self.tok_last = _DIGIT if flags == S_UNSIGNED else _SIGN
        self._callback(PUSH, pushed, self.i)
        self.i += 1

    # ------------------------------------------------------------ structure

    def _structural(self, state: State, c: int) -> None:
        """GT_STRUCTURAL_TOKEN: ``:``, ``,``, an opening or closing bracket;
        anything else must begin a literal or number."""
        if c == _COLON:
            if self.expecting != c:
                self._fail()
            self.tok_last = _COLON
            self.can_insert = True
            self.expecting = _QUOTE
        elif c == _COMMA:
            if self.expecting != c:
                self._fail()
            if state.type != T_OBJECT:
                self.can_insert = True
            self.tok_last = _COMMA
            self.expecting = _QUOTE
        elif c in (_OPEN_MAP, _OPEN_LIST):
            self._open(state, c)
        elif c in (_CLOSE_MAP, _CLOSE_LIST):
            self._close(state, c)
        else:
            self._special_begin(state, c)
            return
        self.i += 1

    def _open(self, state: State, c: int) -> None:
        if not self.can_insert:
            self._fail()
        if state.nelem % 2 == 0 and state.type == T_OBJECT:
            self._fail()
        state.nelem += 1
        pushed = self._push(self.i, c)
        pushed.nelem = 0
        self.can_insert = True
        if c == _OPEN_MAP:
            self.expecting = _QUOTE
        self._callback(PUSH, pushed, self.i)
        self.tok_last = 0

    def _close(self, state: State, c: int) -> None:
        if self.tok_last == _COMMA:
            self._fail()
        self.can_insert = False
        self.level -= 1
        self.expecting = _COMMA
        self.tok_last = 0
        if c == _CLOSE_LIST:
            if state.type != T_LIST:
                self._fail()
        else:
            if state.type != T_OBJECT:
                self._fail()
            if state.nelem and state.nelem % 2 != 0:
                self._fail()
        self._callback(POP, state, self.i)
        if self.level < 0:  # unreachable: the root is never a container
            self._fail()
