"""Where a protocol server's log goes (``dsh acp``, ``dsh mcp``): stdout carries the
protocol only, so the log is stderr or a ``--log`` file, every record redacted."""

from __future__ import annotations

import errno
import logging
import os
import sys
from pathlib import Path
from typing import TextIO

from core.display import single_line
from core.errors import DshError
from core.secrets import RedactingFilter
from tui.shared.files import private_open

__all__ = ["configure_server_logging", "log_stream"]


def log_stream(log_file: str) -> TextIO:
    """The ``--log`` file opened for appending: private (0600), never through a symlink
    (issue 31); a ``DshError`` in one line when it cannot be."""
    try:
        fd = private_open(Path(log_file), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except OSError as err:
        why = "it is a symbolic link" if err.errno == errno.ELOOP else err.strerror or str(err)
        raise DshError(f"cannot open the log file {single_line(log_file)}: {why}") from err
    return os.fdopen(fd, "a", encoding="utf-8")


def configure_server_logging(log_file: str | None) -> None:
    """Every logger's records to ``log_file`` (INFO and up) or stderr (WARNING and up),
    through the secret-redacting filter."""
    handler: logging.Handler = logging.StreamHandler(
        log_stream(log_file) if log_file else sys.stderr
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())  # every record, whichever logger wrote it
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if log_file else logging.WARNING)
