"""SIGTERM and SIGHUP mean "stop": every front end keeps what it has, then exits.

A reply in flight is interrupted the way Esc or Ctrl+C interrupts it, so the engine stores
the partial reply marked interrupted; closing the terminal (SIGHUP) or a service manager's
stop (SIGTERM) then loses nothing. Only the first signal is handled: from then on the
default action applies, so a second one ends a process that is stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator

__all__ = [
    "STOP_SIGNALS",
    "detach_from_terminal",
    "handle_stop_signals",
    "install_stop_handler",
    "stop_status",
    "terminal_fds",
    "terminal_gone",
]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def stop_status(signum: int) -> int:
    """The conventional exit status after stopping on signal ``signum`` (143, 129)."""
    return 128 + signum


def install_stop_handler(
    loop: asyncio.AbstractEventLoop, callback: Callable[[int], None]
) -> Callable[[], None]:
    """Call ``callback(signum)`` on ``loop`` for the first SIGTERM or SIGHUP; returns the
    function that removes the handlers (safe to call more than once)."""
    installed: list[int] = []

    def remove() -> None:
        while installed:
            loop.remove_signal_handler(installed.pop())

    def on_signal(signum: int) -> None:
        remove()  # a second signal takes the default action
        callback(signum)

    for signum in STOP_SIGNALS:
        try:
            loop.add_signal_handler(signum, on_signal, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # no Unix signals, not main
            continue
        installed.append(signum)
    return remove


@contextlib.contextmanager
def handle_stop_signals(callback: Callable[[int], None]) -> Iterator[None]:
    """``install_stop_handler`` on the running loop for the duration of the block."""
    remove = install_stop_handler(asyncio.get_running_loop(), callback)
    try:
        yield
    finally:
        remove()


def terminal_fds() -> tuple[int, ...]:
    """Which of stdin, stdout and stderr are a terminal now."""
    return tuple(fd for fd in (0, 1, 2) if _isatty(fd))


def terminal_gone(fds: tuple[int, ...]) -> bool:
    """Whether the terminal behind ``fds`` (from ``terminal_fds``) was hung up: on a hung-up
    terminal every control call fails, so it no longer reads as a terminal."""
    return bool(fds) and not all(_isatty(fd) for fd in fds)


def detach_from_terminal(fds: tuple[int, ...]) -> None:
    """Point ``fds`` at ``/dev/null``: writing to a hung-up terminal fails, and a program
    that is still saving its work must not die of it."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in fds:
            os.dup2(null, fd)
    finally:
        os.close(null)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
