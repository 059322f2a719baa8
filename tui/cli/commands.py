"""The ``dsh`` command line: one entry point for the TUI and every scripted action.

User mistakes end with one ``dsh: error: …`` line on stderr and exit code 1 (2 for usage
errors), never a traceback. Machine-readable output (``--json``, ``new``) is plain JSON.

Every line written to stdout or stderr goes through ``core.display`` (``single_line`` /
``escape_control``; ``terminal_json`` for JSON, which writes control, bidi and format
characters as ``\\uXXXX``): titles, ids, cwds, paths and even argparse's echo of an
argument may hold escape sequences, and none may reach the terminal raw.

This module parses the arguments (``parser``), opens what a command needs and runs it; the
commands live beside it by family (see the package's docstring).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from core.config import ConfigError, DshConfig, load_config
from core.display import single_line
from core.errors import DshError, SessionNotFoundError, StoreError
from core.references import SessionReferenceError
from core.resolve import SessionNameError
from core.surrogates import merge_surrogate_pairs
from tui.cli import control, profiles, usage
from tui.cli.asking import cmd_delete, cmd_demo, cmd_unlock
from tui.cli.common import CliError, reference_error_line
from tui.cli.conversation import (
    cmd_compact,
    cmd_new,
    cmd_prepare,
    cmd_rename,
    cmd_reply,
    cmd_send,
)
from tui.cli.finding import cmd_candidates, cmd_mention, cmd_search
from tui.cli.listing import cmd_sessions
from tui.cli.parser import VERSION, build_parser
from tui.cli.sharing import cmd_share, cmd_shares, cmd_unshare
from tui.cli.showing import cmd_show, replay
from tui.cli.transfer import check_import, cmd_export, cmd_import, migrate
from tui.shared.errors import describe_error
from tui.shared.progress import terminal_progress
from tui.shared.runtime import Runtime, offline_delay_from_env, open_runtime

__all__ = ["main"]


COMMANDS: dict[str, Callable[[Runtime, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "sessions": cmd_sessions,
    "new": cmd_new,
    "send": cmd_send,
    "reply": cmd_reply,
    "retry": control.cmd_retry,
    "edit": control.cmd_edit,
    "fork": control.cmd_fork,
    "usage": usage.cmd_usage,
    "show": cmd_show,
    "prepare": cmd_prepare,
    "compact": cmd_compact,
    "rename": cmd_rename,
    "export": cmd_export,
    "import": cmd_import,
    "delete": cmd_delete,
    "unlock": cmd_unlock,
    "mention": cmd_mention,
    "share": cmd_share,
    "unshare": cmd_unshare,
    "shares": cmd_shares,
    "candidates": cmd_candidates,
    "search": cmd_search,
    "demo": cmd_demo,
}


async def _run(config: DshConfig, args: argparse.Namespace) -> int:
    # DSH_OFFLINE_DELAY slows the offline model here as in the TUI and `dsh acp` (demos, tests).
    async with open_runtime(
        config, offline_delay=offline_delay_from_env(os.environ), progress=terminal_progress()
    ) as rt:
        reason = getattr(rt.store, "read_only_reason", None)
        if reason:  # a full disk: reading works, writing will say why it cannot
            print(f"dsh: note: {single_line(reason)}", file=sys.stderr)
        return await COMMANDS[args.command](rt, args)


def _configure(args: argparse.Namespace) -> DshConfig:
    config = load_config(config_path=Path(args.config).expanduser() if args.config else None)
    if args.db:
        config = config.with_database(args.db)
    return config


def _fail(message: str, code: int = 1) -> int:
    # Escaping is idempotent: parts escaped earlier stay as they are.
    print(f"dsh: error: {single_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    # Every argument (names, ids, a message's text) is user input: a surrogate pair in it
    # is its character (SPEC §4.1).
    given = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args([merge_surrogate_pairs(arg) for arg in given])
    command = args.command or "tui"
    if command == "import":
        check_import(parser, args)
    try:
        config = _configure(args)
        if command == "tui":
            from tui.app.app import run_app  # Textual loads only when the app is wanted

            return run_app(config)
        if command == "replay":  # one file, read-only: no database is opened
            return replay(config, args)

        if command == "profiles":  # the config only: no database is opened
            return profiles.print_profiles(config, args.json)
        if command == "migrate":  # two stores, none of them the runtime's
            return asyncio.run(migrate(config, args))
        if command == "acp":  # speaks JSON-RPC on stdout: never the Rich output path
            from tui.acp import run_acp

            return run_acp(config, log_file=args.log)
        if command == "mcp":  # speaks JSON-RPC on stdout, as acp
            from tui.mcp import run_mcp

            return run_mcp(config, version=VERSION, log_file=args.log)
        return asyncio.run(_run(config, args))
    except ConfigError as err:
        return _fail(describe_error(err))
    except CliError as err:
        return _fail(str(err))
    except SessionNameError as err:
        code = _fail(describe_error(err))
        for header, title in err.matches:  # one per line, escaped, as `dsh sessions` shows them
            label = single_line(title, 60) if title is not None else "(no title)"
            print(f"  {single_line(header.id)}  {label}", file=sys.stderr)
        return code
    except SessionNotFoundError as err:
        return _fail(describe_error(err))
    except StoreError as err:
        return _fail(describe_error(err))
    except SessionReferenceError as err:
        return _fail(reference_error_line(err))
    except DshError as err:
        return _fail(describe_error(err))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
