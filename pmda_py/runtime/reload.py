"""SIGHUP: re-read the configuration and swap in new tables atomically (see
:func:`reload`)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import structlog

from pmda_py import logconfig
from pmda_py.config import Config, ConfigFileError, parse_args
from pmda_py.dispatch import ConfigError
from pmda_py.runtime.loader import TableLoadError, load_dispatcher, shutdown_tables, start_tables
from pmda_py.runtime.pump import Active

__all__ = ["reload"]

log = structlog.get_logger("pmda_py.runtime")

#: settings a reload cannot apply: the daemon keeps the start's (and says so)
_FIXED_AT_START = ("creds_timeout", "standalone", "bind_address", "username", "logfile")


async def reload(active: Active, config: Config, argv: Sequence[str]) -> Config:
    """SIGHUP: re-read the command line's config and swap in new tables
    atomically.  A bad new config keeps the old one running; the new tables
    are imported in a worker thread (fetches go on meanwhile), and one that
    overruns the load timeout fails the reload."""
    if not active.loaded.is_set():
        log.info("reload_deferred", detail="the tables of the start are still loading")
        await active.loaded.wait()
    try:
        new = parse_args(argv)
        if (new.domain, new.name, new.transport, new.address) != (
            config.domain,
            config.name,
            config.transport,
            config.address,
        ):
            raise ConfigError("domain, name and transport cannot change on reload; restart the agent instead")
        # the counters carry over: the control table of the new tables reads them
        dispatcher = await load_dispatcher(new, stats=active.dispatcher.stats)
    except (ConfigFileError, ConfigError, TableLoadError, SystemExit) as err:
        log.error("reload_failed", error=str(err), action="keeping the running configuration")
        return config
    await start_tables(dispatcher, new.domain)
    old = active.dispatcher
    if set(old.all_names) != set(dispatcher.all_names):
        dispatcher.names_changed = True
    active.dispatcher = dispatcher
    if new.log_format != config.log_format:
        logconfig.set_format(new.log_format)
    log.info("reloaded", config=new.config_path, tables=[m.name for m in dispatcher.mounts])
    if new.log_level != config.log_level:  # (a level set since by pmstore stays until the config changes it)
        log.info("log_level", level=new.log_level, before=config.log_level)
        logconfig.set_level(new.log_level)
    # the listener's settings, the user dropped to and the log (opened as root) are the start's
    kept = [k for k in _FIXED_AT_START if getattr(new, k) != getattr(config, k)]
    if kept:
        log.warning(
            "reload_partial",
            not_applied=kept,
            detail="the listener's settings, the user and the log change on restart only",
        )
        new = attrs.evolve(new, **{k: getattr(config, k) for k in _FIXED_AT_START})
    await shutdown_tables(old)
    return new
