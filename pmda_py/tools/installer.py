"""Install-time helpers of the ``Install``/``Remove`` scripts.

``pmda-py pmns [-c CONFIG] [--symdom NAME] [--under NAME]`` writes the PMNS
fragment of the configured tables: static leaves as ``SYMDOM:cluster:item``,
and ``SYMDOM:*:*`` for dynamic tables (those whose metrics change, e.g. MMV).
``pmda-py help [-c CONFIG] [--symdom NAME]`` writes the help source for
``newhelp``: ``@ name oneline`` then the long text, indoms as ``@ SYMDOM.serial``.
pmdaproc.sh replaces ``SYMDOM`` with the domain number.

``pmda-py pmlogconf [-c CONFIG]`` writes the agent's pmlogconf group file.
``pmda-py pmcdconf CONF NAME DOMAIN [LINE]`` shows or replaces an agent's
pmcd.conf line (the MMV drop-in), and ``python -m pmda_py.tools.installer configure
SRC DEST NAME DOMAIN`` installs a config file with the agent's name and
domain, refusing a bad one (file, line, key) before anything is written.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pmda_py import logconfig
from pmda_py.config import DEFAULT_NAME, Config, parse_args
from pmda_py.dispatch import Dispatcher, Mount
from pmda_py.namespace import write_fragment
from pmda_py.runtime.loader import load_table
from pmda_py.safefile import atomic_write
from pmda_py.table import Table

__all__ = [
    "configure_main",
    "configured_text",
    "help_main",
    "help_text",
    "main",
    "pmcdconf_main",
    "pmlogconf_main",
    "pmlogconf_text",
    "pmns_main",
    "pmns_text",
]

_T = TypeVar("_T")


def _mounts(argv: Sequence[str], prog: str = "pmda-py run") -> tuple[Config, list[Mount]]:
    logconfig.configure("-", "console", "warning", redirect_stderr=False)  # never onto stdout
    config = parse_args([*list(argv), "-l", os.devnull], prog)
    mounts = [Mount(load_table(spec, config), spec.mount, spec.name, dict(spec.options)) for spec in config.tables]
    return config, mounts


class _NoRunner:
    """The dispatcher's runner at install time, where no table is called."""

    async def call(self, table: Table, what: str, fn: Callable[[], Awaitable[_T]]) -> _T:  # pragma: no cover
        raise RuntimeError("no table calls at install time")

    async def gather(
        self, calls: Sequence[tuple[Table, str, Callable[[], Awaitable[object]]]]
    ) -> list[object]:  # pragma: no cover
        raise RuntimeError("no table calls at install time")

    async def check(self, table: Table) -> None:  # pragma: no cover
        raise RuntimeError("no table calls at install time")


def _dynamic(m: Mount) -> bool:
    """A table whose names change while it runs (answered through PMNS PDUs)."""
    return m.table.dynamic_names


def pmns_text(config: Config, mounts: list[Mount], symdom: str) -> str:
    """The PMNS fragment of the mounted tables, rooted at the PMDA name."""
    Dispatcher(config.domain, mounts, _NoRunner(), name=config.name)  # validates collisions
    leaves: dict[str, tuple[int, int]] = {}
    dynamic: list[str] = []
    for m in mounts:
        if _dynamic(m):
            dynamic.append(m.mount)
            continue
        for metric in m.table.metrics():
            leaves[m.full(metric)] = (metric.cluster, metric.item)
    tops = {n.split(".")[0] for n in [*leaves, *dynamic]}
    out = []
    for top in sorted(tops):
        if top in dynamic:  # the whole top is dynamic
            out.append(f"{top}\t{symdom}:*:*\n")
            continue
        sub_leaves = {n: v for n, v in leaves.items() if n.split(".")[0] == top}
        sub_dyn = [n for n in dynamic if n.split(".")[0] == top]
        out.append(write_fragment(top, sub_leaves, symdom, sub_dyn))
    return "".join(out)


_NEWHELP_LINE = 120  # newhelp reads lines of at most 127 characters ...
_NEWHELP_ENTRY = 1000  # ... and entries of at most 1024 bytes (the tables serve the full text)


def _help_entry(ident: str, oneline: str, text: str | None) -> str:
    """One newhelp entry: ``@ ident oneline`` then the long text, kept within
    newhelp's limits; text lines that newhelp would take for an entry or a
    comment (``@``, ``#``) are indented."""
    head = f"@ {ident} {' '.join(oneline.split())}"
    if len(head.encode()) > _NEWHELP_LINE:
        head = head.encode()[: _NEWHELP_LINE - 3].decode(errors="ignore") + "..."
    body: list[str] = []
    size = len(head.encode()) + 1
    for raw in (text or "").splitlines():
        for ln in textwrap.wrap(raw, _NEWHELP_LINE, break_long_words=True) or [""]:
            ln = " " + ln if ln.startswith(("@", "#")) else ln
            if size + len(ln.encode()) + 1 > _NEWHELP_ENTRY - 8:
                body.append("[...]")
                return "\n".join([head, *body]) + "\n\n"
            body.append(ln)
            size += len(ln.encode()) + 1
    return "\n".join([head, *body]) + "\n\n"


