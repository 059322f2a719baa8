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
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import DshError
from tui.cli.common import CliError
from tui.cli.parser import VERSION, build_parser

if TYPE_CHECKING:
    from core.config import DshConfig
    from tui.shared.runtime import Runtime

__all__ = ["main"]

QUICK_COMMANDS = frozenset({"sessions", "search"})
"""The commands ``tui.cli.quick`` runs without the runtime when the store allows it."""


COMMANDS: dict[str, tuple[str, str]] = {
    "sessions": ("listing", "cmd_sessions"),
    "new": ("conversation", "cmd_new"),
    "send": ("conversation", "cmd_send"),
    "reply": ("conversation", "cmd_reply"),
    "retry": ("control", "cmd_retry"),
    "edit": ("control", "cmd_edit"),
    "fork": ("control", "cmd_fork"),
    "usage": ("usage", "cmd_usage"),
    "show": ("showing", "cmd_show"),
    "prepare": ("conversation", "cmd_prepare"),
    "compact": ("conversation", "cmd_compact"),
    "rename": ("conversation", "cmd_rename"),
    "export": ("transfer", "cmd_export"),
    "import": ("transfer", "cmd_import"),
    "delete": ("asking", "cmd_delete"),
    "unlock": ("asking", "cmd_unlock"),
    "mention": ("finding", "cmd_mention"),
    "share": ("sharing", "cmd_share"),
    "unshare": ("sharing", "cmd_unshare"),
    "shares": ("sharing", "cmd_shares"),
    "candidates": ("finding", "cmd_candidates"),
    "search": ("finding", "cmd_search"),
    "demo": ("asking", "cmd_demo"),
}
"""Each command run with a runtime: its module under ``tui.cli`` and its function, imported
only when it runs (``dsh --help`` and the fast commands load none of them)."""


def command_function(
    name: str,
) -> Callable[[Runtime, argparse.Namespace], Coroutine[Any, Any, int]]:
    """The function of command ``name`` (its module loads now)."""
    module, function = COMMANDS[name]
    found: Callable[[Runtime, argparse.Namespace], Coroutine[Any, Any, int]]
    found = getattr(import_module(f"tui.cli.{module}"), function)
    return found


async def _run(config: DshConfig, args: argparse.Namespace) -> int:
    from tui.shared.progress import terminal_progress
    from tui.shared.runtime import offline_delay_from_env, open_runtime

    run = command_function(args.command)
    # DSH_OFFLINE_DELAY slows the offline model here as in the TUI and `dsh acp` (demos, tests).
    async with open_runtime(
        config, offline_delay=offline_delay_from_env(os.environ), progress=terminal_progress()
    ) as rt:
        reason = getattr(rt.store, "read_only_reason", None)
        if reason:  # a full disk: reading works, writing will say why it cannot
            print(f"dsh: note: {_line(reason)}", file=sys.stderr)
        return await run(rt, args)


def _configure(args: argparse.Namespace) -> DshConfig:
    from core.config import load_config

    config = load_config(config_path=Path(args.config).expanduser() if args.config else None)
    if args.db:
        config = config.with_database(args.db)
    return config


def _line(text: str) -> str:
    from core.display import single_line

    return single_line(text)


def _fail(message: str, code: int = 1) -> int:
    # Escaping is idempotent: parts escaped earlier stay as they are.
    print(f"dsh: error: {_line(message)}", file=sys.stderr)
    return code


def _report(err: DshError) -> int:
    """The one line (and exit code) of a failure the user can cause (``main``)."""
    from core.config import ConfigError
    from core.display import single_line
    from core.references.config import SessionReferenceError
    from core.resolve import SessionNameError
    from tui.shared.errors import describe_error

    if isinstance(err, ConfigError):
        return _fail(describe_error(err))
    if isinstance(err, SessionNameError):
        code = _fail(describe_error(err))
        for header, title in err.matches:  # one per line, escaped, as `dsh sessions` shows them
            label = single_line(title, 60) if title is not None else "(no title)"
            print(f"  {single_line(header.id)}  {label}", file=sys.stderr)
        return code
    if isinstance(err, SessionReferenceError):
        from tui.cli.common import reference_error_line

        return _fail(reference_error_line(err))
    return _fail(describe_error(err))


def main(argv: Sequence[str] | None = None) -> int:
    # Every argument (names, ids, a message's text) is user input: a surrogate pair in it
    # is its character (SPEC §4.1).
    from core.surrogates import merge_surrogate_pairs

    given = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args([merge_surrogate_pairs(arg) for arg in given])
    command = args.command or "tui"
    if command == "import":
        from tui.cli.transfer import check_import

        check_import(parser, args)
    try:
        config = _configure(args)
        if command == "tui":
            from tui.app.app import run_app  # Textual loads only when the app is wanted

            return run_app(config)
        if command == "replay":  # one file, read-only: no database is opened
            from tui.cli.showing import replay

            return replay(config, args)

        if command == "profiles":  # the config only: no database is opened
            from tui.cli.profiles import print_profiles

            return print_profiles(config, args.json)
        if command == "migrate":  # two stores, none of them the runtime's
            import asyncio

            from tui.cli.transfer import migrate

            return asyncio.run(migrate(config, args))
        if command == "acp":  # speaks JSON-RPC on stdout: never the Rich output path
            from tui.acp import run_acp

            return run_acp(config, log_file=args.log)
        if command == "mcp":  # speaks JSON-RPC on stdout, as acp
            from tui.mcp import run_mcp

            return run_mcp(config, version=VERSION, log_file=args.log)
        if command in QUICK_COMMANDS:  # one synchronous read, when the store allows it
            from tui.cli.quick import run_quick

            code = run_quick(config, args)
            if code is not None:
                return code
        import asyncio

        return asyncio.run(_run(config, args))
    except CliError as err:
        return _fail(str(err))
    except DshError as err:
        return _report(err)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
