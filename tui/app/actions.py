"""The app's session actions and its command palette: new, rename, compact, delete, share,
export, copy the last reply, the sidebar's keys, the conversation control's keys (retry, edit,
fork: ``tui.app.control``), help, and the palette's system commands."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from textual import events, on, work
from textual.app import SystemCommand
from textual.screen import Screen

from core.display import single_line
from core.engine import ChatSession
from core.errors import SessionNotFoundError
from core.logfile import export_jsonl
from tui.app.busy import IDLE, Activity, Busy
from tui.app.host import run_in_worker
from tui.app.screens.help import HelpScreen
from tui.app.screens.modals import (
    ConfirmScreen,
    RenameScreen,
    UserNameScreen,
    compact_question,
    delete_question,
    share_question,
)
from tui.app.sending import AppSending
from tui.app.sidebar.sidebar import Sidebar
from tui.app.transcript.cards import Foldable
from tui.app.transcript.history import ForkBanner
from tui.app.transcript.navigation import MessageItem
from tui.app.transcript.transcript import last_assistant_text
from tui.shared.export import export_markdown
from tui.shared.files import write_new_file
from tui.shared.history import whole_history

__all__ = ["AppActions"]


class AppActions(AppSending):
    """The actions behind the keys and the palette's entries."""

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ conversation control

    def action_retry_reply(self) -> None:
        """``r`` on a message (or the palette): answer the last request again."""
        self.control.retry()

    def action_edit_message(self) -> None:
        """``e`` on one of your messages (or the palette): edit it and resend."""
        self.control.edit()

    def action_fork_session(self) -> None:
        """``f`` on a message (or the palette): a new session up to that message."""
        self.control.fork()

    def action_focus_messages(self) -> None:
        """Ctrl+Up: from the composer to the newest message (Up/Down then walk them)."""
        self.transcript.focus_last_item()

    @on(ForkBanner.OpenParent)
    def _open_parent(self, message: ForkBanner.OpenParent) -> None:
        self.switch_to(message.session_id)

    @on(Foldable.TypedAhead)
    @on(MessageItem.TypedAhead)
    def _typed_on_a_card(self, message: Foldable.TypedAhead | MessageItem.TypedAhead) -> None:
        """A key typed on a focused card is for the composer: it gets the key itself, so
        what the key means there (``@`` opens the picker) holds too."""
        composer = self.composer
        composer.focus()
        composer.post_message(events.Key(message.key, message.character))

    # ------------------------------------------------------------------ actions

    def action_new_session(self) -> None:
        if self.busy:  # only from the palette: the key is dimmed
            self.say_busy("starting a new session")
            return
        self.activity = Activity(Busy.CREATING, "Creating a session…")  # may take a while
        self._new_session()

    @work(group="new-session")
    async def _new_session(self) -> None:
        try:
            with self.faults("create a session"):
                header = await self.runtime.store.create_session(cwd=self._cwd)
                await self.refresh_sessions()
                await self.open_session(header.id)
                self.composer.focus()
        finally:
            self.activity = IDLE

    def action_rename_session(self) -> None:
        if self.chat is None:  # only from the palette: the key is dimmed
            return
        chat = self.chat

        async def done(title: str | None) -> None:
            if title:
                with self.faults("rename the session"):
                    await chat.rename(title)
                    await self.refresh_sessions()

        entry = self.sidebar.entry(chat.session_id)
        self.push_screen(RenameScreen(entry.title or "" if entry else ""), done)

    def action_delete_session(self) -> None:
        if self.chat is not None:
            self._confirm_delete(self.chat.session_id)

    @on(Sidebar.DeleteRequested)
    def _sidebar_delete(self, message: Sidebar.DeleteRequested) -> None:
        self._confirm_delete(message.session_id)

    def _confirm_delete(self, session_id: str) -> None:
        if self.busy:  # the key is dimmed; the sidebar's delete key says why
            self.say_busy("deleting")
            return
        entry = self.sidebar.entry(session_id)
        owner = self._owner_if_not_mine(entry.header if entry is not None else None)
        if owner is not None:  # the sidebar's delete key on a session shared with you
            self.notice.show_notice(
                f"Only {single_line(owner, 40)} can delete this session (it is shared with you).",
                warning=True,
            )
            return

        async def done(confirmed: bool | None) -> None:
            if not confirmed:
                return
            with (
                self.faults("delete the session") as guard,
                contextlib.suppress(SessionNotFoundError),  # deleted elsewhere: just as well
            ):
                await self.runtime.store.delete_session(session_id)
            if guard.failed:
                return
            if self.current_id == session_id:
                self.chat = None
            await self.refresh_sessions()
            if self.chat is None:
                await self.open_newest_session()

        self.push_screen(
            ConfirmScreen(delete_question(self.label_of(session_id), session_id)), done
        )

    def action_share_session(self) -> None:
        """From the palette: share the open session (one's own) with a user, read-only."""
        self._ask_user_to_share(share=True)

    def action_unshare_session(self) -> None:
        """From the palette: stop sharing the open session with a user."""
        self._ask_user_to_share(share=False)

    def _ask_user_to_share(self, *, share: bool) -> None:
        if self.chat is None or not self._can("share_session"):
            if self.foreign_owner is not None:
                self.notice.show_notice(self.foreign_notice(self.foreign_owner), warning=True)
            return
        session_id = self.chat.session_id
        label = self.label_of(session_id)

        async def done(user: str | None) -> None:
            if user:
                self._share(session_id, label, user, share)

        question = share_question(label, session_id, share=share)
        self.push_screen(UserNameScreen(question, "Share" if share else "Stop sharing"), done)

    @work(group="share")
    async def _share(self, session_id: str, label: str, user: str, share: bool) -> None:
        store = self.runtime.store
        doing = "share the session" if share else "stop sharing the session"
        with self.faults(doing) as guard:
            changed = await (store.share if share else store.unshare)(session_id, user)
        if guard.failed:
            return
        who, what = single_line(user, 40), single_line(label, 60)
        if share:
            text = (
                f"Shared {what} with {who} (read-only)."
                if changed
                else (f"{what} was already shared with {who}.")
            )
        else:
            text = (
                f"{what} is no longer shared with {who}."
                if changed
                else (f"{what} was not shared with {who}.")
            )
        self.notify(text, markup=False)

    def action_compact_session(self) -> None:
        """F4: ask first (the model sees only the summary afterwards), then compact."""
        if self.busy:  # only from the palette: the key is dimmed
            self.say_busy("compacting")
            return
        if self.chat is None:
            return
        session_id = self.chat.session_id

        def done(confirmed: bool | None) -> None:
            if confirmed and self.current_id == session_id:
                self._compact_session()

        self.push_screen(
            ConfirmScreen(
                compact_question(self.label_of(session_id), session_id), confirm_label="Compact"
            ),
            done,
        )

    def _compact_session(self) -> None:
        if self.chat is not None and not self.busy:  # it may have started while asking
            self.activity = Activity(Busy.COMPACTING, "Compacting…")
            self._compact(self.chat)

    @work(exclusive=True, group="compact")
    async def _compact(self, chat: ChatSession) -> None:
        try:
            with self.faults("compact the session") as guard:
                result = await chat.compact()
                if self.chat is chat:
                    self.show_window(await self.read_window(chat.session_id))
        finally:
            self.activity = IDLE
            self.meter.refresh()
        if not guard.failed:
            self.notify(f"Compacted {len(result.shadowed)} messages into a summary.", markup=False)

    NARROW = 80

    def _fit_sidebar(self, width: int) -> None:
        """Narrow terminals start without the sidebar (Ctrl+B still shows it)."""
        if self._sidebar_choice is None:
            self.sidebar.set_class(width < self.NARROW, "-hidden")

    def on_resize(self, event: events.Resize) -> None:
        if self._chat_screen is not None and self._chat_screen.query("#sidebar"):
            self._fit_sidebar(event.size.width)

    def action_toggle_sidebar(self) -> None:
        self._sidebar_choice = self.sidebar.has_class("-hidden")
        self.sidebar.toggle_class("-hidden")
        if self.sidebar.has_class("-hidden"):
            self.composer.focus()

    def action_focus_sessions(self) -> None:
        self.sidebar.remove_class("-hidden")
        self.sidebar.filter_input.focus()

    async def action_copy_last_reply(self) -> None:
        text = self.transcript.last_reply_text()
        if not text and self.transcript.unread_count and self.chat is not None:
            # Not among the items read so far: look through the whole surface.
            with self.faults("read the last reply") as guard:
                snapshot = await self.runtime.query.read_surface(self.chat.session_id)
                text = last_assistant_text(snapshot.events)
            if guard.failed:
                return
        if not text:
            self.notify("There is no reply to copy yet.", markup=False, severity="warning")
            return
        self.copy_to_clipboard(text)
        self.notify("Copied the last reply to the clipboard.", markup=False)

    async def action_export(self, fmt: str = "md") -> None:
        if self.chat is None:
            return
        chat = self.chat
        header = chat.header
        with self.faults("export the session") as guard:
            if fmt == "json":
                events = await self.runtime.store.read_events(header.id)
                lines = list(export_jsonl(header, events))
            else:
                history, taken = whole_history(await self.runtime.store.read_events(header.id))
                entry = self.sidebar.entry(header.id)
                lines = export_markdown(header, entry.title if entry else None, history, taken)
        if guard.failed:
            return
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in header.id)[:40] or "session"
        suffix = ".jsonl" if fmt == "json" else ".md"
        try:  # a new name (`dsh-x (2).md`) when the file exists: never overwrite one
            path = await asyncio.to_thread(
                write_new_file, Path(self._cwd), f"dsh-{safe}", suffix, "\n".join(lines) + "\n"
            )
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or err
            self.notice.show_notice(f"Could not export: {single_line(str(reason), 200)}")
            return
        self.notify(f"Exported to {single_line(str(path))}", markup=False)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "New session", "Start a new chat session (Ctrl+N)", self.action_new_session
        )
        yield self.profiles.system_command()
        yield SystemCommand(
            "Rename session", "Give the current session a title (F2)", self.action_rename_session
        )
        yield SystemCommand(
            "Compact session",
            "Replace the conversation by a summary (F4)",
            self.action_compact_session,
        )
        yield SystemCommand(
            "Delete session", "Delete the current session (F8)", self.action_delete_session
        )
        if self.foreign_owner is None:
            yield SystemCommand(
                "Share session…",
                "Let another user read this session (they cannot change it)",
                self.action_share_session,
            )
            yield SystemCommand(
                "Unshare session…",
                "Stop sharing this session with a user",
                self.action_unshare_session,
            )
        yield SystemCommand(
            "Export as Markdown",
            "Write the conversation to a .md file in the working directory",
            lambda: run_in_worker(self, partial(self.action_export, "md")),
        )
        yield SystemCommand(
            "Export as JSONL",
            "Write the raw log (importable with dsh import)",
            lambda: run_in_worker(self, partial(self.action_export, "json")),
        )
        yield SystemCommand(
            "Answer again",
            "Answer the last message, whose reply could not be stored (Ctrl+R)"
            if self._unanswered
            else "Nothing to answer now: the last message has a reply",
            self.action_answer_again,
        )
        yield from self.control.commands(screen)
        yield SystemCommand(
            "Copy last reply",
            "Copy the newest assistant reply to the clipboard",
            lambda: run_in_worker(self, self.action_copy_last_reply),
        )
        yield SystemCommand(
            "Toggle sidebar", "Show or hide the session list (Ctrl+B)", self.action_toggle_sidebar
        )
