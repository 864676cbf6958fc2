"""The Prometheus/OpenMetrics text exposition, read as pmdaopenmetrics reads it.

pmdaopenmetrics (PCP 6.0.3, ``SampleLineParser`` and ``Source.parse_lines``)
is deliberately lax: a line is ``name [{label="value",...}] value [ignored]``,
comments carry ``# HELP``, ``# TYPE``, ``# PCP`` and ``# PCP5`` metadata for
the block of samples that follows, and the first line it cannot read ends the
document (the samples before it are kept).  This module follows that grammar
(including its escape rules: ``\\\\``, ``\\n`` and ``\\"`` are unescaped,
any other ``\\x`` is kept as two characters) and adds limits: line length,
labels per sample, label value size and samples per document.

Sans-IO: text in, samples out; nothing here reads files or sockets.
"""

from __future__ import annotations

import re
from typing import Optional

import attrs

__all__ = ["Limits", "Parsed", "Sample", "parse_document", "parse_sample_line"]


@attrs.frozen
class Limits:
    """Bounds on what one source may send (a breach is logged, never fatal)."""

    max_bytes: int = 16 * 1024 * 1024  #: a bigger document is refused whole
    max_line: int = 64 * 1024  #: a longer line ends the document (like a malformed one)
    max_labels: int = 64  #: labels in one sample
    max_label_value: int = 4096  #: characters in one label value
    max_samples: int = 200_000  #: samples in one document (the rest are dropped)
    max_instances: int = 10_000  #: instances of one metric (new ones past it refused)
    max_series: int = 50_000  #: instances (distinct label sets) of one source (new ones past it refused)
    max_label_bytes: int = 8 * 1024 * 1024  #: characters of one source's instance names and labels (idem)
    series_ttl: float = 3600.0  #: an instance unseen this many seconds is reclaimed
    max_errors_logged: int = 5  #: log lines per source per scrape


#: labels of a sample: None (no ``{}`` at all) or name -> value in line order
LabelDict = Optional[dict[str, str]]


@attrs.frozen
class Sample:
    """One sample line with the metadata in force for its block."""

    name: str
    labels: LabelDict
    value: str
    pcpline: str | None = None
    helpline: str | None = None
    typeline: str | None = None


@attrs.define
class Parsed:
    """A document's samples; ``error`` (``(line number, reason)``) says where
    and why reading stopped early, ``dropped`` counts samples over the limit."""

    samples: list[Sample] = attrs.field(factory=list)
    error: tuple[int, str] | None = None
    dropped: int = 0


#: where a metric name, a label name and a value end (str.isspace's whitespace is re's \s):
#: one C-level scan each, not a Python step per character
_NAME = re.compile(r"[^{\s]*")
_LABEL_NAME = re.compile(r"[^=\s]*")
_VALUE = re.compile(r"\S*")
#: a label value's text up to its closing quote: characters, and escapes (a backslash and the next one)
_QUOTED = re.compile(r'(?:[^"\\]|\\.)*', re.S)
_ESCAPE = re.compile(r"\\.", re.S)


def _unescape(raw: str) -> str:
    """A label value's text with its escapes resolved as pmdaopenmetrics
    resolves them: ``\\\\`` a backslash, ``\\n`` a newline, ``\\"`` a quote,
    any other kept as it is (in C-level passes: split at the escaped
    backslashes, left to right, then replace in each piece)."""
    return "\\".join(p.replace("\\n", "\n").replace('\\"', '"') for p in raw.split("\\\\"))


def _skip_ws(line: str, i: int, n: int) -> int:
    while i < n and line[i].isspace():
        i += 1
    return i


def parse_sample_line(line: str, limits: Limits | None = None) -> tuple[str, LabelDict, str]:
    """``(name, labels, value text)`` of one sample line.

    Raises:
        ValueError: the line is not a sample (pmdaopenmetrics stops there).
    """
    lim = limits or Limits()
    n = len(line)
    i = _skip_ws(line, 0, n)
    j = _NAME.match(line, i).end()  # type: ignore[union-attr]  # (it matches the empty string)
    name = line[i:j]
    if not name:
        raise ValueError("no metric name")
    i = _skip_ws(line, j, n)
    labels: LabelDict = None
    if i < n and line[i] == "{":
        labels = {}
        i += 1
        while True:
            i = _skip_ws(line, i, n)
            if i >= n:
                raise ValueError("unterminated label set")
            if line[i] == "}":
                i += 1
                break
            j = _LABEL_NAME.match(line, i).end()  # type: ignore[union-attr]
            lname = line[i:j]
            i = _skip_ws(line, j, n)
            if i >= n or line[i] != "=" or not lname:
                raise ValueError("expected =")
            i = _skip_ws(line, i + 1, n)
            if i >= n or line[i] != '"':
                raise ValueError('expected "')
            i += 1
            m = _QUOTED.match(line, i)
            raw = m.group()  # type: ignore[union-attr]  # (it matches the empty string)
            end = m.end()  # type: ignore[union-attr]
            if end >= n or line[end] != '"':  # no closing quote (or a lone backslash at the end)
                # (pmdaopenmetrics' reader gives up on length only at an escape, counting each as one)
                ends = [e.end() for e in _ESCAPE.finditer(raw)]
                if ends and ends[-1] - len(ends) > lim.max_label_value:
                    raise ValueError(f"a label value longer than {lim.max_label_value}")
                raise ValueError("unterminated label value")
            value = _unescape(raw) if "\\" in raw else raw
            if len(value) > lim.max_label_value:
                raise ValueError(f"a label value longer than {lim.max_label_value}")
            i = end + 1
            labels[lname] = value
            if len(labels) > lim.max_labels:
                raise ValueError(f"more than {lim.max_labels} labels")
            i = _skip_ws(line, i, n)
            if i >= n:
                raise ValueError("unterminated label set")
            if line[i] == ",":
                i += 1
                continue
            if line[i] == "}":
                i += 1
                break
            raise ValueError("expected , or }")
        i = _skip_ws(line, i, n)
    j = _VALUE.match(line, i).end()  # type: ignore[union-attr]
    value_text = line[i:j]
    if not value_text:
        raise ValueError("no value")
    return name, labels, value_text


def parse_document(text: str, limits: Limits | None = None) -> Parsed:
    """Every sample of ``text`` up to the first unreadable line."""
    lim = limits or Limits()
    out = Parsed()
    pcpline: str | None = None
    helpline: str | None = None
    typeline: str | None = None
    in_metrics = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if len(line) > lim.max_line:
            out.error = (lineno, f"line longer than {lim.max_line} characters")
            break
        if line.startswith("#"):
            if in_metrics:  # a new block: the previous block's metadata is dropped
                in_metrics = False
                pcpline = helpline = typeline = None
            lp = line.split()
            if len(lp) < 2:
                continue
            if lp[1] == "PCP":
                pcpline = " ".join(lp[1:])
            elif lp[1] == "PCP5":
                pcpline = " ".join([lp[1], lp[2] if len(lp) > 2 else "", " ".join(lp[4:])])
            elif lp[1] == "HELP":
                helpline = " ".join(lp[3:])
            elif lp[1] == "TYPE":
                typeline = " ".join(lp[3:])
            continue
        in_metrics = True
        if len(out.samples) >= lim.max_samples:
            out.dropped += 1
            continue
        try:
            name, labels, value = parse_sample_line(line, lim)
        except ValueError as err:
            out.error = (lineno, str(err))
            break
        out.samples.append(Sample(name, labels, value, pcpline, helpline, typeline))
    return out
