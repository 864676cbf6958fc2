"""A dbpmda session's transcript: its output on stdout, its warnings and
errors on stderr (stdout flushed first, as dbpmda's stdio interleaves them),
the echo of its input, the capture of one line's output, and the replies'
error lines and the ``status`` dump dbpmda prints."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import IO

from pmda_py.errors import PmErr, errstr
from pmda_py.pmapi import indom_str
from pmda_py.testing.dbpmda.format import DEBUG_FLAGS
from pmda_py.wire import ErrorPdu, Pdu

__all__ = ["Transcript", "reply_error_text", "unexpected_reply"]


def reply_error_text(reply: Pdu | None) -> str | None:
    """dbpmda's line for no reply or an error reply, else None."""
    if reply is None:
        return "Error: __pmGetPDU() failed: PDU empty, PMDA may have died"
    if isinstance(reply, ErrorPdu):
        return f"Error PDU: {errstr(reply.code)}"
    return None


def unexpected_reply(reply: Pdu | None, *, show_type: bool = False) -> str:
    """dbpmda's line for a reply that is not the one asked for: no reply, an
    error, or another PDU (its type in hex where dbpmda prints it)."""
    text = reply_error_text(reply)
    if text is not None:
        return text
    if show_type and reply is not None:
        return f"Error: __pmGetPDU() failed: wrong PDU ({reply.pdu_type:x})"
    return f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}"


class Transcript:
    """Where a session writes: ``out`` (stdout), ``err`` (stderr)."""

    def __init__(self, out: IO[str], err: IO[str], echo: bool = False) -> None:
        self.out, self.err, self.echo = out, err, echo
        #: a prompt before each input line (dbpmda on a terminal)
        self.interactive = False
        #: what the prompt says (dbpmda shows ``.dbpmdarc> `` while it reads that file)
        self.prompt_text = "dbpmda> "
        #: while dbpmda reads .dbpmdarc: the line of it being read (its
        #: errors say so, their caret three columns further right)
        self.rc_line: Callable[[], int] | None = None
        self._captured: list[str] | None = None

    # -- input
    def echo_char(self, c: str) -> None:
        """The scanner's echo of one input character (``-e``)."""
        if self.echo:
            self.out.write(c)
            if self._captured is not None:
                self._captured.append(c)

    def prompt(self) -> None:
        if self.interactive:
            self.out.write(self.prompt_text)

    # -- capture
    def start_capture(self) -> None:
        """Keep what is written on ``out`` from now on (and still write it)."""
        self._captured = []

    def stop_capture(self) -> str:
        """What was written on ``out`` since :meth:`start_capture`."""
        captured, self._captured = self._captured or [], None
        return "".join(captured)

    # -- output
    def p(self, text: str = "") -> None:
        """One line on stdout."""
        self.out.write(text + "\n")
        if self._captured is not None:
            self._captured.append(text + "\n")

    def flush(self) -> None:
        self.out.flush()

    def complain(self, text: str) -> None:
        """``text`` (whole lines) on stderr, after what stdout holds."""
        self.out.flush()
        self.err.write(text)
        self.err.flush()

    def warn(self, msg: str) -> None:
        """yywarn."""
        if self.rc_line is None:
            self.complain(f"Warning: {msg}\n")
        else:
            self.complain(f"Warning [.dbpmdarc, line {self.rc_line()}]\n{msg}\n")

    def caret(self, pad: str, msg: str) -> None:
        """yyerror's report: a caret under where the scanner had got to
        (``pad`` is the line up to there, blanked), the message on stderr."""
        where = "" if self.rc_line is None else f" [.dbpmdarc, line {self.rc_line()}]"
        self.p(" " * (7 if self.rc_line is None else 10) + pad + "^ at or near here")
        self.complain(f"Error{where}: {msg}\nType 'help' for a list of commands.\n")

    def status(
        self,
        pmns_name: str | None,
        pmda: tuple[str, int, int | None] | None,
        debug: Iterable[str],
        switches: Iterable[tuple[str, bool]],
        profile_state: int,
        profile: Iterable[tuple[int, int, Sequence[int]]],
    ) -> None:
        """util.c ``dostatus``: ``pmda`` is (name, pid, PDU version) of the
        open PMDA; ``profile`` the (indom, state, instances) of each entry."""
        self.p()
        self.p(f"Namespace:              {pmns_name or '(default)'}")
        if pmda is None:
            self.p("PMDA:                   none")
        else:
            name, pid, version = pmda
            self.p(f"PMDA:                   {name}")
            self.p(f"Connection:             daemon (pid: {pid})")
            self.p(f"PMDA PMAPI Version:     {'unknown!' if version is None else str(version)}")
        on = set(debug)
        flags = " ".join(f for f in DEBUG_FLAGS if f in on) or "(none)"
        if len(on) == len(DEBUG_FLAGS):
            flags = "(all)"
        self.p(f"Debug options:          {flags}")
        for title, value in switches:
            self.p(f"{title + ':':<24}{'on' if value else 'off'}")
        self.p()
        entries = list(profile)
        self.p(f"Dump Instance Profile state={'EXCLUDE' if profile_state else 'INCLUDE'}, {len(entries)} profiles")
        for k, (ind, state, insts) in enumerate(entries):
            signed = ind - (1 << 32) if ind & 0x80000000 else ind
            self.p(
                f"\tProfile [{k}] indom={signed} [{indom_str(ind)}] state={'EXCLUDE' if state else 'INCLUDE'} "
                f"{len(insts)} instances"
            )
            if insts:
                self.p("\t\tInstances:" + "".join(f" [{i}]" for i in insts))
        self.p()
