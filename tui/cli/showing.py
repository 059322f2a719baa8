"""The commands that show a session: ``show`` (a stored one, read a page at a time) and
``replay`` (one log file, read-only, in the app or as SVG or text; no database opened)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from core.config import DshConfig
from core.display import single_line
from stores.replay import ReplayDatabase, ReplayStore
from tui.cli.common import CliError, resolve
from tui.shared.runtime import Runtime

__all__ = ["Replay", "cmd_show", "replay"]


async def cmd_show(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    from tui.cli.streamed import print_events_json, print_surface

    if args.json:  # read and printed a page at a time (issue 31: a 1 GB session)
        await print_events_json(rt.store, header.id)
        return 0
    if args.tail is None:
        await print_surface(rt.store, rt.query, header.id, expand=args.expand)
        return 0
    from tui.cli.output import print_transcript  # Rich loads only to draw
    from tui.shared.items import with_unknown_events

    # the newest N surface items: only their events are read
    window = await rt.query.read_surface_page(header.id, args.tail)
    shown = with_unknown_events(window.events, window.unknown)
    title = await rt.query.read_title(header.id)
    print_transcript(header, title.title if title else None, shown, expand=args.expand)
    return 0


Replay = ReplayStore | ReplayDatabase


def replay(config: DshConfig, args: argparse.Namespace) -> int:
    from tui.shared.replay import open_replay

    # The app shows the newest page first and checks the rest in the background; --svg
    # and --text check the whole file first (a bad one: exit 1 with its line).
    lazy = not args.text and args.svg is None
    store = asyncio.run(open_replay(args.file, at=args.at, lazy=lazy))
    try:
        return _replay_shown(config, store, args)
    finally:  # a large log's temporary database goes with it (also on Ctrl+C)
        asyncio.run(store.close())


def _replay_shown(config: DshConfig, store: Replay, args: argparse.Namespace) -> int:
    from tui.shared.replay import replay_runtime

    runtime = replay_runtime(config, store)
    if args.text:
        return asyncio.run(_replay_text(runtime, args))
    if args.svg is not None:
        svg = asyncio.run(_replay_svg(runtime, store, args))
        try:
            from tui.shared.files import write_atomically

            written = write_atomically(Path(args.svg), svg)
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or err
            raise CliError(f"cannot write {args.svg}: {reason}") from err
        print(f"wrote {single_line(str(written))}")
        return 0
    from tui.app.app import run_app

    return run_app(config, runtime)


async def _replay_svg(runtime: Runtime, store: Replay, args: argparse.Namespace) -> str:
    from tui.app.svg import render_svg  # Textual, without a terminal
    from tui.shared.replay import replay_now

    now = await replay_now(store)
    return await render_svg(
        runtime, size=args.size, expand_cards=args.expand_cards, now=lambda: now
    )


async def _replay_text(runtime: Runtime, args: argparse.Namespace) -> int:
    from tui.cli.streamed import print_surface

    (header,) = await runtime.store.list_headers()
    await print_surface(runtime.store, runtime.query, header.id, expand=args.expand_cards)
    return 0
