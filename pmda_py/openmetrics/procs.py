"""Child processes of the OpenMetrics table: script sources, and signalling
workers without ever raising.

A script source runs with ``stdin`` on ``/dev/null`` (it must not read the
worker's request pipe), in a session of its own (``start_new_session``),
its stdout read up to the document cap and its stderr counted, never kept.
When it is done, whatever happened (exit, timeout, a document over the cap,
the agent stopping), its whole process group is killed while the script's
own process is still unreaped, so the group id cannot have been reused.
Its document is what was on its stdout when it exited: what it left running
in the background is killed then, whether or not it holds the pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess

import trio

__all__ = ["ScriptFailed", "child_groups", "kill_quietly", "run_script"]


class ScriptFailed(Exception):
    """A script source gave no document (its status says why)."""


def kill_quietly(proc: trio.Process) -> str | None:
    """SIGKILL ``proc`` (a trio Process); the reason if it could not be done
    (a process of another user after the privilege drop, one gone already).

    The process groups its children lead (a worker's script sources, each
    in a session of its own) are killed first, while ``proc`` still holds
    them as its children: a hung worker killed mid-scrape leaves no script
    and none of a script's children behind."""
    if proc.returncode is not None:
        return None
    for group in child_groups(proc.pid):
        _killpg(group)
    try:
        proc.kill()
    except ProcessLookupError:
        return None
    except OSError as err:
        return f"{type(err).__name__}: {err.strerror or err}"
    return None


def child_groups(pid: int) -> list[int]:
    """The process groups led by children of ``pid`` (from ``/proc``: each
    child whose process group id is its own pid)."""
    groups: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return groups
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read(1024)
        except OSError:  # (gone meanwhile)
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state ppid pgrp session ...
        if len(fields) > 2 and int(fields[1]) == pid and int(fields[2]) == int(name):
            groups.append(int(name))
    return groups


def _exited_unreaped(pid: int) -> bool:
    """Has ``pid`` (our child) exited? It stays a zombie (not reaped), so
    its pid and process group id cannot be reused yet."""
    try:
        res = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return res is not None


async def _until_exited(pid: int) -> None:
    """Until ``pid`` (our child) has exited, left unreaped (see
    :func:`_exited_unreaped`): woken by a pidfd where there is one, else polled."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # (Python before 3.9, Linux before 5.3)
        while not _exited_unreaped(pid):  # noqa: ASYNC110  # (polled: reaping it would free its group id)
            await trio.sleep(0.01)
        return
    try:
        while not _exited_unreaped(pid):
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # (nothing left in it, or not ours to signal)
        pass


async def run_script(path: str, limit: int) -> bytes:
    """The stdout of script ``path`` (at most ``limit`` bytes).

    Raises:
        ScriptFailed: the script failed, or wrote more than ``limit`` bytes.
    """
    proc = await trio.lowlevel.open_process(
        [path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    out = bytearray()
    err_bytes = [0]
    reaped = False

    async def drain_stderr() -> None:
        assert proc.stderr is not None
        while True:
            chunk = await proc.stderr.receive_some(65536)
            if not chunk:
                return
            err_bytes[0] += len(chunk)  # counted, never kept: it may hold anything the script could read

    async def end_group_at_exit() -> None:
        await _until_exited(proc.pid)
        # what it left running (its own process still holds the group id): a child that kept its
        # stdout or stderr would hold the reading up to the deadline, the script done long before
        _killpg(proc.pid)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_stderr)
            nursery.start_soon(end_group_at_exit)
            assert proc.stdout is not None
            while True:
                chunk = await proc.stdout.receive_some(65536)
                if not chunk:
                    break
                out += chunk
                if len(out) > limit:  # (raised out here, the nursery would wrap it in an ExceptionGroup)
                    nursery.cancel_scope.cancel()
                    break
        if len(out) > limit:
            raise ScriptFailed(f"script output larger than {limit} bytes")
        rc = await proc.wait()
        reaped = True
        if rc:
            extra = f" ({err_bytes[0]} bytes on stderr)" if err_bytes[0] else ""
            raise ScriptFailed(f"script exited with status {rc}{extra}")
        return bytes(out)
    finally:
        if not reaped:  # (timed out, over the cap, or the agent is stopping: the whole group)
            _killpg(proc.pid)  # (before anything reaps the script: its pid holds the group id)
            kill_quietly(proc)
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await proc.wait()
