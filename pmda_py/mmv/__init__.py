"""MMV: Memory Mapped Value files read as PCP's pmdammv reads them.

* :mod:`pmda_py.mmv.layout` -- the file layout: records, limits, problems;
* :mod:`pmda_py.mmv.regions` -- a file as read: the sections named, the rest on
  demand, within the limits;
* :mod:`pmda_py.mmv.reader` -- pure, bounds-checked parsing of one file;
* :mod:`pmda_py.mmv.model` -- what pmdammv exports for a set of files
  (names, PMIDs, descriptors, indoms, help, labels) and a fast value reader;
* :mod:`pmda_py.mmv.scanner` -- opening files others write (no
  blocking, sections only, owner on the descriptor) and the scanner thread;
* :mod:`pmda_py.mmv.watch` -- inotify on the directory;
* :mod:`pmda_py.mmv.table` -- the drop-in table that scans ``$PCP_TMP_DIR/mmv``
  (the table, and what each scan builds for it).

Label records go through libpcp's label parser, :mod:`pmda_py.pcplabels`.

Deliberately safer than pmdammv (each logged):
  * two files asking for the same cluster: the later file is rejected instead
    of sharing PMIDs (pmdammv mixes descriptors and values, and crashes pmcd
    when the types differ);
  * automatic clusters are kept per file across rescans (PMIDs stay stable);
  * every offset is checked: a value, string or instance pointer past the end
    of the file is an error, never a read;
  * values are read with ``pread`` into a private buffer: a file truncated or
    rewritten under us cannot raise SIGBUS; only the sections a header names
    are read, never through a FIFO or device, never blocking;
  * 7.x fixes followed: NaN sentinels drop the value, help needs no value
    entry, indom help text is exported.
"""

from __future__ import annotations

__all__: list[str] = []
