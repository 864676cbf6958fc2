"""A pcp.pmda compatibility runtime: PCP's own Python PMDAs, unchanged, on
pmda_py's engine.

``pmda-py compat SCRIPT [ARGS...]`` runs a PMDA script written against PCP's
Python binding (``pcp.pmda``/``pcp.pmapi``/``cpmapi``/``cpmda``) with no
libpcp loaded and without python3-pcp: an import hook (:mod:`.finder`)
shows that script alone shims of those modules (:mod:`.pmda`,
:mod:`.pmapi`, :mod:`.constants`); its metrics and callbacks become one
pmda_py table (:mod:`.table`, the callback protocol in :mod:`.callbacks`),
served by pmda_py's dispatcher when the script calls ``run()``
(:mod:`.runtime`; process-wide state in :mod:`.agent`, dict indoms in
:mod:`.cache`).  The command line is :mod:`.cli`.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """``pmda-py compat``: see :mod:`pmda_py.compat.cli`."""
    from pmda_py.compat.cli import main as _main

    return _main(argv)
