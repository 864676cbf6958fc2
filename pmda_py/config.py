"""Daemon configuration: command line (pmdaGetOpt style) and the ``etc/`` file.

The config file is INI: a ``[pmda]`` section (name, domain, log settings,
domain labels) and one ``[table NAME]`` section per mounted table::

    [pmda]
    name = pypmda
    domain = 310
    pythonpath = .              ; dirs (relative to this file) for module:Class tables
    creds_timeout = 3           ; socket modes: seconds a peer has to send pmcd's CREDS
    load_timeout = 30           ; seconds a table's import may take (then: left out)
    standalone = no             ; socket modes: outlive pmcd sessions (systemd unit)
    bind = 127.0.0.1            ; -i/-6: listen address (default: loopback only)

    [table simple]
    table = simple              ; built-in name, entry point, or module:Class
    mount = pypmda.simple       ; full name prefix of its metrics
    deadline = 2.0              ; seconds before PM_ERR_AGAIN
    ; any other key is passed to the table as an option

A bad file raises :class:`ConfigFileError` naming the file, line and key;
nothing is started half-configured.  stdlib and attrs only.
"""

from __future__ import annotations

import argparse
import configparser
import json
import math
import os
import re
import socket
from collections.abc import Sequence
from typing import Literal, TypedDict

import attrs

from pmda_py.pcpversion import pcp_conf
from pmda_py.safefile import read_regular

__all__ = [
    "DEFAULT_CREDS_TIMEOUT",
    "DEFAULT_LOAD_TIMEOUT",
    "DEFAULT_DOMAIN",
    "DEFAULT_NAME",
    "Config",
    "ConfigFileError",
    "LogFormat",
    "LogLevel",
    "TableSpec",
    "Transport",
    "option_seconds",
    "option_whole",
    "parse_args",
    "seconds_value",
]

DEFAULT_NAME = "pypmda"
DEFAULT_DOMAIN = 310
#: Seconds a socket peer has to send pmcd's CREDS (pmcd's own default).
DEFAULT_CREDS_TIMEOUT = 3.0
#: Seconds a table's import and construction may take before the agent goes on without it.
DEFAULT_LOAD_TIMEOUT = 30.0

#: how pmcd reaches the daemon: its stdin/stdout, or a socket the daemon listens on
Transport = Literal["pipe", "unix", "inet", "ipv6"]
LogFormat = Literal["console", "json"]
LogLevel = Literal["debug", "info", "warning", "error"]
_LOG_FORMATS: tuple[LogFormat, ...] = ("console", "json")
#: as ``--log-level`` and the control table's ``log.level`` take them
_LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error")


class ConfigFileError(Exception):
    """A config problem, located: ``file:line: [section] key: message``."""

    def __init__(self, path: str, message: str, *, line: int | None = None, section: str = "", key: str = "") -> None:
        where = f"{path}:{line}" if line else path
        what = f"[{section}] " if section else ""
        what += f"{key}: " if key else ""
        super().__init__(f"{where}: {what}{message}")
        self.path, self.line, self.section, self.key = path, line, section, key


@attrs.frozen
class TableSpec:
    """One table to mount."""

    name: str  #: section name / label for logs
    table: str  #: built-in name, entry point or module:Class
    mount: str  #: full name prefix
    deadline: float | None = None
    options: dict[str, str] = attrs.field(factory=dict)
    #: ``file:line: [table NAME] table: `` where the config file names it ("" if not from a file)
    source: str = attrs.field(default="", eq=False)


@attrs.frozen(kw_only=True)
class Config:
    """Everything the daemon needs to start."""

    name: str = DEFAULT_NAME
    domain: int = DEFAULT_DOMAIN
    tables: tuple[TableSpec, ...] = ()
    transport: Transport = "pipe"
    address: str = ""  #: unix path or port
    bind_address: str = ""  #: inet/ipv6 listen address; "" is loopback (127.0.0.1 / ::1)
    creds_timeout: float = DEFAULT_CREDS_TIMEOUT  #: socket modes: seconds for a peer's CREDS
    load_timeout: float = DEFAULT_LOAD_TIMEOUT  #: seconds a table's import may take (see pmda_py.runtime.loader)
    standalone: bool = False  #: socket modes: back to listening when a pmcd session ends
    logfile: str | None = None
    log_format: LogFormat = "console"
    log_level: LogLevel = "info"
    debug: str = ""
    helpfile: str | None = None
    username: str | None = None
    notready: bool = False
    domain_labels: dict[str, object] | None = None  #: a JSON object
    state_dir: str = ""
    config_path: str | None = None
    mmv_compat: bool = False
    mmv_dir: str = ""
    python_path: tuple[str, ...] = ()  #: directories searched first for ``module:Class`` tables


