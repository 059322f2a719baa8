"""The app's keys and what may run now: the bindings the footer shows (in the order it
shows them), ``check_action`` (an action that cannot run now is dimmed, one that waits
until the app is not busy is hidden), and the one sentence saying why the app is busy."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.css.query import NoMatches

from tui.app.busy import Activity, Busy, action_available, busy_reason
from tui.app.control import CONTROL_ACTIONS
from tui.app.parts import AppParts

__all__ = ["SESSION_WRITING_ACTIONS", "WRITING_ACTIONS", "AppKeys"]

WRITING_ACTIONS = frozenset(
    {"new_session", "rename_session", "compact_session", "delete_session", "answer_again"}
)
"""Actions that write to the store: dimmed when it is read-only."""

SESSION_WRITING_ACTIONS = frozenset(
    {
        "rename_session",
        "compact_session",
        "delete_session",
        "answer_again",
        "share_session",
        "unshare_session",
    }
)
"""Actions that write to the open session: dimmed when another user owns it (issue 17:
a session shared with you is read-only to you)."""


class AppKeys(AppParts):
    """The key bindings and the checks that light, dim or hide them."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # The footer shows these in this order and cuts what does not fit: the keys a
        # newcomer needs first come first (Ctrl+B is also in the palette and the help).
        # Ctrl+R comes first: it is lit only while the last message has no reply (a reply
        # failed to store), and dimmed otherwise, like every action that cannot run now.
        Binding("ctrl+r", "answer_again", "Answer again"),
        Binding("escape", "cancel", "Back"),
        Binding("f1", "help", "Help"),
        Binding("ctrl+l", "focus_sessions", "Sessions"),
        Binding("ctrl+n", "new_session", "New"),
        Binding("f2", "rename_session", "Rename"),
        Binding("f4", "compact_session", "Compact"),
        Binding("f8", "delete_session", "Delete"),
        Binding("ctrl+b", "toggle_sidebar", "Sidebar"),
        Binding("ctrl+up,alt+up", "focus_messages", "Messages", show=False),
        Binding("question_mark", "help", "Help", show=False),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def watch_activity(self, activity: Activity) -> None:
        if self._chat_screen is not None and self._chat_screen.is_mounted:
            try:
                status, composer = self.status, self.composer
            except NoMatches:
                return  # the app is closing (a worker ending as it quits): nothing to show
            status.set_status(activity.status)
            # While preparing, Enter says how to cancel (the composer's SendBlocked).
            composer.send_enabled = self._can_send and not self.preparing

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``None`` (shown dimmed, does nothing) for an action that cannot run now;
        ``False`` (hidden) for one that waits until the reply, compaction, … is done."""
        if not action_available(action, self.activity.state):
            return False
        if action in CONTROL_ACTIONS:
            return self.control.check(action)
        if action in WRITING_ACTIONS and self.read_only:  # a replay, or a full disk
            return None
        if action in SESSION_WRITING_ACTIONS and self.foreign_owner is not None:
            return None
        if action in ("share_session", "unshare_session") and (self.chat is None or self.read_only):
            return None
        if action in ("rename_session", "compact_session", "delete_session") and self.chat is None:
            return None
        if action == "answer_again" and not (self.chat is not None and self._unanswered):
            return None
        return super().check_action(action, parameters)

    def _can(self, action: str) -> bool:
        """For the palette's entries, which call the actions directly."""
        return bool(self.check_action(action, ()))

    def say_busy(self, before: str) -> None:
        """Why ``before`` (e.g. "switching") cannot happen now: for the sidebar, the palette
        and Enter, which reach actions whose keys the footer shows dimmed."""
        state = self.activity.state
        if state not in (Busy.PREPARING, Busy.STREAMING):
            text = f"Wait a moment: {busy_reason(state)}."
        elif before == "sending":
            text = "Still busy with the last message; press Esc to stop it."
        else:
            text = f"Wait for the current reply (or press Esc) before {before}."
        self.notice.show_notice(text, warning=True)

    def set_unanswered(self, value: bool) -> None:
        if value != self._unanswered:
            self._unanswered = value
            self.refresh_bindings()
