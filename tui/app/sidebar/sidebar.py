"""The session list: title or id, relative age and cwd; filter by typing; current highlighted.

Sessions are listed by last activity, newest first (a session without events counts from
its creation), so the one just used is on top and is what a restart opens. A fork keeps
that order (it is not moved under its parent, which may be far down the list): its row
starts with ``↳`` and its second line names the session it was forked from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Key
from textual.message import Message
from textual.widgets import Input, Static

from core.display import relative_age, single_line
from core.log import SessionHeader, now_ms
from core.query import SessionTitle
from core.references import SessionDiscovery
from core.search import SearchHit
from tui.app.sidebar.sessionlist import SessionList
from tui.shared.activity import active_at, order_by_last_activity
from tui.shared.filtering import session_matches
from tui.shared.lineage import ForkParent
from tui.shared.snippets import snippet_text

__all__ = ["NEW_SESSION_LABEL", "BodySource", "SessionEntry", "Sidebar", "by_last_activity"]

BodySource = Callable[[str, Sequence[str]], Awaitable[Sequence[SessionDiscovery]]]
"""Given the filter and the ids already listed, the other sessions whose messages contain
it, best first (``SessionReferenceService.search_sessions``)."""

NEW_SESSION_LABEL = "New session"
"""What an untitled session without any event is called (rather than its UUID)."""

FORK_MARK = "↳ "
"""Before the label of a fork; its second line then says which session it came from."""
PARENT_CHARS = 24
"""How much of a fork's parent's label its second line keeps."""


@dataclass(frozen=True, slots=True)
class SessionEntry:
    header: SessionHeader
    title: str | None
    last_active: int | None = None
    """The time of the session's last event; ``None`` when it has none yet."""
    hit: SearchHit | None = None
    """For a session listed because a message of it contains the filter: that message."""
    parent: ForkParent | None = None
    """For a fork: the session it was forked from (``session/fork``), else ``None``."""

    @property
    def label(self) -> str:
        if self.title:
            return self.title
        return NEW_SESSION_LABEL if self.last_active is None else self.header.id

    @property
    def active_at(self) -> int:
        """When the session was last used: its last event, or its creation."""
        return active_at(self.header, self.last_active)

    def matches(self, query: str) -> bool:
        return session_matches(query, self.header.id, self.title, self.header.cwd)


def by_last_activity(entries: Sequence[SessionEntry]) -> list[SessionEntry]:
    """Newest activity first; ties by newest creation, then by id (as ``dsh sessions``)."""
    return order_by_last_activity(entries, lambda e: e.header, lambda e: e.last_active)


