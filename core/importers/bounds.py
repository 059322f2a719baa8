"""How much one session log file may make dsh read, hold and store (issue 31).

A log is untrusted input: a few kilobytes of Zstandard can decompress to gigabytes, and a
packed row of a reference log stands for as many events as it has members. Reading is
streamed and stopped, with one line naming the file and the limit, as soon as a log goes
past one of these. Each leaves wide headroom over real sessions (the reference logs of
``/work/shared/corpora``: at most 3 MB decompressed, lines of 0.5 MB, 836 members in a row
and 2,099 events in a session; the benchmarks' sessions: a million events).
"""

from __future__ import annotations

__all__ = [
    "MAX_IMPORT_EVENTS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINE_BYTES",
    "MAX_PACKED_ROW_MEMBERS",
]

MAX_LOG_BYTES = 4 * 1024**3
"""A whole log, decompressed (4 GiB): several times a 1 GB session in either format."""

MAX_LOG_LINE_BYTES = 64 * 1024**2
"""One line of a log, decompressed (64 MiB): one event or packed row. More than the
largest line ``dsh acp`` accepts (50 MiB), so every event dsh can store fits."""

MAX_PACKED_ROW_MEMBERS = 100_000
"""The members of one packed row (``text-chunks``, ``reasoning-chunks``,
``tool-call-chunks``): the events one line of a reference log may stand for."""

MAX_IMPORT_EVENTS = 10_000_000
"""The events of one imported (or replayed) session: ten times the largest benchmark."""
