"""Sessions in and out: ``export`` (a page at a time), ``import`` (dsh and reference logs,
other tools' sessions) and ``migrate`` (every session to another database)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from core.config import DshConfig, database_location, is_database_url
from core.display import single_line
from tui.cli.common import CliError, resolve
from tui.shared.runtime import Runtime

__all__ = ["check_import", "cmd_export", "cmd_import", "migrate"]


async def cmd_export(rt: Runtime, args: argparse.Namespace) -> int:
    from tui.cli.streamed import CannotExport, export_session

    header = await resolve(rt, args.session)
    try:  # read and written a page at a time (issue 31: a 1 GB session)
        written = await export_session(rt.store, rt.query, header.id, args.format, args.output)
    except CannotExport as err:
        raise CliError(str(err)) from err
    if written is not None:
        # stdout is free here (the export went to the file): say where it went
        print(f"exported to {single_line(str(written))}")
    return 0


async def cmd_import(rt: Runtime, args: argparse.Namespace) -> int:
    from core.logfile import LogImportError
    from tui.cli.importing import (
        ImportUsageError,
        import_log,
        import_path,
        import_planned,
        spool_stdin,
    )

    try:
        code = await import_planned(rt.store, args.file, args.source)
    except ImportUsageError as err:
        raise CliError(str(err)) from err
    if code is not None:
        return code
    if args.file == "-":
        try:
            spooled = await asyncio.to_thread(spool_stdin)
        except (OSError, LogImportError) as err:
            reason = getattr(err, "strerror", None) or err
            raise CliError(f"cannot read {args.file}: {reason}") from err
        with spooled:
            outcome = await import_log(rt.store, spooled)
    else:
        outcome = await import_path(rt.store, args.file)
    sid = single_line(outcome.session_id or "")
    if outcome.status == "skipped":
        raise CliError(f"cannot import {args.file}: {outcome.reason}; nothing imported")
    if outcome.status == "rejected":
        raise CliError(f"cannot import {args.file}: {outcome.reason}; nothing imported")
    if outcome.status == "conflict":
        raise CliError(
            f"cannot import {args.file}: a session with id {sid} already exists "
            "with different events; it is never overwritten"
        )
    if outcome.status == "present":
        print(f"{sid} is already present with the same events: skipped", file=sys.stderr)
    print(sid)
    return 0


def check_import(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``dsh import`` without a path reads a tool's own folder: only Claude Code's and
    Codex's have one."""
    if args.file is None and args.source not in ("claude-code", "codex"):
        parser.error("import: give a FILE or DIR (only --from claude-code or codex may omit it)")
    if args.file == "-" and args.source not in (None, "dsh", "reference"):
        parser.error(
            f"import: standard input can hold a dsh or reference log, not --from {args.source}"
        )


_MIGRATE_WORDS = {
    "copied": "copied",
    "extended": "completed",
    "present": "already there",
    "conflict": "CONFLICT (differs in the target; left alone)",
    "foreign": "not yours (left for its owner to copy)",
    "invalid": "REFUSED (the target does not take it; skipped)",
    "busy": "BUSY (another process holds it in the target; run migrate again)",
}


async def migrate(config: DshConfig, args: argparse.Namespace) -> int:
    """``dsh migrate``: progress on stderr, one session a line; the summary on stdout."""
    from stores import display_location, open_store
    from stores.migrate import SessionOutcome, migrate_sessions

    source_at = (
        config.database
        if args.source is None
        else database_location(args.source, "--from", relative_ok=True)
    )
    target_at = database_location(args.to, "--to", relative_ok=True)
    source_name, target_name = display_location(source_at), display_location(target_at)
    if str(source_at) == str(target_at):
        raise CliError(f"--from and --to are the same database ({source_name})")
    if not is_database_url(str(source_at)) and not await asyncio.to_thread(Path(source_at).is_file):
        raise CliError(f"there is no database at {source_name} to copy from")

    def progress(position: int, total: int, outcome: SessionOutcome) -> None:
        events = f" ({outcome.events} events)" if outcome.events else ""
        if outcome.owner is not None and outcome.owner != target.current_user():
            events += f" (owned by {single_line(outcome.owner, 32)})"
        if outcome.shares:
            events += f" (shared with {outcome.shares} more)"
        if outcome.reason:
            events += f": {single_line(outcome.reason, 200)}"
        print(
            f"[{position}/{total}] {_MIGRATE_WORDS[outcome.outcome]}: "
            f"{single_line(outcome.session_id, 60)}{events}",
            file=sys.stderr,
            flush=True,
        )

    source = await open_store(source_at, postgres=config.postgres)
    try:
        target = await open_store(target_at, postgres=config.postgres)
        try:
            report = await migrate_sessions(source, target, progress=progress)
        finally:
            await target.close()
    finally:
        await source.close()
    for problem in report.share_problems:
        print(f"dsh: warning: a share was not copied: {single_line(problem)}", file=sys.stderr)
    foreign = f", {len(report.foreign)} not yours" if report.foreign else ""
    foreign += f", {len(report.invalid)} refused" if report.invalid else ""
    foreign += f", {len(report.busy)} busy" if report.busy else ""
    grants = f"; {report.shares} shares made" if report.shares else ""
    print(
        f"{report.total} sessions in {single_line(source_name)}: {report.copied} copied, "
        f"{report.extended} completed, {report.present} already there, "
        f"{len(report.conflicts)} conflicts{foreign}; {report.events} events written to "
        f"{single_line(target_name)}{grants}"
    )
    return 1 if report.conflicts or report.invalid or report.busy else 0
