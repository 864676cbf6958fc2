"""Files the agent reads that somebody else may put in place: a FIFO at the
path must not stall the reader (it is refused at once, not opened for a
read that waits for a writer), and a file larger than the reader's bound is
refused or cut, never read whole.

A FIFO test would hang on a reader that blocks; to fail instead, each one
has a writer that, a few seconds on, opens the FIFO (only if a reader is
waiting on it) and writes text the reader must not have taken."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pmda_py import pcpversion
from pmda_py.config import MAX_CONFIG_FILE, ConfigFileError, load_file
from pmda_py.helpfile import MAX_HELP_FILE, HelpFile
from pmda_py.safefile import FileRefused
from pmda_py.tables.simple import CONF_LINE, SimpleTable

#: seconds before the writer looks for a reader stuck on the FIFO
RELEASE_AFTER = 3.0


@contextmanager
def fifo(path: Path, text: bytes) -> Iterator[list[bool]]:
    """A FIFO at ``path``; yields a list that says, once the block ends,
    whether a reader was found waiting on it (and was given ``text``)."""
    os.mkfifo(path)
    found: list[bool] = []
    done = threading.Event()

    def release() -> None:
        if done.wait(RELEASE_AFTER):
            return
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: nobody is reading
        except OSError:
            return
        found.append(True)
        try:
            os.write(fd, text)
        finally:
            os.close(fd)

    writer = threading.Thread(target=release, daemon=True)
    writer.start()
    try:
        yield found
    finally:
        done.set()
        writer.join()


def test_a_help_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    (tmp_path / "help.dir").write_bytes(b"")
    with fifo(tmp_path / "help.pag", b"x") as found, pytest.raises(FileRefused, match="not a regular file"):
        HelpFile.open(str(tmp_path / "help"))
    assert not found, "the reader waited on the FIFO"


def test_a_help_file_over_its_bound_is_refused_unread(tmp_path: Path) -> None:
    header = (0x50635068).to_bytes(4, "little") + (0x31320000).to_bytes(4, "little") + bytes(4)
    (tmp_path / "help.dir").write_bytes(header)
    with open(tmp_path / "help.pag", "wb") as f:
        f.truncate(MAX_HELP_FILE + 1)  # sparse: nothing to read but zeros
    with pytest.raises(FileRefused) as refused:
        HelpFile.open(str(tmp_path / "help"))
    assert refused.value.errno == errno.EFBIG


def test_a_config_file_that_is_a_fifo_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "pmda_py.conf"
    with fifo(path, b"[agent]\ndomain = 253\n") as found, pytest.raises(ConfigFileError) as err:
        load_file(str(path))
    assert not found, "the reader waited on the FIFO"
    assert "not a regular file" in str(err.value)


def test_a_config_file_over_its_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pmda_py.conf"
    with open(path, "wb") as f:
        f.write(b"[agent]\n")
        f.truncate(MAX_CONFIG_FILE + 1)
    with pytest.raises(ConfigFileError, match="larger than"):
        load_file(str(path))


def test_pcp_conf_that_is_a_fifo_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "pcp.conf"
    monkeypatch.setenv("PCP_CONF", str(path))
    monkeypatch.delenv("PCP_USER", raising=False)
    pcpversion._read_conf.cache_clear()
    try:
        with fifo(path, b"PCP_USER=planted\n") as found:
            conf = pcpversion.pcp_conf()
        assert not found, "the reader waited on the FIFO"
        assert conf["PCP_USER"] == pcpversion.PCP_CONF_DEFAULTS["PCP_USER"]
    finally:
        pcpversion._read_conf.cache_clear()


def _now_names(table: SimpleTable) -> list[str]:
    table._timenow_check()
    return sorted(table.time.instances.values())


def test_simple_conf_that_is_a_fifo_names_no_instance(tmp_path: Path) -> None:
    path = tmp_path / "simple.conf"
    table = SimpleTable(config=str(path))
    start = time.monotonic()
    with fifo(path, b"sec,min\n") as found:
        names = _now_names(table)
    assert not found, f"the FETCH's read waited {time.monotonic() - start:.1f}s on the FIFO"
    assert names == []


def test_simple_conf_first_line_is_read_to_pmdasimples_bound(tmp_path: Path) -> None:
    path = tmp_path / "simple.conf"
    # C pmdasimple takes the first 255 bytes of the line: "min" past them is not read,
    # nor is the rest of a line that never ends
    path.write_bytes(b"sec," + b"x" * (CONF_LINE - 9) + b",hour,min," + b"y" * (8 << 20))
    table = SimpleTable(config=str(path))
    assert _now_names(table) == ["hour", "sec"]
    path.write_bytes(b"hour,min\nsec\n")  # the first line only
    assert _now_names(table) == ["hour", "min"]