def _str(text: str | int | None) -> str | None:
    return text if isinstance(text, str) else None


def help_text(config: Config, mounts: list[Mount], symdom: str) -> str:
    """The newhelp source of the mounted tables (static metrics and indoms)."""
    out = [f"# help text for the {config.name} PMDA (pmda_py), written by 'pmda-py help'\n"]
    for m in mounts:
        if _dynamic(m):
            continue
        for ind in m.table.indoms():
            if isinstance(ind.oneline, str):  # an int is an error the table answers, not text
                out.append(_help_entry(f"{symdom}.{ind.serial}", ind.oneline, _str(ind.help)))
        for metric in m.table.metrics():
            if isinstance(metric.oneline, str):
                out.append(_help_entry(m.full(metric), metric.oneline, _str(metric.help)))
    return "".join(out)


def pmlogconf_text(config: Config, mounts: list[Mount], symdom: str) -> str:
    """A pmlogconf group (``man pmlogconf``, "SETUP GROUP FILES") for the
    agent: all of its subtree, enabled when pmlogconf finds the agent's
    metrics (probe on one of its static metrics, the control table's pid
    when mounted).  Empty when the agent has no static metric to probe."""
    leaves = sorted(m.full(metric) for m in mounts if not _dynamic(m) for metric in m.table.metrics() if m.full(metric))
    if not leaves:
        return ""
    probe = next((n for n in leaves if n == f"{config.name}.control.pid"), leaves[0])
    return (
        "#pmlogconf-setup 2.0\n"
        f"# the {config.name} agent (pmda_py): written by its Install, removed by its Remove\n"
        f"ident\t{config.name} agent (pmda_py): all of its metrics\n"
        f"probe\t{probe} exists ? include : exclude\n"
        f"\t{config.name}\n"
    )


_WHAT = {
    "pmda-py pmns": "Write the PMNS fragment (names and PMIDs) of the configured tables, as Install needs it.",
    "pmda-py help": "Write the help text source (newhelp's input) of the configured tables, as Install needs it.",
    "pmda-py pmlogconf": "Write the agent's pmlogconf group (pmlogger records it by default), as Install needs it.",
}
_TABLE_OPTIONS = """\
the tables are chosen as for `pmda-py run`:
  -c CONFIG             the agent's config file ([pmda] and [table NAME] sections)
  --table NAME[=MOUNT]  a table (built-in, entry point or module:Class), mounted at MOUNT
  -d DOMAIN             the domain written in the output
  -n NAME               the agent's name (PMNS top, default pypmda)
"""


