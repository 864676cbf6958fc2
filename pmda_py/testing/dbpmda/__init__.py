"""``pmda-py dbpmda``: PCP's dbpmda, its command language and its transcript.

- :mod:`~pmda_py.testing.dbpmda.lexer`: the tokens of dbpmda's ``lex.l``;
- :mod:`~pmda_py.testing.dbpmda.parser`: the productions of its ``gram.y``;
- :mod:`~pmda_py.testing.dbpmda.session`: the statements, run against a PMDA;
- :mod:`~pmda_py.testing.dbpmda.link`: the PDU exchange with the open PMDA;
- :mod:`~pmda_py.testing.dbpmda.requests`: the statements the PMDA answers;
- :mod:`~pmda_py.testing.dbpmda.transcript`: where the output goes, and the dumps;
- :mod:`~pmda_py.testing.dbpmda.format`: libpcp's and dbpmda's output formats;
- :mod:`~pmda_py.testing.dbpmda.cli`: the command line.

Library use: :class:`DbpmdaSession` (``await session.execute(line)``).
"""

from __future__ import annotations

from pmda_py.testing.dbpmda.cli import main
from pmda_py.testing.dbpmda.format import format_units, print_value
from pmda_py.testing.dbpmda.session import DbpmdaSession, run_script

__all__ = ["DbpmdaSession", "format_units", "main", "print_value", "run_script"]
