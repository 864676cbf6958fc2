"""``pmcpp``: the PMNS preprocessor (comments, ``#include``, ``#define``,
``#ifdef``), as PCP runs it before loading a PMNS."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Optional

import attrs

from pmda_py.namespace.base import PmnsError, Resolver

__all__ = ["preprocess"]

_MAXLEVEL = 5  # pmcpp: the top-level file plus 4 levels of #include
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_UNSPACED = re.compile(r"[^\s]*")


def _word(text: str) -> str:
    """``text`` up to its first white space."""
    match = _UNSPACED.match(text)
    return match.group(0) if match else ""


# --------------------------------------------------------------------------
# pmcpp


@attrs.define
class _Cpp:
    """pmcpp's state, which is global across #include'd files."""

    resolve: Optional[Resolver]
    macros: list[list[str]]  # [name, value]; #undef empties the name, as pmcpp does
    out: list[tuple[str, int, str]] = attrs.field(factory=list)
    in_if: Optional[bool] = None  # None: not in #ifdef; else is the section on
    if_line: int = 0
    skip: bool = False
    comment_line: int = 0  # line where an open comment began (0: none)

    def lookup(self, name: str) -> Optional[list[str]]:
        for m in self.macros:
            if m[0] == name:
                return m
        return None

    def substitute(self, text: str) -> str:
        if not self.macros:
            return text
        table = {m[0]: m[1] for m in self.macros if m[0]}
        return _WORD.sub(lambda w: table.get(w.group(0), w.group(0)), text)

    def directive(self, line: str, fail: Callable[[str], PmnsError]) -> Optional[bool]:
        """pmcpp's ``directive()``: None for a line that is no directive,
        else whether the following lines are skipped."""
        for op in ("define", "undef", "ifdef", "ifndef", "endif", "else"):
            if line.startswith(op, 1):
                break
        else:
            return None
        rest = line[1 + len(op) :].lstrip(" \t")
        name = value = ""
        if op not in ("endif", "else"):
            if not rest:
                raise fail("Missing macro name")
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", rest)
            name = m.group(0) if m else ""
            rest = rest[len(name) :]
            if not name or (rest and rest[0] not in " \t\r\f\v"):
                raise fail("Illegal character in macro name")
            if op == "define":
                rest = rest.lstrip(" \t")
                if rest[:1] in ("'", '"'):
                    end = rest.find(rest[0], 1)
                    if end < 0:
                        raise fail("Unterminated value string in #define")
                    value, rest = rest[1:end], rest[end + 1 :]
                else:
                    value = _word(rest)
                    rest = rest[len(value) :]
        if rest.strip(" \t\r"):
            raise fail("Unexpected extra text in a control line")
        if op == "endif":
            if self.in_if is None:
                raise fail("No matching #ifdef or #ifndef for #endif")
            self.in_if = None
            return False
        if op == "else":
            if self.in_if is None:
                raise fail("No matching #ifdef or #ifndef for #else")
            self.in_if = not self.in_if
        elif op in ("ifdef", "ifndef") and self.in_if is not None:
            raise fail("Nested #ifdef or #ifndef")
        if self.in_if is False:
            return True
        found = self.lookup(name)
        if found is not None:
            if op == "ifdef":
                self.in_if = True
                return False
            if op == "ifndef":
                self.in_if = False
                return True
            if op == "undef":
                found[0] = ""
                return False
            raise fail("Macro redefinition")  # define, and pmcpp's #else quirk
        if op in ("ifdef", "ifndef"):
            self.in_if = op == "ifndef"
            return not self.in_if
        if op in ("define", "else"):  # pmcpp's #else adds a macro with no name
            self.macros.append([name, value])
        return False

    def run(self, text: str, fname: str, depth: int) -> None:
        lineno = 0
        lines = text.split("\n")
        for raw in lines[:-1]:  # pmcpp ignores a last line without its newline
            lineno += 1

            def fail(reason: str, lineno: int = lineno, raw: str = raw) -> PmnsError:
                return PmnsError(fname, lineno, reason, printed=_pmcpp_printed(f"{fname}[{lineno}]: {raw}", reason))

            line, blanked = self._strip_comments(raw, fname, lineno)
            if blanked:
                line = line.rstrip()
            if self.comment_line and not line:
                continue
            if line.startswith("#include"):
                if not self.skip:
                    self._include(line, fname, depth, fail)
                continue
            if line.startswith("#shell"):
                if not self.skip:
                    raise fail("#shell is not supported (it would run a command)")
                continue
            if line.startswith("#"):
                skip = self.directive(line, fail)
                if skip is not None:
                    self.skip = skip
                    continue
            elif self.skip:
                continue
            if line.strip():
                self.out.append((fname, lineno, self.substitute(line)))

    def _strip_comments(self, line: str, fname: str, lineno: int) -> tuple[str, bool]:
        out: list[str] = []
        blanked = False
        k = 0
        while k < len(line):
            if self.comment_line:
                blanked = True
                end = line.find("*/", k)
                if end < 0:
                    out.append(" " * (len(line) - k))
                    break
                out.append(" " * (end + 2 - k))
                k = end + 2
                self.comment_line = 0
            else:
                start = line.find("/*", k)
                if start < 0:
                    out.append(line[k:])
                    break
                out.append(line[k:start] + "  ")
                k = start + 2
                self.comment_line = lineno
                blanked = True
        return "".join(out), blanked

    def _include(self, line: str, fname: str, depth: int, fail: Callable[[str], PmnsError]) -> None:
        rest = line[len("#include") :].lstrip(" \t")
        if rest[:1] not in ('"', "<"):
            raise fail('Expected " or < after #include')
        close = '"' if rest[0] == '"' else ">"
        end = rest.find(close, 1)
        if end < 0:
            raise fail(f"Expected {close} after file name")
        if rest[end + 1 :].strip():
            raise fail("Unexpected extra text in #include line")
        if depth >= _MAXLEVEL - 1:
            raise fail("#include and/or #shell nesting too deep")
        if self.resolve is None:
            raise fail(f"Cannot open file for #include: {rest[: end + 1]} (no include resolver)")
        try:
            path, sub = self.resolve(rest[1:end], rest[0] == "<", fname)
        except OSError:
            raise fail(f"Cannot open file for #include: {rest[: end + 1]}") from None
        self.run(sub, path, depth + 1)


def preprocess(
    text: str,
    name: str = "<pmns>",
    resolve: Optional[Resolver] = None,
    macros: Optional[dict[str, str]] = None,
) -> list[tuple[str, int, str]]:
    """Run pmcpp over ``text`` (the contents of file ``name``).

    Returns ``(file, line, text)`` for each non-blank output line.  ``macros``
    are predefined (pmcpp's ``-D``); ``resolve`` finds included files.

    Raises:
        PmnsError: what pmcpp reports (and exits 1 for).
    """
    cpp = _Cpp(resolve, [[k, v] for k, v in (macros or {}).items()])
    cpp.run(text, name, 0)
    reason = ""
    if cpp.comment_line:
        reason = f"Comment at line {cpp.comment_line} not terminated before end of file"
    elif cpp.in_if is not None:
        reason = "End of input and no matching #endif for #ifdef or #ifndef"
    if reason:
        raise PmnsError(name, 0, reason, printed=_pmcpp_printed(f"{name}:", reason))
    return cpp.out


def _pmcpp_printed(where: str, reason: str) -> str | None:
    """What pmcpp prints for an error (where: its file and line, and the
    line), then libpcp's loader; None for our own refusals (``#shell``),
    which pmcpp has no words for."""
    if reason.startswith("#shell"):
        return None
    if reason.startswith("Cannot open file for #include"):
        reason = "Cannot open file for #include"  # (we add the name; pmcpp shows it in the line)
    return f"pmcpp: {where}\npmcpp: Error: {reason}\nError Parsing ASCII PMNS: pmcpp returned non-zero exit status\n"