def _common(prog: str, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(
        prog=prog,
        description=_WHAT.get(prog),
        epilog=_TABLE_OPTIONS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--symdom", help="symbolic domain written in the output (default: the name in upper case)")
    p.add_argument("--under", help="refuse tables mounted outside this subtree (pmdaproc.sh installs one)")
    p.add_argument("-o", "--output", help="write here instead of stdout")
    return p.parse_known_args(list(argv))


def _write(text: str, output: str | None) -> None:
    if output:
        try:
            atomic_write(output, text.encode())
        except OSError as err:  # the temporary's name would mean nothing to the person
            raise OSError(f"cannot write {output}: {err.strerror or err}") from None
    else:
        sys.stdout.write(text)


def _generate(prog: str, argv: Sequence[str], render: Callable[[Config, list[Mount], str], str]) -> int:
    ns, rest = _common(prog, argv)
    try:
        config, mounts = _mounts(rest, prog)
        for m in mounts:
            if ns.under and m.mount != ns.under and not m.mount.startswith(ns.under + "."):
                raise ValueError(f"table {m.name} is mounted at {m.mount!r}, outside {ns.under!r}")
        _write(render(config, mounts, ns.symdom or config.name.upper()), ns.output)
    except Exception as err:  # a bad config or table: one clear line, exit 1
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    return 0


def pmns_main(argv: Sequence[str]) -> int:
    """``pmda-py pmns [-c CONFIG] [--table ...] [--symdom S] [-o FILE]``."""
    return _generate("pmda-py pmns", argv, pmns_text)


def help_main(argv: Sequence[str]) -> int:
    """``pmda-py help [-c CONFIG] [--table ...] [--symdom S] [-o FILE]``."""
    return _generate("pmda-py help", argv, help_text)


def pmlogconf_main(argv: Sequence[str]) -> int:
    """``pmda-py pmlogconf [-c CONFIG] [--table ...] [-o FILE]``."""
    return _generate("pmda-py pmlogconf", argv, pmlogconf_text)


def pmcdconf_main(argv: Sequence[str]) -> int:
    """``pmda-py pmcdconf CONF NAME DOMAIN [LINE]``: print the agent line of NAME
    (exit 1 if none), or with LINE replace it (or add it before [access]).
    Refuses to use DOMAIN when another agent already has it (exit 3), a
    NAME, DOMAIN or LINE that is not an agent's (exit 2), and a CONF whose
    lines before its first section are not all agent lines (exit 1: run as
    root by Install, it must never rewrite a file that is not a pmcd.conf)."""
    if len(argv) < 3:
        print("usage: pmda-py pmcdconf CONF NAME DOMAIN [LINE]", file=sys.stderr)
        return 2
    path, name, domain = argv[0], argv[1], argv[2]
    problem = _pmcdconf_arguments(name, domain, argv[3] if len(argv) > 3 else None)
    if problem:
        print(f"pmda-py pmcdconf: {problem}", file=sys.stderr)
        return 2
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else err
        print(f"pmda-py pmcdconf: cannot read {path}: {why}", file=sys.stderr)
        return 1
    bad = _not_an_agent_line(lines)
    if bad is not None:  # (never rewrite a file that is not a pmcd.conf: run as root, by Install)
        print(f"pmda-py pmcdconf: {path}:{bad}: not a pmcd.conf agent line (file left alone)", file=sys.stderr)
        return 1
    cur = None
    for ln in lines:
        fields = ln.split()
        if len(fields) >= 2 and not ln.lstrip().startswith("#") and not ln.startswith("["):
            if fields[1] == domain and fields[0] != name:
                print(f"pmda-py pmcdconf: domain {domain} is already used by agent {fields[0]}", file=sys.stderr)
                return 3
            if fields[0] == name:
                cur = ln
    if len(argv) == 3:
        if cur is None:
            return 1
        print(cur)
        return 0
    new = argv[3]
    out, done = [], False
    for ln in lines:
        if cur is not None and ln == cur:
            out.append(new)
            done = True
        elif not done and re.match(r"^\[access\]", ln):
            out += [new, ln]
            done = True
        else:
            out.append(ln)
    if not done:
        out.append(new)
    # a pmcd.conf kept as a link to a site's managed file is changed where it
    # points (as pmdaproc.sh's cp writes through it), keeping its mode, owner
    # and group: Install then Remove leaves the site as it found it
    target = os.path.realpath(path)
    st = os.stat(target)
    atomic_write(target, ("\n".join(out) + "\n").encode(), mode=stat.S_IMODE(st.st_mode), owner=_owner_kept(st))
    return 0


def _owner_kept(st: os.stat_result) -> tuple[int, int] | None:
    """The owner and group to give a rewritten file: its own, where this
    process may give them (root, or its own file in one of its groups)."""
    if os.geteuid() == 0:
        return st.st_uid, st.st_gid
    if st.st_uid == os.geteuid() and st.st_gid in (os.getegid(), *os.getgroups()):
        return st.st_uid, st.st_gid
    return None


_AGENT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_AGENT_TYPES = ("dso", "pipe", "socket")


def _pmcdconf_arguments(name: str, domain: str, line: str | None) -> str | None:
    """What is wrong with ``pmcdconf``'s NAME, DOMAIN and LINE (None: nothing)."""
    if not _AGENT_NAME.match(name):
        return f"{name!r} is not an agent name"
    if not domain.isdigit() or not 1 <= int(domain) <= 510:
        return f"domain {domain!r} is not a number from 1 to 510"
    if line is not None and ("\n" in line or not _agent_line(line) or line.split()[:2] != [name, domain]):
        return f"{line!r} is not a pmcd.conf line for agent {name} at domain {domain}"
    return None


def _not_an_agent_line(lines: Sequence[str]) -> int | None:
    """The number of the first line before pmcd.conf's first ``[section]``
    that is neither a comment, blank, nor an agent line (NAME DOMAIN TYPE
    ...), or None when every one is."""
    for number, ln in enumerate(lines, 1):
        text = ln.strip()
        if text.startswith("["):
            return None
        if not text or text.startswith("#"):
            continue
        if not _agent_line(text):
            return number
    return None


def _agent_line(text: str) -> bool:
    """Whether ``text`` is a pmcd.conf agent line: NAME DOMAIN dso|pipe|socket ..."""
    fields = text.split()
    return len(fields) >= 4 and fields[1].isdigit() and fields[2].lower() in _AGENT_TYPES


_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(.*?)\s*(;.*)?$")
_HEADER = re.compile(r"^\[(.+)\]\s*$")


def configured_text(text: str, name: str, domain: int) -> str:
    """The config ``text`` with ``name`` and ``domain`` set in ``[pmda]``
    (added when missing), and the mount points under the file's own name
    moved under ``name``; everything else (comments, order) is kept."""
    lines = text.splitlines()
    old, section = DEFAULT_NAME, None
    for ln in lines:
        h, k = _HEADER.match(ln.strip()), _KEY.match(ln)
        if h:
            section = h.group(1).strip()
        elif k and section == "pmda" and k.group(1) == "name":
            old = k.group(2)
    out: list[str] = []
    pending: dict[str, str] = {}
    section, have_pmda = None, False
    for ln in lines:
        h, k = _HEADER.match(ln.strip()), _KEY.match(ln)
        if h:
            section = h.group(1).strip()
            out.append(ln)
            if section == "pmda":
                have_pmda = True
                pending = {"name": name, "domain": str(domain)}
                out += [f"{key} = {value}" for key, value in pending.items()]
            continue
        if k and section == "pmda" and k.group(1) in ("name", "domain"):
            continue  # written right after the header
        if k and section and section.startswith("table") and k.group(1) == "mount":
            mount = k.group(2)
            if mount == old or mount.startswith(old + "."):
                ln = f"mount = {name}{mount[len(old) :]}"
        out.append(ln)
    if not have_pmda:
        out = ["[pmda]", f"name = {name}", f"domain = {domain}", "", *out]
    return "\n".join(out) + "\n"


def configure_main(argv: Sequence[str]) -> int:
    """``python -m pmda_py.tools.installer configure SRC DEST NAME DOMAIN``: check
    SRC (every table loaded), write it to DEST with the agent's name and
    domain, check that too, and only then put it in place."""
    prog = "pmda-py configure"
    if len(argv) != 4 or not argv[3].isdigit():
        print(f"usage: {prog} SRC DEST NAME DOMAIN", file=sys.stderr)
        return 2
    src, dest, name, domain = argv[0], argv[1], argv[2], int(argv[3])

    def check(tmp: str) -> None:
        # a fresh interpreter: tables imported while checking SRC must load from DEST's pythonpath too
        run = subprocess.run(
            [sys.executable, "-m", "pmda_py", "pmns", "-c", tmp],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if run.returncode:
            why = run.stderr.strip().replace("pmda-py pmns: ", "", 1).replace(tmp, dest)
            raise ValueError(why or f"{dest} would be bad")

    try:
        _mounts(["-c", src])
        with open(src, encoding="utf-8") as f:
            text = configured_text(f.read(), name, domain)
        # the checked temporary is what is put in place (never through a link)
        atomic_write(dest, text.encode("utf-8"), check=check)
    except (Exception, SystemExit) as err:  # one clear line, nothing installed
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    return 0


def shared_directory(path: str) -> str | None:
    """Why others than its owner may write the directory ``path`` (None:
    they cannot): anyone (mode o+w, ``/tmp`` included), or a group that is
    not its owner's own."""
    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    if mode & stat.S_IWOTH:
        return f"anyone can write it (mode {mode:04o})"
    if mode & stat.S_IWGRP:
        import grp
        import pwd

        try:
            own = pwd.getpwuid(st.st_uid).pw_gid
        except KeyError:
            own = -1
        if st.st_gid != own:
            try:
                group = grp.getgrgid(st.st_gid).gr_name
            except KeyError:
                group = str(st.st_gid)
            return f"group {group} can write it (mode {mode:04o})"
    return None


def source_main(argv: Sequence[str]) -> int:
    """``python -m pmda_py.tools.installer source DIR``: exit 1 with one line
    if DIR, where Install takes a config and the tables beside it (copied,
    then imported as root to check them), may be written by others than
    its owner: a ``*.py`` planted there would run as root."""
    if len(argv) != 1:
        print("usage: pmda-py install: source DIR", file=sys.stderr)
        return 2
    try:
        why = shared_directory(argv[0])
    except OSError as err:
        why = err.strerror or str(err)
    if why:
        print(
            f"pmda-py install: {argv[0]}: {why}; its *.py files would be copied and run as root: "
            "put the config and its tables in a directory only its owner can write",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch for ``python -m pmda_py.tools.installer pmns|help|pmcdconf|configure|source``."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands: dict[str, Callable[[Sequence[str]], int]] = {
        "pmns": pmns_main,
        "help": help_main,
        "pmlogconf": pmlogconf_main,
        "pmcdconf": pmcdconf_main,
        "configure": configure_main,
        "source": source_main,
    }
    if not args or args[0] not in commands:
        print(f"usage: python -m pmda_py.tools.installer {'|'.join(commands)} ...", file=sys.stderr)
        return 2
    return commands[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
