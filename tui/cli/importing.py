"""``dsh import [FILE|DIR] [--from FORMAT]``: bring sessions into the store.

dsh's own logs (dsh exports, deepseek-harness logs): a session already there with the same
events is skipped; one with the same id and different events is reported and never
overwritten; a bad log is rejected whole, naming its file and line, and nothing of it is
stored. Only regular files are read (a FIFO or a device is skipped with a note), streamed
and within ``core.importers.bounds``.

Sessions of other tools (Claude Code, Codex, ChatGPT; issue 33): each file goes to the
format its first bytes say (``plan_file``, ``plan_tree``), each tool's files are read by
its reader one session at a time and stored by ``core.importers.foreign_import``
(incremental re-import, conflicts reported), one line per session."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from core.display import single_line
from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError
from core.importers.bounds import MAX_LOG_BYTES
from core.importers.detect import (
    LOG_SUFFIXES,
    LogFormat,
    StreamedLog,
    is_log_name,
    open_session_log,
    same_event,
)
from core.importers.foreign_import import (
    FORMAT_MODULES,
    TOOL_NAMES,
    ForeignOutcome,
    file_kind,
    import_foreign,
    load_format,
    read_head,
)
from core.importers.source import LogTooLargeError, NotRegularFileError, open_regular_file
from core.log import SessionHeader
from core.logfile import LogImportError
from core.store import SessionStore
from tui.shared.errors import describe_error

__all__ = [
    "ImportOutcome",
    "ImportSummary",
    "find_logs",
    "import_log",
    "import_path",
    "import_planned",
    "spool_stdin",
]

Status = Literal["imported", "present", "conflict", "rejected", "skipped"]


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    status: Status
    session_id: str | None = None
    reason: str = ""  # for a rejected log: "line N: …"; for a skipped file: why
    format: LogFormat | None = None


@dataclass
class ImportSummary:
    outcomes: list[tuple[str, ImportOutcome]] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for _, o in self.outcomes if o.status == status)


def find_logs(root: Path) -> list[Path]:
    """Every session log under ``root`` (symlinked directories are not followed), sorted.
    Names only: what each is (a regular file or not) is checked when it is opened."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        found.extend(Path(folder, name) for name in sorted(files) if is_log_name(name))
    return found


async def import_log(store: SessionStore, source: bytes | BinaryIO) -> ImportOutcome:
    """Import one log (its bytes, or a seekable file read from its start); never
    overwrites a session. The log is read, validated and stored a batch at a time in one
    transaction: memory is bounded by a batch, and a bad line stores nothing."""
    file = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        log = await asyncio.to_thread(_open, file)
        header = log.header
        for _ in range(2):  # a second look when another writer created it meanwhile
            try:
                stored = await store.read_header(header.id)
            except SessionNotFoundError:
                try:
                    await store.import_session(header, log.batches())
                except SessionExistsError:
                    log = await asyncio.to_thread(_open, file)  # read again from the start
                    continue
                return ImportOutcome("imported", header.id, format=log.format)
            log = await asyncio.to_thread(_open, file)
            same = await _same_as_stored(store, stored, log)
            return ImportOutcome("present" if same else "conflict", header.id, format=log.format)
        return ImportOutcome("conflict", header.id, format=log.format)
    except (LogImportError, InvalidEventError) as err:  # the log, or a rule only the store checks
        return ImportOutcome("rejected", reason=describe_error(err))
    except OSError as err:
        return ImportOutcome("rejected", reason=f"cannot read it: {describe_error(err)}")


def _open(file: BinaryIO) -> StreamedLog:
    file.seek(0)
    return open_session_log(file)


async def _same_as_stored(store: SessionStore, stored: SessionHeader, log: StreamedLog) -> bool:
    """Whether the stored session is exactly the log (``same_log``), both read a batch at a
    time. The log is read to its end even when they differ: a bad log is rejected."""
    header = log.header
    same = (stored.created_at, stored.cwd) == (header.created_at, header.cwd)
    batches = log.batches()
    seq = 0
    while (batch := await asyncio.to_thread(batches.next_batch)) is not None:
        if same:
            try:
                olds = await store.read_events_at(header.id, range(seq, seq + len(batch)))
            except InvalidEventError:  # the stored log is shorter
                same = False
            else:
                same = all(same_event(o, n) for o, n in zip(olds, batch, strict=True))
        seq += len(batch)
    if same:
        try:
            await store.read_events_at(header.id, [seq])
        except InvalidEventError:
            return True  # the stored log ends where the file's does
    return False


