"""``dsh sessions``: every session the user can see, most recently active first, with its
profile and, for a fork, the session and message it was forked from.

The profile and the fork origin of all sessions are read in one call each
(``read_latest_events``), never one read per session.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.damage import DamagedRow, damage_line
from core.display import relative_age, single_line, terminal_json
from core.log import SESSION_FORK, SESSION_PROFILE, Event, SessionHeader
from core.query import SessionTitle
from tui.shared.activity import active_at, by_last_activity
from tui.shared.logevents import NAME_CHARS, ForkOrigin, fork_origin
from tui.shared.profilechoice import profile_event_name, resolve_profile

if TYPE_CHECKING:  # (``print_listing`` serves the one-shot read too: ``quick``)
    from core.config import DshConfig
    from tui.shared.runtime import Runtime

__all__ = ["SessionListing", "cmd_sessions", "lineage_of", "print_listing"]

PARENT_CHARS = 40
"""How much of a parent's title the ``forked from`` cell keeps (the terminal cuts more)."""


@dataclass(frozen=True, slots=True)
class _Lineage:
    """What the listing shows of each session beyond its header and title."""

    profiles: Mapping[str, str | None]  # the recorded profile name (None: the default)
    forks: Mapping[str, ForkOrigin]


def lineage_of(profiles: Mapping[str, Event], forks: Mapping[str, Event]) -> _Lineage:
    """The lineage from the latest ``session/profile`` and ``session/fork`` of each session."""
    origins = {sid: origin for sid, e in forks.items() if (origin := fork_origin(e)) is not None}
    return _Lineage({sid: profile_event_name(e) for sid, e in profiles.items()}, origins)


@dataclass(frozen=True, slots=True)
class SessionListing:
    """Everything ``dsh sessions`` prints, however it was read: the sessions in the app's
    order (most recently active first), their titles, last activity and lineage, who
    lists them (``user``) and the rows the listing skipped as damaged."""

    headers: list[SessionHeader]
    titles: Mapping[str, SessionTitle]
    last_active: Mapping[str, int]
    lineage: _Lineage
    user: str
    damaged: Sequence[DamagedRow]


async def cmd_sessions(rt: Runtime, args: argparse.Namespace) -> int:
    from tui.shared.runtime import read_latest_events

    # The app's order: most recently active first (tui.shared.activity).
    last_active = await rt.query.read_last_event_times()
    headers = by_last_activity(await rt.query.list_sessions(), last_active)
    titles = await rt.query.read_titles()
    ids = [h.id for h in headers]
    profiles = await read_latest_events(rt.store, SESSION_PROFILE, ids)
    forks = await read_latest_events(rt.store, SESSION_FORK, ids)
    listing = SessionListing(
        headers,
        titles,
        last_active,
        lineage_of(profiles, forks),
        rt.store.current_user(),
        rt.store.damaged_rows(),
    )
    return print_listing(rt.config, listing, args.json)


def print_listing(config: DshConfig, listing: SessionListing, as_json: bool) -> int:
    """What ``dsh sessions`` prints (the damaged rows on stderr), either way it was read."""
    if as_json:
        print(terminal_json(_json_rows(config, listing)))
    else:
        _print_table(config, listing)
    sys.stdout.flush()
    for row in listing.damaged:  # one line each, on stderr: stdout stays parseable
        print(f"dsh: {damage_line(row)}", file=sys.stderr)
    return 0


def _json_rows(config: DshConfig, listing: SessionListing) -> list[dict[str, Any]]:
    """``"profile"``: the name the session's log records (even one no longer configured),
    else the default profile's name; ``"parent"``: a fork's origin, else null."""
    default = config.default_profile
    titles, lineage = listing.titles, listing.lineage
    rows: list[dict[str, Any]] = []
    for h in listing.headers:
        origin = lineage.forks.get(h.id)
        rows.append(
            {
                "id": h.id,
                "title": titles[h.id].title if h.id in titles else None,
                "cwd": h.cwd,
                "created_at": h.created_at,
                "owner": h.owner,
                "parent": None if origin is None else {"id": origin.parent_id, "seq": origin.seq},
                "profile": lineage.profiles.get(h.id) or default,
            }
        )
    return rows


def _owner_label(user: str, header: SessionHeader) -> str:
    """Whose session this is, when it is not the user's own ("" for their own)."""
    owner = header.owner
    return "" if owner is None or owner == user else single_line(owner, 32)


def _profile_cell(config: DshConfig, recorded: str | None) -> str:
    chosen = resolve_profile(config, recorded)
    if chosen.note is not None and recorded is not None:
        return f"{single_line(recorded, NAME_CHARS)} (not configured)"
    return single_line(chosen.profile.name, NAME_CHARS)


def _parent_cell(origin: ForkOrigin | None, titles: Mapping[str, SessionTitle]) -> str:
    """``Plans #3``: the parent's title (its id when it has none, or is gone) and the seq."""
    if origin is None:
        return ""
    title = titles.get(origin.parent_id)
    name = (
        single_line(title.title, PARENT_CHARS)
        if title is not None and title.title.strip()
        else single_line(origin.parent_id)
    )
    return f"{name} #{origin.seq}"


def _print_table(config: DshConfig, listing: SessionListing) -> None:
    headers, titles, lineage = listing.headers, listing.titles, listing.lineage
    last_active = listing.last_active
    if not headers:
        print("No sessions yet. Create one with `dsh new`, or try `dsh demo`.")
        return
    table: list[tuple[str, ...]] = [
        (
            single_line(h.id),
            single_line(titles[h.id].title, 60) if h.id in titles else "",
            single_line(h.cwd) if h.cwd is not None else "—",
            relative_age(active_at(h, last_active.get(h.id))),
        )
        for h in headers
    ]
    columns: tuple[str, ...] = ("id", "title", "cwd", "last active")
    if any(lineage.profiles.get(h.id) for h in headers):  # some chose one: say which
        columns += ("profile",)
        table = [
            (*row, _profile_cell(config, lineage.profiles.get(h.id)))
            for row, h in zip(table, headers, strict=True)
        ]
    parents = [_parent_cell(lineage.forks.get(h.id), titles) for h in headers]
    if any(parents):  # some are forks: where each comes from
        columns += ("forked from",)
        table = [(*row, parent) for row, parent in zip(table, parents, strict=True)]
    owners = [_owner_label(listing.user, h) for h in headers]
    if any(owners):  # someone else's sessions (shared with you): say whose
        columns += ("owner",)
        table = [(*row, owner) for row, owner in zip(table, owners, strict=True)]
    if not sys.stdout.isatty():  # a pipe or a file: each row's cells by tabs, no padding
        for row in [columns, *table]:  # (a cell is one escaped line: it holds no tab)
            sys.stdout.write("\t".join(row) + "\n")
        return
    from tui.cli.output import print_session_table  # Rich loads only to draw

    # the fork origin is cut to fit like the title and the cwd, never the rest
    shrink = (columns.index("forked from"),) if "forked from" in columns else ()
    print_session_table(columns, table, shrink=shrink)
