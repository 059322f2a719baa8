"""``dsh import FILE|DIR``: bring session logs (dsh exports, deepseek-harness logs) into the
store. A session already there with the same events is skipped; one with the same id and
different events is reported and never overwritten; a bad log is rejected whole, naming its
file and line, and nothing of it is stored."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from core.display import single_line
from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError
from core.importers.detect import LOG_SUFFIXES, LoadedLog, is_log_name, load_session_log, same_log
from core.logfile import LogImportError
from core.store import SessionStore
from tui.shared.errors import describe_error

__all__ = ["ImportOutcome", "ImportSummary", "find_logs", "import_log", "import_tree"]

Status = Literal["imported", "present", "conflict", "rejected"]


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    status: Status
    session_id: str | None = None
    reason: str = ""  # for a rejected log: "line N: …"
    log: LoadedLog | None = None


@dataclass
class ImportSummary:
    outcomes: list[tuple[str, ImportOutcome]] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for _, o in self.outcomes if o.status == status)


def find_logs(root: Path) -> list[Path]:
    """Every session log under ``root`` (symlinked directories are not followed), sorted."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        found.extend(Path(folder, name) for name in sorted(files) if is_log_name(name))
    return found


async def import_log(store: SessionStore, raw: bytes) -> ImportOutcome:
    """Import one log's bytes; never overwrites a session."""
    try:
        log = await asyncio.to_thread(load_session_log, raw)
    except LogImportError as err:
        return ImportOutcome("rejected", reason=describe_error(err))
    header = log.header
    for _ in range(2):  # a second look when another writer created it meanwhile
        try:
            stored = await store.read_header(header.id)
        except SessionNotFoundError:
            try:
                await store.import_session(header, log.events)
            except SessionExistsError:
                continue
            except InvalidEventError as err:  # a rule only the store checks
                return ImportOutcome("rejected", header.id, describe_error(err), log)
            return ImportOutcome("imported", header.id, log=log)
        events = await store.read_events(header.id)
        same = same_log(stored, events, header, log.events)
        return ImportOutcome("present" if same else "conflict", header.id, log=log)
    return ImportOutcome("conflict", header.id, log=log)


def _progress(done: int, total: int, name: str) -> None:
    width = 20
    filled = width * done // total if total else width
    bar = "#" * filled + "." * (width - filled)
    line = f"[{bar}] {done}/{total} {single_line(name, 50)}"
    sys.stderr.write(f"\r\x1b[K{line}")
    sys.stderr.flush()


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


async def import_tree(store: SessionStore, root: Path) -> ImportSummary:
    """Import every log under ``root``, with a progress bar on a terminal."""
    paths = await asyncio.to_thread(find_logs, root)
    summary = ImportSummary()
    show = _on_terminal()
    for number, path in enumerate(paths, start=1):
        name = str(path.relative_to(root))
        if show:
            _progress(number - 1, len(paths), name)
        try:
            raw = await asyncio.to_thread(path.read_bytes)
        except OSError as err:
            outcome = ImportOutcome("rejected", reason=f"cannot read it: {describe_error(err)}")
        else:
            outcome = await import_log(store, raw)
        summary.outcomes.append((name, outcome))
    if show and paths:
        _progress(len(paths), len(paths), "")
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
    return summary


def summary_lines(root: str, summary: ImportSummary) -> list[str]:
    """The report of ``dsh import DIR``, every name escaped for the terminal."""
    total = len(summary.outcomes)
    if not total:
        suffixes = ", ".join(f"*{s}" for s in LOG_SUFFIXES)
        return [f"no session logs ({suffixes}) under {single_line(root)}"]
    lines = []
    for name, outcome in summary.outcomes:
        where = single_line(name)
        sid = single_line(outcome.session_id or "")
        if outcome.status == "imported":
            lines.append(f"imported: {where} → {sid}")
        elif outcome.status == "present":
            lines.append(f"already present (same events, skipped): {where} → {sid}")
        elif outcome.status == "conflict":
            lines.append(
                f"conflict: {where}: session {sid} already exists with different events; "
                "not overwritten"
            )
        else:
            lines.append(f"rejected: {where}: {outcome.reason}")
    lines.append(
        f"{summary.count('imported')} imported, {summary.count('present')} already present, "
        f"{summary.count('conflict')} conflicting (not overwritten), "
        f"{summary.count('rejected')} rejected, of {total} logs"
    )
    return lines