async def import_path(store: SessionStore, path: str | os.PathLike[str]) -> ImportOutcome:
    """Import the log at ``path``: only a regular file (or a symlink to one) is read; a
    FIFO, a device or a socket is ``skipped``, saying what it is."""
    try:
        file = await asyncio.to_thread(open_regular_file, path)
    except NotRegularFileError as err:
        return ImportOutcome("skipped", reason=str(err.strerror))
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        return ImportOutcome("rejected", reason=f"cannot read it: {describe_error(err)}")
    try:
        return await import_log(store, file)
    finally:
        file.close()


def spool_stdin() -> BinaryIO:
    """Standard input in a temporary file (a log is read twice when it is already
    stored); at most ``MAX_LOG_BYTES``, else ``LogTooLargeError``."""
    out = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    try:
        total = 0
        while chunk := sys.stdin.buffer.read(1 << 20):
            total += len(chunk)
            if total > MAX_LOG_BYTES:
                raise LogTooLargeError(f"the log is larger than {MAX_LOG_BYTES:,} bytes")
            out.write(chunk)
        out.seek(0)
        return out
    except BaseException:
        out.close()
        raise


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
        elif outcome.status == "skipped":
            lines.append(f"skipped: {where}: {outcome.reason}")
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
        + (
            f" ({skipped} skipped: not regular files)"
            if (skipped := summary.count("skipped"))
            else ""
        )
    )
    return lines


# -- sessions of other tools (issue 33) ---------------------------------------------------

_NATIVE_NAMES = {"dsh": "a dsh export", "reference": "a reference (deepseek-harness) log"}


class ImportUsageError(Exception):
    """``dsh import`` was asked for something it cannot do: one line for the user."""


@dataclass
class ImportPlan:
    """What one ``dsh import`` reads: dsh's own logs and each foreign tool's files."""

    native: list[Path] = field(default_factory=list)
    foreign: dict[str, list[Path]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.native) + sum(len(paths) for paths in self.foreign.values())


def _tool_words(tool: str) -> str:
    if tool in _NATIVE_NAMES:
        return _NATIVE_NAMES[tool]
    return f"a {TOOL_NAMES[tool]} session file"


def _kind_of(path: Path, tools: Sequence[str]) -> str | None:
    """dsh's own kind of the file, else the foreign tool that recognises it, else
    ``None`` (not readable here: today's import reports why)."""
    try:
        head = read_head(path)
    except (OSError, ValueError):
        return None
    return file_kind(path, head, tools)


def plan_file(path: Path, only: str | None) -> ImportPlan:
    """The plan for one file: by what it holds, or by ``--from`` (``ImportUsageError``
    when it is not that)."""
    tools = list(FORMAT_MODULES)
    if only is None:
        kind = _kind_of(path, tools)
        if kind in FORMAT_MODULES:
            return ImportPlan(foreign={kind: [path]})
        return ImportPlan(native=[path])
    if only in FORMAT_MODULES:
        try:
            head = read_head(path)
        except NotRegularFileError as err:
            raise ImportUsageError(
                f"cannot import {single_line(str(path))}: {err.strerror}"
            ) from err
        except (OSError, ValueError) as err:
            raise ImportUsageError(
                f"cannot import {single_line(str(path))}: cannot read it: {describe_error(err)}"
            ) from err
        if file_kind(path, head, [only]) != only:
            raise ImportUsageError(
                f"{single_line(str(path))} is not {_tool_words(only)} (--from {only}); "
                "nothing imported"
            )
        return ImportPlan(foreign={only: [path]})
    kind = _kind_of(path, tools)
    if kind is not None and kind != only:
        raise ImportUsageError(
            f"{single_line(str(path))} is {_tool_words(kind)}, not {_tool_words(only)} "
            f"(--from {only}); nothing imported"
        )
    return ImportPlan(native=[path])


