"""``python -m pmda_py``: same as the ``pmda-py`` console script."""

from __future__ import annotations

from pmda_py.cli import main

raise SystemExit(main())