class _Fields(TypedDict, total=False):
    """:class:`Config`'s fields, as the config file and the command line give them."""

    name: str
    domain: int
    tables: tuple[TableSpec, ...]
    transport: Transport
    address: str
    bind_address: str
    creds_timeout: float
    load_timeout: float
    standalone: bool
    logfile: str | None
    log_format: LogFormat
    log_level: LogLevel
    debug: str
    helpfile: str | None
    username: str | None
    notready: bool
    domain_labels: dict[str, object] | None
    state_dir: str
    config_path: str | None
    mmv_compat: bool
    mmv_dir: str
    python_path: tuple[str, ...]


def _line_of(path: str, text: str, section: str, key: str | None) -> int | None:
    """Line number of ``key`` in ``[section]`` (or of the section header)."""
    current = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = re.match(r"^\[(.+)\]$", s)
        if m:
            current = m.group(1).strip()
            if key is None and current == section:
                return n
            continue
        if current == section and key is not None and re.match(rf"^{re.escape(key)}\s*[=:]", s, re.IGNORECASE):
            return n
    return None


_PMDA_KEYS = {
    "name",
    "domain",
    "log_format",
    "log_level",
    "labels",
    "state_dir",
    "helpfile",
    "user",
    "pythonpath",
    "creds_timeout",
    "load_timeout",
    "standalone",
    "bind",
}

#: a PMDA name: a log file's name, a default mount's first part
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

_BOOLEANS = {"1": True, "yes": True, "true": True, "on": True, "0": False, "no": False, "false": False, "off": False}


