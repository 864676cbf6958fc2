"""Install-time generators: ``pmda-py pmns`` and ``pmda-py help``, and the
pmcd.conf edit of the MMV drop-in (``pmda-py help --mmv-line`` helpers).

``pmda-py pmns [-c CONFIG] [--symdom NAME]`` writes the PMNS fragment of the
configured tables: static leaves as ``SYMDOM:cluster:item``, and
``SYMDOM:*:*`` for dynamic tables (those whose metrics change, e.g. MMV).
``pmda-py help [-c CONFIG] [--symdom NAME]`` writes the help source for
``newhelp``: ``@ name oneline`` then the long text, indoms as ``@ SYMDOM.serial``.
pmdaproc.sh replaces ``SYMDOM`` with the domain number.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence

from pmda_py import logconfig
from pmda_py.config import Config, parse_args
from pmda_py.daemon import load_table
from pmda_py.dispatch import Dispatcher, Mount
from pmda_py.namespace import write_fragment

__all__ = ["help_main", "help_text", "main", "pmcdconf_main", "pmns_main", "pmns_text"]


def _mounts(argv: Sequence[str]) -> tuple[Config, list[Mount]]:
    logconfig.configure("-", "console", "warning", redirect_stderr=False)  # never onto stdout
    config = parse_args([*list(argv), "-l", os.devnull])
    mounts = [Mount(load_table(spec, config), spec.mount, spec.name, dict(spec.options)) for spec in config.tables]
    return config, mounts


class _NoRunner:
    async def call(self, table, what, fn):  # type: ignore[no-untyped-def]  # pragma: no cover
        raise RuntimeError("no table calls at install time")

    async def gather(self, calls):  # type: ignore[no-untyped-def]  # pragma: no cover
        raise RuntimeError("no table calls at install time")


def pmns_text(config: Config, mounts: list[Mount], symdom: str) -> str:
    """The PMNS fragment of the mounted tables, rooted at the PMDA name."""
    Dispatcher(config.domain, mounts, _NoRunner(), name=config.name)  # validates collisions
    leaves: dict[str, tuple[int, int]] = {}
    dynamic: list[str] = []
    for m in mounts:
        if m.table.name == "mmv" or getattr(m.table, "dynamic_names", False):
            dynamic.append(m.prefix)
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


def help_text(config: Config, mounts: list[Mount], symdom: str) -> str:
    """The newhelp source of the mounted tables (static metrics and indoms)."""
    out = [f"# help text for the {config.name} PMDA (pmda_py), written by 'pmda-py help'\n"]
    for m in mounts:
        if m.table.name == "mmv":
            continue
        for ind in m.table.indoms():
            if ind.oneline is not None:
                out.append(f"@ {symdom}.{ind.serial} {ind.oneline}\n{ind.help or ''}\n\n")
        for metric in m.table.metrics():
            if metric.oneline is not None:
                out.append(f"@ {m.full(metric)} {metric.oneline}\n{metric.help or ''}\n\n")
    return "".join(out)


def _common(prog: str, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--symdom", help="symbolic domain written in the output (default: the name in upper case)")
    p.add_argument("-o", "--output", help="write here instead of stdout")
    return p.parse_known_args(list(argv))


def _write(text: str, output: str | None) -> None:
    if output:
        with open(output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _generate(prog: str, argv: Sequence[str], render: Callable[[Config, list[Mount], str], str]) -> int:
    ns, rest = _common(prog, argv)
    try:
        config, mounts = _mounts(rest)
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


def pmcdconf_main(argv: Sequence[str]) -> int:
    """``pmda-py pmcdconf CONF NAME DOMAIN [LINE]``: print the agent line of NAME
    (exit 1 if none), or with LINE replace it (or add it before [access]).
    Refuses to use DOMAIN when another agent already has it."""
    if len(argv) < 3:
        print("usage: pmda-py pmcdconf CONF NAME DOMAIN [LINE]", file=sys.stderr)
        return 2
    path, name, domain = argv[0], argv[1], argv[2]
    with open(path) as f:
        lines = f.read().splitlines()
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
    tmp = f"{path}.pmda_py.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return 0


def main(argv: Sequence[str]) -> int:
    """Dispatch for ``python -m pmda_py.installer pmns|help|pmcdconf``."""
    if not argv:
        print("usage: pmda-py pmns|help|pmcdconf ...", file=sys.stderr)
        return 2
    return {"pmns": pmns_main, "help": help_main, "pmcdconf": pmcdconf_main}.get(argv[0], lambda a: 2)(argv[1:])
