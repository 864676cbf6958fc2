"""Without PCP: dbpmda's scanner and number conversions, as lex.l, gram.y
and the C library behave (the expected values are C's, e.g. glibc strtol's
saturation and the casts; the carets are where real dbpmda 6.0.3 puts them,
from tests/dbpmda/test_differential.py runs), and the CLI's help."""

from __future__ import annotations

import io
import subprocess

import pytest
import trio

from pmda_py.pmapi import PmType
from pmda_py.testing.dbpmda import DbpmdaSession
from pmda_py.testing.dbpmda.cvalues import c_atoi, c_strtod, c_strtol, c_strtoul
from pmda_py.testing.dbpmda.lexer import Lexer
from pmda_py.testing.dbpmda.session import parse_store_value
from pmda_py.testing.support import pmda_py_argv


def _tokens(text: str) -> list[tuple[str, str]]:
    lex = Lexer(iter([text]))
    errors: list[str] = []
    out: list[tuple[str, str]] = []
    while True:
        t = lex.next_token(errors.append)
        if t.kind == "EOF":
            return out
        out.append((t.kind, t.text))


def test_tokens_as_lex_l() -> None:
    assert _tokens("desc sample.long.one\n") == [("DESC", "desc"), ("NAME", "sample.long.one"), ("EOL", "\n")]
    assert _tokens("fetch 1.2.3, 4.5 6 -7 0x10\n") == [
        ("FETCH", "fetch"),
        ("NUMBER3D", "1.2.3"),
        ("COMMA", ","),
        ("NUMBER2D", "4.5"),
        ("NUMBER", "6"),
        ("NEGNUMBER", "-7"),
        ("NUMBER", "0x10"),
        ("EOL", "\n"),
    ]
    # keywords only as whole words; "q" is quit, "descx" a name
    assert [k for k, _ in _tokens("q descx ? -pdu $m\n")] == ["QUIT", "NAME", "HELP", "NEGNAME", "MACRO", "EOL"]
    # after "pipe" (start condition FNAME) a path is one token
    assert _tokens("open pipe /bin/x,y\n")[2] == ("PATHNAME", "/bin/x,y")
    assert _tokens("'a b' \"c\" # note\n") == [("STRING", "'a b'"), ("STRING", '"c"'), ("EOL", "# note\n")]


def test_flex_reads_one_character_past_a_token() -> None:
    lex = Lexer(iter(["desc 1.2 extra\n"]))
    lex.next_token(print)
    assert lex.linepos == 5  # "desc" and the space after it
    lex.next_token(print)
    assert lex.linepos == 9  # "1.2" and the space
    lex = Lexer(iter(["desc 0xz\n"]))
    lex.next_token(print)
    t = lex.next_token(print)
    assert (t.kind, t.num, lex.linepos, lex.buf) == ("NUMBER", 0, 8, "xz")  # flex backs up to "0"


def test_c_conversions() -> None:
    assert c_atoi("99999999999") == 1215752191  # (int)strtol
    assert c_atoi("99999999999999999999") == -1  # LONG_MAX, cast
    assert c_strtol(" -12x") == (-12, 4, False)
    assert c_strtol("abc") == (0, 0, False)
    assert c_strtoul("-1") == ((1 << 64) - 1, 2, False)
    assert c_strtoul("18446744073709551616")[2] is True
    assert c_strtod("1e400")[::2] == (float("inf"), True)
    assert c_strtod("0x10") == (16.0, 4, False)
    assert c_strtod("1.5 ") == (1.5, 3, False)


@pytest.mark.parametrize(
    ("text", "type_", "want"),
    [
        ("99999999999", PmType.I32, 1215752191),
        ("-1", PmType.U32, 4294967295),
        ("-1", PmType.U64, (1 << 64) - 1),
        ("99999999999999999999", PmType.I64, "Error: Decoding value: Numerical result out of range"),
        ("7 ", PmType.I32, 'Error: Value "7 " is incompatible with metric type (PM_TYPE_32)'),
        (" 7", PmType.I32, 7),
        ("1.5", PmType.FLOAT, 1.5),
        ("x", PmType.AGGREGATE, "Error: dbpmda does not support storing into AGGREGATE metrics"),
    ],
)
def test_store_values(text: str, type_: int, want: object) -> None:
    assert parse_store_value(text, type_) == want


def test_statements_span_lines_after_a_scanner_error() -> None:
    """lex.l: yyerror skips the rest of the line but the parse goes on, so
    "desc @" takes the next line's first token as its metric."""
    out, err = io.StringIO(), io.StringIO()
    session = DbpmdaSession(out, err, None, echo=True)
    trio.run(session.run_lines, ["desc @ x\n", "status\n", "help\n"])
    assert err.getvalue().count("Error: ") == 2
    assert "Error: Illegal character" in err.getvalue() and "Error: syntax error" in err.getvalue()
    assert "Namespace:" not in out.getvalue()  # "status" was eaten
    assert "help [ command ]" in out.getvalue()


def test_help_is_plain_text() -> None:
    r = subprocess.run(pmda_py_argv("dbpmda", "--help"), capture_output=True, text=True)
    assert r.returncode == 0
    assert "dbpmda's command language" in r.stdout or "command language" in r.stdout
    for markup in ("``", ":class:", ":mod:", ":func:"):
        assert markup not in r.stdout


def test_execute_returns_what_each_line_printed() -> None:
    """The library's ``await session.execute(line)``: that line's statements
    run, and what they printed on ``out`` is returned (and written there);
    error messages go to ``err``."""
    out, err = io.StringIO(), io.StringIO()
    session = DbpmdaSession(out, err, None)

    async def main() -> tuple[str, str, str]:
        first = await session.execute("help quit")
        second = await session.execute("timer on\n")
        third = await session.execute("status")
        return first, second, third

    first, second, third = trio.run(main)
    assert first == "\nquit\n\nExit dbpmda.  This also closes any open PMDAs.\n\n"
    assert second == ""
    assert "Timer:                  on\n" in third and "PMDA:                   none\n" in third
    assert "Exit dbpmda" not in third
    assert out.getvalue() == first + second + third
    assert err.getvalue() == ""
    bad = trio.run(session.execute, "bogus")
    assert bad.strip() == "^ at or near here" and "Error: Unrecognized command" in err.getvalue()  # the caret: stdout
