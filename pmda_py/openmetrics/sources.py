"""The configured sources: the config directory read as pmdaopenmetrics
reads it (``*.url`` files and executable scripts, named by their path), and
each source's scrape state in the daemon."""

from __future__ import annotations

import math
import os
import socket
import stat

import attrs
import trio

from pmda_py.openmetrics.model import SourceConfig, SourceModel
from pmda_py.table import Metric

__all__ = ["Found", "Source", "find_sources", "valid_source_name"]


@attrs.frozen
class Found:
    """A source's config file (or script) in the config directory."""

    name: str
    path: str
    scripted: bool


def find_sources(top_dir: str, sort: bool) -> list[Found]:
    """Every source in ``top_dir`` (hidden files and directories skipped;
    sorted by path when ``sort``); raises OSError if it cannot be read."""
    found: list[Found] = []
    for top, dirs, files in os.walk(top_dir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.startswith("."):
                continue
            path = os.path.join(top, f)
            try:
                st = os.stat(path)
            except OSError:
                continue
            scripted = bool(st.st_mode & stat.S_IXUSR)
            base, ext = os.path.splitext(path)
            if not scripted and ext != ".url":
                continue
            name = base.replace(top_dir + "/", "").replace("/", ".")
            found.append(Found(name, path, scripted))
    if sort:
        found.sort(key=lambda t: t.path)
    return found


def valid_source_name(name: str) -> bool:
    """A name the PCP namespace can hold under ``openmetrics.`` (``control`` is taken)."""
    return name != "control" and name[:1].isalpha() and all(c.isalnum() or c in "_." for c in name) and name.isascii()


@attrs.define(eq=False)
class Source:
    """A configured source and its scrape state."""

    name: str
    cluster: int
    path: str
    scripted: bool
    model: SourceModel  #: a mirror of the scraper's model: metadata, and the packed values
    config: SourceConfig = attrs.field(factory=SourceConfig)
    calls: int = 0
    fetch_ms: int = 0
    parse_ms: int = 0
    status: str = "unknown"
    status_code: int = 0
    last_good: float = -math.inf
    exported: dict[int, Metric] = attrs.field(factory=dict)  #: item -> Metric now in the namespace
    scope: trio.CancelScope | None = None
    logged_status: str = ""
    #: the last document's problems (logged), without their details in brackets
    logged_problems: list[str] = attrs.field(factory=list)
    version: int = 0  #: bumped by every good scrape (the packed plans check it)
    scrapes: int = 0  #: scrapes started (the round it is in)

    def cluster_labels(self) -> dict[str, str]:
        if self.scripted:
            return {"script": self.path, "source": self.name}
        url = self.config.url
        if url.startswith("http"):
            host = url.replace("http://", "").replace("https://", "").split("/")[0]
        elif url.startswith("file://"):
            host = socket.gethostname()
        else:
            host = "localhost"
        if host == "localhost":
            host = socket.gethostname()
        return {"hostname": host, "source": self.name, "url": url}
