"""``dsh sessions`` and ``dsh search`` on a SQLite store without the runtime: one
synchronous read (``stores.sqlite.oneshot``: the stdlib ``sqlite3`` module, the store's
own statements and decoding), printed by the very functions the full commands print with
(``listing.print_listing``, ``finding.print_found``). Neither asyncio, aiosqlite, the
engine, the providers nor Rich load (Rich draws only on a terminal).

``run_quick`` returns ``None`` whenever the full path must run the command, so that it
behaves, and words its errors, as it always did: a PostgreSQL store, a database that
opening would create, upgrade, switch to WAL or index (``OneShotReader.open``), any SQLite
or store error while reading, settings the runtime would refuse when it starts
(``DSH_OFFLINE_DELAY``, an API key it would reject), a bad ``--limit``.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
from typing import TYPE_CHECKING

from core.config import DshConfig, is_database_url
from core.errors import DshError

if TYPE_CHECKING:
    from stores.sqlite.oneshot import OneShotReader
    from tui.cli.listing import SessionListing
    from tui.shared.searching import FoundMessages

__all__ = ["run_quick"]

_KEY_CHARS = re.compile(r"[\x20-\x7e]*")
"""What ``core.secrets.clean_api_key`` accepts inside a key (anything else: the runtime
refuses to start, and the full path says so)."""


def run_quick(config: DshConfig, args: argparse.Namespace) -> int | None:
    """Run ``args.command`` (``sessions`` or ``search``) with a one-shot read: its exit
    status, or ``None`` when the full path must run it (nothing was printed then)."""
    if args.command not in ("sessions", "search") or not _runtime_would_start(config):
        return None
    if args.command == "search" and args.limit < 1:
        return None  # the full path says why
    location = config.database
    if isinstance(location, str) and is_database_url(location):
        return None
    from stores.sqlite.oneshot import OneShotReader

    reader = OneShotReader.open(location)
    if reader is None:
        return None
    try:
        with reader:  # everything is read first: nothing is printed unless it all was
            if args.command == "sessions":
                listing = _read_sessions(reader)
            else:
                found = _read_search(reader, args.query, args.limit)
    except (sqlite3.Error, DshError):
        return None  # the full path reads again, and says what failed
    if args.command == "sessions":
        from tui.cli.listing import print_listing

        return print_listing(config, listing, args.json)
    from tui.cli.finding import print_found

    return print_found(found, args.query, args.json)


def _runtime_would_start(config: DshConfig) -> bool:
    """Whether ``open_runtime`` would start without a word: ``DSH_OFFLINE_DELAY`` unset,
    the default profile's API key (if any) one it accepts."""
    if os.environ.get("DSH_OFFLINE_DELAY", "").strip():
        return False
    profile = config.profile()
    if profile.provider != "openai":
        return True
    key = os.environ.get(profile.api_key_env or "DEEPSEEK_API_KEY")
    return key is None or _KEY_CHARS.fullmatch(key.strip()) is not None


def _read_sessions(reader: OneShotReader) -> SessionListing:
    """What ``listing.cmd_sessions`` reads, read as it reads it."""
    from core.log import SESSION_FORK, SESSION_PROFILE
    from tui.cli.listing import SessionListing, lineage_of
    from tui.shared.activity import by_last_activity

    last_active = reader.read_last_event_times()
    headers = by_last_activity(reader.list_headers(), last_active)
    titles = reader.read_titles()
    ids = [h.id for h in headers]
    profiles = reader.read_latest_events(SESSION_PROFILE, ids)
    forks = reader.read_latest_events(SESSION_FORK, ids)
    return SessionListing(
        headers,
        titles,
        last_active,
        lineage_of(profiles, forks),
        reader.current_user(),
        reader.damaged_rows(),
    )


def _read_search(reader: OneShotReader, query: str, limit: int) -> FoundMessages:
    """What ``tui.shared.searching.find_messages`` reads, read as it reads it."""
    from core.search import unindexed_notice
    from tui.shared.searching import FoundMessages

    hits = reader.search_messages(query, limit=limit)
    note = unindexed_notice(reader.unindexed_sessions())
    titles = reader.read_titles(sorted({h.session_id for h in hits}))
    return FoundMessages(hits, {sid: t.title for sid, t in titles.items()}, note)