def plan_tree(root: Path, only: str | None) -> ImportPlan:
    """The plan for a folder: dsh's own logs (``find_logs``) and each tool's files (its
    ``find_files``), each going where its first bytes say. A file no format recognises
    (empty, damaged) goes to the tool that found it, else to dsh's own import: either
    says what is wrong with it. With ``only``, just that format's files: the others are
    left alone."""
    tools = list(FORMAT_MODULES)
    found_by: dict[Path, str] = {}
    for tool in tools if only is None or only in FORMAT_MODULES else ():
        if only is None or only == tool:
            for path in load_format(tool).find_files(root):
                found_by.setdefault(path, tool)
    logs = find_logs(root) if only is None or only in _NATIVE_NAMES else []
    plan = ImportPlan()
    listed = set(logs)
    for path in [*logs, *sorted(p for p in found_by if p not in listed)]:
        kind = _kind_of(path, tools)
        if kind is None:
            kind = found_by.get(path) or ("dsh" if only in (None, "dsh") else None)
            if kind is None:
                continue
        if only is not None and kind != only:
            continue
        if kind in FORMAT_MODULES:
            plan.foreign.setdefault(kind, []).append(path)
        else:
            plan.native.append(path)
    for paths in plan.foreign.values():
        paths.sort()
    return plan


def default_folder(tool: str) -> Path:
    """Where ``tool`` keeps its sessions, for ``dsh import --from TOOL`` without a path
    (``ImportUsageError`` when it has no such place or it does not exist)."""
    fmt = load_format(tool)
    root = fmt.default_root()
    if root is None:
        raise ImportUsageError(f"--from {tool} needs a FILE or DIR to import")
    if not root.is_dir():
        raise ImportUsageError(
            f"no {TOOL_NAMES[tool]} sessions found: {single_line(str(root))} does not exist; "
            f"name a folder: dsh import --from {tool} DIR"
        )
    return root


@dataclass
class ImportReport:
    """Every line of one ``dsh import`` and what they add up to."""

    native: ImportSummary = field(default_factory=ImportSummary)
    foreign: list[ForeignOutcome] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # one per foreign session or failure
    summaries: list[str] = field(default_factory=list)  # one per foreign tool

    @property
    def failed(self) -> bool:
        return bool(
            self.native.count("rejected")
            + self.native.count("conflict")
            + sum(o.status in ("failed", "conflict") for o in self.foreign)
        )