def creds_timeout_value(text: str) -> float:
    """Seconds for the creds timeout: a number above 0, at most 300."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None
    if not 0 < value <= 300:
        raise ValueError(f"{value:g} out of range (0, 300] seconds")
    return value


def seconds_value(text: str, *, zero: bool = False) -> float:
    """``text`` as a finite number of seconds above 0 (``zero``: 0 or more);
    ValueError says why not."""
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        raise ValueError(f"{text!r} is not a number of seconds {'0 or more' if zero else 'above 0'}")
    return seconds


def option_seconds(key: str, value: str, *, zero: bool = False) -> float:
    """A table option (its ``[table]`` section's ``key = value``, a string)
    in seconds; a bad one is a ValueError naming the option and the value,
    which the daemon says in its one line at start."""
    try:
        return seconds_value(value, zero=zero)
    except ValueError as err:
        raise ValueError(f"{key}: {err}") from None


def option_whole(key: str, value: str, least: int) -> int:
    """A table option that is a whole number, ``least`` or more (as :func:`option_seconds`)."""
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{key}: not a whole number: {value!r}") from None
    if number < least:
        raise ValueError(f"{key}: {value!r} is less than {least}")
    return number


class _CaseParser(configparser.ConfigParser):
    """Option names keep their case (a table's options are its own)."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


#: bytes a config file may have (a config naming a few hundred tables is a few tens of KB)
MAX_CONFIG_FILE = 4 << 20


def read_config_text(path: str) -> str:
    """The text of the config file ``path``: a regular file of at most
    :data:`MAX_CONFIG_FILE` bytes, so a FIFO or device put at the path
    cannot stall the agent's start or a reload (OSError, including
    :class:`~pmda_py.safefile.FileRefused`; UnicodeDecodeError)."""
    return read_regular(path, MAX_CONFIG_FILE, whole=True).decode("utf-8")


def load_file(path: str) -> _Fields:
    """Parse a config file into keyword arguments for :class:`Config`.

    Raises:
        ConfigFileError: with file, line and key.
    """
    try:
        text = read_config_text(path)
    except OSError as err:
        raise ConfigFileError(path, f"cannot read: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise ConfigFileError(path, f"not UTF-8 text: {err}") from err
    cp = _CaseParser(interpolation=None, strict=True, inline_comment_prefixes=(";",))
    try:
        cp.read_string(text, source=path)
    except configparser.Error as err:
        line = getattr(err, "lineno", None)
        msg = str(err).splitlines()[0]
        raise ConfigFileError(path, msg, line=line) from err

    def fail(section: str, key: str | None, msg: str) -> ConfigFileError:
        return ConfigFileError(path, msg, line=_line_of(path, text, section, key), section=section, key=key or "")

    out: _Fields = {"config_path": path}
    tables: list[TableSpec] = []
    for section in cp.sections():
        if section == "pmda":
            for key, value in cp.items(section):
                if key not in _PMDA_KEYS:
                    raise fail(section, key, f"unknown key (expected one of {', '.join(sorted(_PMDA_KEYS))})")
                if key == "domain":
                    try:
                        dom = int(value)
                    except ValueError:
                        raise fail(section, key, f"not a number: {value!r}") from None
                    if not 1 <= dom <= 510:
                        raise fail(section, key, f"domain {dom} out of range 1-510")
                    out["domain"] = dom
                elif key == "labels":
                    try:
                        labels = json.loads(value)
                    except ValueError as err:
                        raise fail(section, key, f"not JSON: {err}") from None
                    if not isinstance(labels, dict):
                        raise fail(section, key, "must be a JSON object")
                    out["domain_labels"] = labels
                elif key == "log_format":
                    fmt = next((f for f in _LOG_FORMATS if f == value), None)
                    if fmt is None:
                        raise fail(section, key, "must be console or json")
                    out["log_format"] = fmt
                elif key == "log_level":
                    level = next((lv for lv in _LOG_LEVELS if lv == value.lower()), None)
                    if level is None:
                        raise fail(section, key, f"unknown level {value!r} ({', '.join(_LOG_LEVELS)})")
                    out["log_level"] = level
                elif key == "name":
                    if not _NAME.fullmatch(value):
                        raise fail(section, key, f"bad PMDA name {value!r}")
                    out["name"] = value
                elif key == "user":
                    out["username"] = value
                elif key == "creds_timeout":
                    try:
                        out["creds_timeout"] = creds_timeout_value(value)
                    except ValueError as err:
                        raise fail(section, key, str(err)) from None
                elif key == "load_timeout":
                    try:
                        out["load_timeout"] = creds_timeout_value(value)
                    except ValueError as err:
                        raise fail(section, key, str(err)) from None
                elif key == "standalone":
                    if value.lower() not in _BOOLEANS:
                        raise fail(section, key, f"not a boolean: {value!r} (yes/no, true/false, on/off, 1/0)")
                    out["standalone"] = _BOOLEANS[value.lower()]
                elif key == "bind":
                    out["bind_address"] = value
                elif key == "pythonpath":
                    dirs = []
                    for entry in value.replace(":", " ").split():
                        full = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), entry))
                        if not os.path.isdir(full):
                            raise fail(section, key, f"not a directory: {entry!r} ({full})")
                        dirs.append(full)
                    out["python_path"] = tuple(dirs)
                elif key == "state_dir":
                    out["state_dir"] = value
                else:  # helpfile
                    out["helpfile"] = value
            continue
        m = re.fullmatch(r"table\s+(\S+)", section)
        if not m:
            raise fail(section, None, "unknown section (expected [pmda] or [table NAME])")
        tname = m.group(1)
        opts = dict(cp.items(section))
        kind = opts.pop("table", tname)
        mount = opts.pop("mount", None)
        if mount is None:
            raise fail(section, None, "missing key 'mount'")
        if mount and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*", mount):
            raise fail(section, "mount", f"bad mount point {mount!r}")
        deadline = None
        if "deadline" in opts:
            try:
                deadline = float(opts.pop("deadline"))
            except ValueError:
                raise fail(section, "deadline", "not a number") from None
            if not 0 < deadline < 5:
                raise fail(section, "deadline", "must be between 0 and 5 seconds (pmcd's timeout)")
        line = _line_of(path, text, section, "table") or _line_of(path, text, section, None)
        source = f"{path}:{line}: [{section}] table: " if line else ""
        tables.append(TableSpec(tname, kind, mount, deadline, opts, source=source))
    out["tables"] = tuple(tables)
    return out


def _check_port(flag: str, text: str) -> None:
    """``-i``/``-6``'s PORT: a number 1-65535 or a service name (as pmdaGetOpt
    takes it); anything else is one line and exit 1, before anything opens."""
    if text.isdigit():
        if 1 <= int(text) <= 65535:
            return
    else:
        try:
            socket.getservbyname(text, "tcp")
            return
        except OSError:
            pass
    raise SystemExit(f"pmda-py run: {flag} {text!r}: not a port (a number 1-65535 or a service name)")