class Sidebar(Vertical):
    """Lists sessions by last activity. Posts ``Sidebar.Selected`` when the user opens one."""

    DEFAULT_CSS = """
    Sidebar { width: 34; dock: left; border-right: vkey $foreground 20%; }
    Sidebar #sidebar-title { padding: 0 1; color: $text-muted; text-style: bold; }
    Sidebar Input, Sidebar Input:focus { border: none; height: 1; padding: 0 1; margin: 0 0 1 0; }
    Sidebar Input:focus { background: $boost; }
    Sidebar SessionList { height: 1fr; }
    Sidebar.-hidden { display: none; }
    Sidebar > .sidebar--current { color: $success; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"sidebar--current"}
    """``sidebar--current``: the marker before the open session."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("delete", "delete_session", "Delete", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    class Selected(Message):
        """A session was chosen; ``seq``: the message of the body match it was chosen by
        (the transcript shows it), else ``None``."""

        def __init__(self, session_id: str, seq: int | None = None) -> None:
            super().__init__()
            self.session_id = session_id
            self.seq = seq

    class DeleteRequested(Message):
        def __init__(self, session_id: str) -> None:
            super().__init__()
            self.session_id = session_id

    def __init__(self, *, now: Callable[[], int] = now_ms, id: str | None = None) -> None:
        super().__init__(id=id)
        self._now = now
        self._entries: list[SessionEntry] = []
        self._visible: list[SessionEntry] = []
        self._positions: dict[str, int] = {}
        self._labels: dict[str, str] = {}  # every listed session's label, by id
        self._parents: dict[str, ForkParent] = {}  # the forks among them, by id
        self.current_id: str | None = None
        self.me: str | None = None  # the user: other owners' sessions are marked
        self.body_source: BodySource | None = None
        """Where the filter finds sessions by what was said in them (set by the app)."""
        self._found: list[tuple[str, SearchHit]] = []  # body matches of ``_found_for``
        self._found_for = ""
        self._search_generation = 0

    def compose(self) -> ComposeResult:
        yield Static("Sessions", id="sidebar-title")
        yield Input(placeholder="Filter sessions…", id="session-filter", select_on_focus=False)
        yield SessionList(id="session-list")

    @property
    def option_list(self) -> SessionList:
        """The list of sessions (virtual: only the rows in view are drawn)."""
        return self.query_one("#session-list", SessionList)

    @property
    def filter_input(self) -> Input:
        return self.query_one("#session-filter", Input)

    @property
    def entries(self) -> Sequence[SessionEntry]:
        return tuple(self._entries)

    @property
    def visible_ids(self) -> list[str]:
        return [e.header.id for e in self._visible]

    def set_sessions(
        self,
        headers: Sequence[SessionHeader],
        titles: Mapping[str, SessionTitle],
        current_id: str | None,
        last_active: Mapping[str, int] | None = None,
        *,
        me: str | None = None,
        parents: Mapping[str, ForkParent] | None = None,
    ) -> None:
        """Show these sessions, ordered by ``last_active`` (the time of each one's last
        event, as ``SessionQuery.read_last_event_times`` gives it; absent: no events).
        ``me``: the user; a session another user owns (shared with them) says whose.
        ``parents``: the forks among them and the session each was forked from (by
        default those last given: ``set_parents``)."""
        times = last_active if last_active is not None else {}
        if parents is not None:
            self._parents = dict(parents)
        forks = self._parents
        self.me = me
        self._entries = by_last_activity(
            [
                SessionEntry(
                    h,
                    titles[h.id].title if h.id in titles else None,
                    times.get(h.id),
                    parent=forks.get(h.id),
                )
                for h in headers
            ]
        )
        self._labels = {e.header.id: e.label for e in self._entries}
        self.current_id = current_id
        self._refresh_options()

    def set_parents(self, parents: Mapping[str, ForkParent]) -> None:
        """The forks among the listed sessions and their parents (read after the list,
        in the background); rows are drawn again only when that changed."""
        if dict(parents) == self._parents:
            return
        self._parents = dict(parents)
        self._entries = [replace(e, parent=self._parents.get(e.header.id)) for e in self._entries]
        self._refresh_options(search=False)

    def set_current(self, session_id: str | None) -> None:
        """Mark ``session_id`` as the open session (the list itself is not rebuilt). A filter
        that hides it is cleared: the open session is always in the list."""
        self.current_id = session_id
        if not self.is_mounted:
            return
        hidden = session_id is not None and session_id not in self._positions
        if hidden and self.filter_input.value and self.entry(session_id or "") is not None:
            self.filter_input.value = ""
            self._refresh_options()
        options = self.option_list
        position = self._positions.get(session_id) if session_id is not None else None
        if position is not None:
            options.highlighted = position
        options.refresh_rows()

    def entry(self, session_id: str) -> SessionEntry | None:
        return next((e for e in self._entries if e.header.id == session_id), None)

    def label_of(self, session_id: str) -> str | None:
        """The label of a listed session (``None``: not listed, e.g. deleted)."""
        return self._labels.get(session_id)

    def row_lines(self, index: int) -> tuple[Text, Text]:
        """The two lines of visible row ``index``: label (current marked), then age and cwd."""
        entry = self._visible[index]
        width = max(12, (self.size.width or 34) - 2)
        current = entry.header.id == self.current_id
        label = Text(no_wrap=True, overflow="ellipsis")
        marker = self.get_component_rich_style("sidebar--current", partial=True)
        label.append("● " if current else "  ", style=marker)
        if entry.parent is not None:
            label.append(FORK_MARK, style="dim")
        label.append(single_line(entry.label, max(8, width - 3)), style="bold" if current else "")
        detail = Text("  ", no_wrap=True, overflow="ellipsis")
        if entry.hit is not None:
            # Found by what was said in it: the message's snippet, the match marked.
            hit = entry.hit
            detail.append_text(snippet_text(hit.snippet, hit.spans, max(8, width - 3), style="dim"))
            return label, detail
        age = relative_age(entry.active_at, self._now())
        cwd = single_line(entry.header.cwd) if entry.header.cwd is not None else "no cwd"
        owner = entry.header.owner
        if owner is not None and self.me is not None and owner != self.me:
            # Shared with the user by its owner: read-only to them.
            detail.append(f"⇄ {single_line(owner, 24)} · ", style="italic")
        if entry.parent is None:
            detail.append(single_line(f"{age} · {cwd}", max(8, width - 3)), style="dim")
            return label, detail
        # A fork: its age, then where it came from; its cwd (its parent's) last, cut first.
        parent = self._labels.get(entry.parent.id, entry.parent.id)
        detail.append(f"{age} · ", style="dim")
        detail.append(f"of {single_line(parent, PARENT_CHARS)}", style="italic")
        detail.append(single_line(f" · {cwd}", max(8, width - 3)), style="dim")
        return label, detail

    def _refresh_options(self, *, search: bool = True) -> None:
        """List the sessions the filter matches by id, title or cwd, then those found by
        what was said in them (searched in the background: ``_search_bodies``)."""
        if not self.is_mounted:
            return
        query = self.filter_input.value.strip()
        local = [e for e in self._entries if not query or e.matches(query)]
        if query != self._found_for:
            self._found, self._found_for = [], query
        found: list[SessionEntry] = []
        if self._found:  # the sessions as listed now (renamed, deleted since the search)
            by_id = {e.header.id: e for e in self._entries}
            shown = {e.header.id for e in local}
            found = [
                replace(entry, hit=hit)
                for session_id, hit in self._found
                if (entry := by_id.get(session_id)) is not None and session_id not in shown
            ]
        self._visible = local + found
        self._positions = {e.header.id: i for i, e in enumerate(self._visible)}
        current = self._positions.get(self.current_id) if self.current_id is not None else None
        options = self.option_list
        highlighted = options.highlighted if not search else None
        options.set_rows(
            len(self._visible), self.row_lines, current if highlighted is None else highlighted
        )
        if search:
            self._search_generation += 1
            if query and self.body_source is not None:
                self._search_bodies(query, [e.header.id for e in local], self._search_generation)
            else:
                self.workers.cancel_group(self, "sidebar-search")

    @work(exclusive=True, group="sidebar-search", exit_on_error=False)
    async def _search_bodies(self, query: str, shown: list[str], generation: int) -> None:
        """Find the sessions whose messages contain ``query`` (a newer keystroke cancels
        this; a stale answer is dropped), then list them after the others."""
        source = self.body_source
        if source is None:
            return
        try:
            rows = await source(query, shown)
        except Exception as error:  # the local matches stay; the search adds nothing
            self.log.warning(f"session search failed: {error!r}")
            return
        if generation != self._search_generation or not self.is_mounted:
            return
        self._found = [(r.candidate.session_id, r.hit) for r in rows if r.hit is not None]
        self._found_for = query
        self._refresh_options(search=False)

    def on_mount(self) -> None:
        self._refresh_options()

    @on(Input.Changed, "#session-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._refresh_options()

    @on(Input.Submitted, "#session-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._visible:
            index = self.option_list.highlighted or 0
            self.post_message(self._selected(self._visible[index]))

    @on(SessionList.Selected, "#session-list")
    def _option_selected(self, event: SessionList.Selected) -> None:
        event.stop()
        if 0 <= event.index < len(self._visible):
            self.post_message(self._selected(self._visible[event.index]))

    def _selected(self, entry: SessionEntry) -> Sidebar.Selected:
        return self.Selected(entry.header.id, entry.hit.seq if entry.hit is not None else None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Esc clears a filter first; with none, it is the app's (back to the composer).
        if action == "clear_filter" and not self.filter_input.value:
            return False
        return super().check_action(action, parameters)

    def action_clear_filter(self) -> None:
        self.filter_input.value = ""

    def on_key(self, event: Key) -> None:
        # Typing while the list has focus filters it: send printable keys to the filter
        # (but "?", which opens the help there, as anywhere outside a text field).
        if (
            self.option_list.has_focus
            and event.is_printable
            and event.character
            and event.character != "?"
        ):
            self.filter_input.focus()
            self.filter_input.insert_text_at_cursor(event.character)
            event.stop()
        elif self.filter_input.has_focus and event.key in ("down", "up"):
            self.option_list.focus()
            event.stop()

    def action_delete_session(self) -> None:
        index = self.option_list.highlighted
        if index is not None and 0 <= index < len(self._visible):
            self.post_message(self.DeleteRequested(self._visible[index].header.id))