def _name(path: str | Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            pass
    return str(path)


def foreign_line(outcome: ForeignOutcome, root: Path | None) -> str:
    """One line for one foreign session, every name escaped for the terminal."""
    where = single_line(_name(outcome.file, root)) if outcome.file else "?"
    sid = single_line(outcome.session_id or "")
    if outcome.status == "imported":
        return f"imported: {where} → {sid}"
    if outcome.status == "updated":
        parts = []
        if outcome.new_events or not outcome.title_changed:
            count = outcome.new_events
            parts.append(f"{count} new event{'s' if count != 1 else ''}")
        if outcome.title_changed:
            parts.append("new title")
        what = ", ".join(parts)
        return f"updated ({what}): {where} → {sid}"
    if outcome.status == "unchanged":
        return f"unchanged: {where} → {sid}"
    if outcome.status == "conflict":
        return f"conflict: {where} → {sid}: changed at the source since it was imported; not merged"
    at = f"{where}:{outcome.line}" if outcome.line else where
    tool = TOOL_NAMES.get(outcome.tool, outcome.tool)
    of = f" session {single_line(outcome.original_id, 80)}" if outcome.original_id else " file"
    return f"failed: {at}: {single_line(outcome.reason)} ({tool}{of}); nothing of it imported"


def foreign_summary(tool: str, outcomes: Sequence[ForeignOutcome]) -> str:
    def n(status: str) -> int:
        return sum(o.status == status for o in outcomes)

    total = len(outcomes)
    return (
        f"{n('imported')} imported, {n('updated')} updated, {n('unchanged')} unchanged, "
        f"{n('conflict')} conflicting (not merged), {n('failed')} failed, "
        f"of {total} {TOOL_NAMES[tool]} session{'s' if total != 1 else ''}"
    )


class _Progress:
    """A progress bar over the plan's files, on a terminal only."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done: set[str] = set()
        self.show = _on_terminal() and total > 0

    def advance(self, files: Sequence[str | Path], name: str) -> None:
        self.done.update(str(f) for f in files)
        if self.show:
            _progress(min(len(self.done), self.total), self.total, name)

    def close(self) -> None:
        if self.show:
            _progress(self.total, self.total, "")
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


async def run_plan(store: SessionStore, plan: ImportPlan, root: Path | None) -> ImportReport:
    """Import what ``plan`` names, one file (dsh's own) or one session (a tool's) at a
    time, with a progress bar on a terminal; the report's lines say what became of each."""
    report = ImportReport()
    progress = _Progress(plan.total)
    for path in plan.native:
        name = _name(path, root)
        progress.advance([], name)
        native = await import_path(store, path)
        report.native.outcomes.append((name, native))
        progress.advance([path], name)
    for tool, paths in plan.foreign.items():
        outcomes: list[ForeignOutcome] = []
        async for outcome in import_foreign(store, load_format(tool), paths):
            outcomes.append(outcome)
            report.foreign.append(outcome)
            progress.advance(outcome.files or [outcome.file], _name(outcome.file, root))
        report.lines.extend(foreign_line(o, root) for o in outcomes)
        if not outcomes:
            report.lines.append(
                f"no {TOOL_NAMES[tool]} sessions in {len(paths)} "
                f"file{'s' if len(paths) != 1 else ''}"
            )
        report.summaries.append(foreign_summary(tool, outcomes))
    progress.close()
    return report


async def import_planned(store: SessionStore, file: str | None, only: str | None) -> int | None:
    """``dsh import [FILE|DIR] [--from FORMAT]`` for a folder, a tool's own folder (no
    ``file``) or another tool's file: prints one line per log or session and the
    summaries, and returns the exit code. ``None`` for one dsh or reference log (or
    standard input), which the caller imports as before. ``ImportUsageError`` for what
    cannot be done (one line). Paths are made absolute, so that a session records the
    file it came from wherever dsh ran; lines name them as given."""
    cwd = await asyncio.to_thread(Path.cwd)
    if file is None:  # --from claude-code or codex: the tool's own folder
        root = cwd / await asyncio.to_thread(default_folder, only or "")
    elif file != "-" and await asyncio.to_thread((cwd / file).is_dir):
        root = cwd / file
    else:
        if file == "-":
            return None
        plan = await asyncio.to_thread(plan_file, cwd / file, only)
        if not plan.foreign:
            return None
        given = None if Path(file).is_absolute() else cwd  # names as the user gave them
        return _print_report(await run_plan(store, plan, given), None)
    plan = await asyncio.to_thread(plan_tree, root, only)
    report = await run_plan(store, plan, root)
    if not plan.foreign and only in (None, "dsh", "reference"):  # dsh's own logs: as before
        lines = summary_lines(str(root) if file is None else file, report.native)
        if not report.native.outcomes:
            lines[0] += ", nor sessions of Claude Code, Codex or ChatGPT"
        sys.stdout.write("".join(line + "\n" for line in lines))
        return 1 if report.failed or not report.native.outcomes else 0
    return _print_report(report, root)


def _print_report(report: ImportReport, root: Path | None) -> int:
    """The lines of an import that read sessions of other tools, and its exit code."""
    native = summary_lines(str(root or ""), report.native) if report.native.outcomes else []
    lines = [*native[:-1], *report.lines, *native[-1:], *report.summaries]
    if not lines:
        where = single_line(str(root)) if root is not None else "there"
        lines.append(f"no sessions to import under {where}")
    sys.stdout.write("".join(line + "\n" for line in lines))
    nothing = not report.native.outcomes and not report.foreign
    return 1 if report.failed or nothing else 0
