"""Opening one session log file for replay (``dsh replay FILE``): read-only, no database.

The file may be dsh's own JSONL export or a reference implementation log (raw or Zstandard);
it is validated exactly as ``dsh import`` would, then held in a :class:`stores.replay.ReplayStore`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.config import DshConfig
from core.display import single_line
from core.errors import DshError
from core.importers.detect import load_session_log
from core.logfile import LogImportError
from core.providers.offline import OfflineProvider
from stores.replay import ReplayStore
from tui.shared.runtime import Runtime, build_runtime

__all__ = ["ReplayError", "open_replay", "replay_now", "replay_reason", "replay_runtime"]


class ReplayError(DshError):
    """The file cannot be replayed; the message names the file (and the line, when one is
    at fault) in one line."""


def replay_reason(path: str) -> str:
    """The banner the app shows over a replay (why nothing can be written)."""
    return f"Replay of {single_line(path, 120)} (read-only)"


async def open_replay(path: str, *, at: int | None = None) -> ReplayStore:
    """The log at ``path`` in a read-only store; with ``at``, only its events up to seq
    ``at`` (the session as it was then). Reading happens off the event loop."""
    shown = single_line(path, 120)
    try:
        raw = await asyncio.to_thread(Path(path).read_bytes)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        reason = getattr(err, "strerror", None) or str(err)
        raise ReplayError(f"cannot read {shown}: {single_line(reason)}") from err
    try:
        log = await asyncio.to_thread(load_session_log, raw)
    except LogImportError as err:  # its words start with the line at fault
        raise ReplayError(f"{shown}: {single_line(str(err))}") from err
    events = log.events
    if at is not None:
        if not 0 <= at < len(events):
            raise ReplayError(f"{shown}: --at {at} is outside the log (seqs 0–{len(events) - 1})")
        events = events[: at + 1]
    try:
        return await ReplayStore.holding(log.header, events, replay_reason(path))
    except DshError as err:
        raise ReplayError(f"{shown}: {single_line(str(err))}") from err


def replay_runtime(config: DshConfig, store: ReplayStore) -> Runtime:
    """A runtime over the replay store: its query and reference service (so cards, the
    picker and "what the model received" work); the offline model, which nothing asks."""
    return build_runtime(config, store, OfflineProvider(config.effective_model))


async def replay_now(store: ReplayStore) -> int:
    """The clock of a replay's pictures: its log's last event (0 for an empty log), so ages
    and the picture depend on the file only."""
    return max((await store.read_last_event_times()).values(), default=0)