def _table_arg(text: str) -> TableSpec:
    name, _, mount = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"bad --table {text!r}: NAME[=MOUNT]")
    mount = mount if _ else name.split(":")[-1].split(".")[-1]
    return TableSpec(name, name, mount)


def _seconds_arg(text: str) -> float:
    try:
        return creds_timeout_value(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive_seconds_arg(text: str) -> float:
    try:
        return seconds_value(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _count_arg(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"not a whole number 0 or more: {text!r}")
    return int(text)


def build_parser(prog: str = "pmda-py run") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        add_help=False,
        description="Run the pmda_py PMDA daemon (pmcd starts it from pmcd.conf).",
    )
    p.add_argument("--help", action="help", help="show this help and exit")
    p.add_argument("-d", "--domain", type=int, help="PMDA domain number (1-510)")
    p.add_argument("-D", "--debug", default="", help="debug options (any value turns on debug logging)")
    p.add_argument("-h", "--helpfile", help="help text file (newhelp output, without .dir/.pag)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-i", "--inet", metavar="PORT", help="listen on an IPv4 port; pmcd connects")
    g.add_argument("-6", "--ipv6", metavar="PORT", help="listen on an IPv6 port; pmcd connects")
    g.add_argument("-u", "--unix", metavar="PATH", help="listen on a unix socket; pmcd connects")
    g.add_argument("-p", "--pipe", action="store_true", help="talk to pmcd on stdin/stdout (default)")
    p.add_argument(
        "--bind",
        metavar="ADDRESS",
        help="with -i/-6: the address to listen on (default: loopback only, 127.0.0.1 or ::1)",
    )
    p.add_argument(
        "--standalone",
        action="store_true",
        help="socket modes: not started by pmcd; when pmcd goes away, keep the tables and listen for the next pmcd",
    )
    p.add_argument(
        "--creds-timeout",
        type=_seconds_arg,
        metavar="SECONDS",
        help="socket modes: a peer that has not sent pmcd's CREDS after this long is dropped (default 3)",
    )
    p.add_argument(
        "--load-timeout",
        type=_seconds_arg,
        metavar="SECONDS",
        help="a table whose import takes longer is left out (at start) or the reload fails (SIGHUP); default 30",
    )
    p.add_argument("-l", "--log", metavar="FILE", help="log file (default $PCP_LOG_DIR/pmcd/NAME.log)")
    p.add_argument("-U", "--username", help="user to run as after opening the log and sockets")
    p.add_argument("-c", "--config", help="config file (tables to mount, name, domain)")
    p.add_argument(
        "-t",
        "--table",
        action="append",
        type=_table_arg,
        default=[],
        metavar="NAME[=MOUNT]",
        help="mount a table (built-in, entry point or module:Class) at MOUNT; repeatable",
    )
    p.add_argument("-n", "--name", help="PMDA name (logs, default domain label)")
    p.add_argument("--notready", action="store_true", help="start not ready (pmcd.conf 'notready'); send READY later")
    p.add_argument("--log-format", choices=["console", "json"])
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    p.add_argument("--state-dir", help="where instance-id caches are kept")
    p.add_argument("--mmv-compat", action="store_true", help="serve only the MMV table at 'mmv', as pmdammv does")
    p.add_argument("--mmv-dir", help="MMV directory (default $PCP_TMP_DIR/mmv)")
    p.add_argument(
        "--mmv-allowed-users",
        metavar="USERS",
        help="with --mmv-compat: serve only MMV files owned by these users (comma-separated names or uids; "
        "checked on the opened file); default any owner, as pmdammv",
    )
    p.add_argument(
        "--openmetrics-compat",
        action="store_true",
        help="serve only the OpenMetrics table at 'openmetrics' (domain 144), as pmdaopenmetrics does",
    )
    p.add_argument(
        "--openmetrics-dir", help="OpenMetrics config directory (default $PCP_PMDAS_DIR/openmetrics/config.d)"
    )
    p.add_argument(
        "--openmetrics-interval", type=_positive_seconds_arg, help="seconds between scrapes of each source (default 10)"
    )
    p.add_argument(
        "--openmetrics-timeout", type=_positive_seconds_arg, help="deadline of one scrape in seconds (default 2)"
    )
    p.add_argument(
        "--openmetrics-workers",
        type=_count_arg,
        help="scraper worker processes (default: none while the daemon keeps up with its sources, then 1 "
        "and more up to the CPUs while they cannot; N: exactly N; 0: the daemon scrapes, for good)",
    )
    return p


def parse_args(argv: Sequence[str], prog: str = "pmda-py run") -> Config:
    """Command line (and the config file it names) -> :class:`Config`;
    ``prog`` names the command in argparse's errors.

    Raises:
        ConfigFileError: the config file is bad.
        SystemExit: bad command line (argparse).
    """
    parser = build_parser(prog)
    ns = parser.parse_args(list(argv))
    if ns.mmv_allowed_users and not ns.mmv_compat:
        parser.error("--mmv-allowed-users needs --mmv-compat (a config file sets allowed_users in the mmv table)")
    kw: _Fields = {}
    if ns.config:
        kw.update(load_file(ns.config))
    conf = pcp_conf()
    if ns.mmv_compat:
        kw["name"] = ns.name or "mmv"
        kw["domain"] = ns.domain if ns.domain is not None else 70
        mmv_dir = ns.mmv_dir or os.path.join(conf["PCP_TMP_DIR"], "mmv")
        mmv_options = {"compat": "1", "dir": mmv_dir}
        if ns.mmv_allowed_users:
            mmv_options["allowed_users"] = ns.mmv_allowed_users
        kw["tables"] = (TableSpec("mmv", "mmv", "mmv", None, mmv_options),)
        kw["mmv_compat"] = True
        kw["domain_labels"] = {"agent": "mmv"}
    if ns.openmetrics_compat:
        kw["name"] = ns.name or "openmetrics"
        kw["domain"] = ns.domain if ns.domain is not None else 144
        om: dict[str, str] = {
            "dir": ns.openmetrics_dir or os.path.join(conf["PCP_PMDAS_DIR"], "openmetrics", "config.d")
        }
        if ns.openmetrics_interval is not None:
            om["interval"] = str(ns.openmetrics_interval)
        if ns.openmetrics_timeout is not None:
            om["timeout"] = str(ns.openmetrics_timeout)
        if ns.openmetrics_workers is not None:
            om["workers"] = str(ns.openmetrics_workers)
        kw["tables"] = (TableSpec("openmetrics", "openmetrics", "openmetrics", None, om),)
        kw["domain_labels"] = {"agent": "openmetrics"}
    if ns.table:
        kw["tables"] = tuple(kw.get("tables", ())) + tuple(ns.table)
    if ns.domain is not None:
        if not 1 <= ns.domain <= 510:
            raise SystemExit(f"pmda-py run: domain {ns.domain} out of range 1-510")
        kw["domain"] = ns.domain
    if ns.name:
        if not _NAME.fullmatch(ns.name):
            raise SystemExit(f"pmda-py run: -n {ns.name!r}: bad PMDA name (a letter, then letters, digits or _)")
        kw["name"] = ns.name
    if ns.unix:
        kw["transport"], kw["address"] = "unix", ns.unix
    elif ns.inet:
        _check_port("-i", ns.inet)
        kw["transport"], kw["address"] = "inet", ns.inet
    elif ns.ipv6:
        _check_port("-6", ns.ipv6)
        kw["transport"], kw["address"] = "ipv6", ns.ipv6
    if ns.bind:
        if kw.get("transport") not in ("inet", "ipv6"):
            raise SystemExit("pmda-py run: --bind needs -i or -6")
        kw["bind_address"] = ns.bind
    if ns.standalone:
        kw["standalone"] = True
    if ns.creds_timeout is not None:
        kw["creds_timeout"] = ns.creds_timeout
    if ns.load_timeout is not None:
        kw["load_timeout"] = ns.load_timeout
    name = kw.get("name", DEFAULT_NAME)
    kw["logfile"] = ns.log or os.path.join(conf["PCP_LOG_DIR"], "pmcd", f"{name}.log")
    if ns.log_format:
        kw["log_format"] = ns.log_format
    if ns.log_level:
        kw["log_level"] = ns.log_level
    if ns.debug:
        kw["debug"] = ns.debug
        kw["log_level"] = "debug"
    if ns.helpfile:
        kw["helpfile"] = ns.helpfile
    if ns.username:
        kw["username"] = ns.username
    kw["notready"] = ns.notready
    kw["state_dir"] = ns.state_dir or kw.get("state_dir") or os.path.join(conf["PCP_VAR_DIR"], "config", "pmda")
    kw["mmv_dir"] = ns.mmv_dir or os.path.join(conf["PCP_TMP_DIR"], "mmv")
    if not kw.get("tables"):
        kw["tables"] = (
            TableSpec("simple", "simple", f"{name}.simple"),
            TableSpec("control", "control", f"{name}.control"),
        )
    return Config(**kw)
