"""Sending in the app: a draft becomes a message under the session's reply lease, the reply
streams into the transcript, Esc stops it, and whatever fails leaves the draft whole and a
notice saying what became of the message and how to go on (answer again: Ctrl+R)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from textual import on, work
from textual.widgets import HelpPanel

from core.display import single_line
from core.engine import (
    ChatSession,
    EngineUpdate,
    ReplyDelta,
    ReplyFinished,
    ReplyWaiting,
    TitleChanged,
)
from core.errors import DiskFullError, LeaseLostError, ReplyUnsavedError, SessionBusyError
from core.references import SessionReferenceError, find_session_reference_spans
from tui.app.busy import IDLE, Activity, Busy
from tui.app.composer.composer import Composer
from tui.app.faults import FAULTS
from tui.app.opening import AppOpening
from tui.shared.errors import describe_error, sentence, unlock_hint

__all__ = ["KEPT_WORDS", "AppSending"]

KEPT_WORDS = "the reply shown is kept here and saved with your next message in this session"
"""What became of a reply whose server stayed away (``ReplyUnsavedError``)."""


class AppSending(AppOpening):
    """The send flow and the reply stream."""

    # ------------------------------------------------------------------ sending

    @on(Composer.Submitted)
    def _submitted(self, message: Composer.Submitted) -> None:
        draft = message.text
        if not draft.strip():
            return
        if self.busy:
            self.say_busy("sending")
            return
        if (no_key := self.profiles.send_blocked()) is not None:  # nothing stored, draft kept
            self.notice.show_notice(f"{no_key} Your message was not sent.", warning=True)
            return
        self.notice.clear()
        self._send(draft, self.control.edit_seq(self.current_id))

    @on(Composer.SendBlocked)
    def _send_blocked(self) -> None:
        if self.preparing:
            self.notice.show_notice(
                "Preparing the referenced sessions… press Esc to cancel.", warning=True
            )
        elif getattr(self.runtime.store, "read_only", False):
            self.notice.show_notice(f"{self.read_only_why()}: sending is disabled.", warning=True)
        elif (owner := self.foreign_owner) is not None:
            self.notice.show_notice(self.foreign_notice(owner), warning=True)

    @work(exclusive=True, group="send")
    async def _send(self, draft: str, edit_seq: int | None = None) -> None:
        """Send ``draft`` (``edit_seq``: in place of that message of the user's)."""
        with self.faults("start a new session for the message") as guard:
            chat = await self.ensure_session()
        if guard.failed or chat is None:
            return  # the draft is still in the composer
        # One reply at a time per session, across processes: before anything is stored.
        await self.leased(chat, lambda: self._send_leased(chat, draft, edit_seq))

    async def leased(
        self,
        chat: ChatSession,
        work: Callable[[], Awaitable[None]],
        *,
        doing: str = "send the message",
        later: str = "Your draft is kept; send it when that reply is done.",
    ) -> None:
        """``work`` under ``chat``'s reply lease (a send, an edit, a retry): another writer
        replying in the session is a notice ending with ``later``, a fault taking or giving
        back the lease one saying what could not be done (``doing``); the draft is
        untouched."""
        try:
            async with chat.reply_lease():
                await work()
        except SessionBusyError as err:
            hint = unlock_hint(err)  # a holder not known to run here may be gone
            self.notice.show_notice(
                "This session is busy: another window or process is writing a reply. "
                + later
                + ("" if hint is None else f" If none is, {hint}."),
                warning=True,
            )
        except FAULTS as err:  # taking or giving back the lease: the draft is untouched
            self.report_fault(err, doing)

    async def _send_leased(self, chat: ChatSession, draft: str, edit_seq: int | None) -> None:
        composer = self.composer
        spans = find_session_reference_spans(draft)
        labels = {s.session_id: s.label for s in spans if s.session_id is not None}
        count = len(labels)
        composer.clear_draft()
        self._cancel_prepare = asyncio.Event()
        plural = "session" if count == 1 else "sessions"
        self.activity = Activity(
            Busy.PREPARING,
            f"Preparing {count} referenced {plural}… (Esc cancels)" if count else None,
        )  # the composer's Enter is blocked meanwhile (watch_activity)
        interrupt = asyncio.Event()  # Esc stops the reply (set once it streams)
        stream: AsyncIterator[EngineUpdate] | None = None
        try:
            if edit_seq is None:
                submitted = await chat.submit(draft, cancel=self._cancel_prepare)
            else:  # the edited message and the reply, one stream (ChatSession.edit)
                stream = chat.edit(
                    edit_seq, draft, cancel=self._cancel_prepare, interrupt=interrupt
                )
                submitted = await self.control.submitted(stream)
        except SessionReferenceError as err:
            self.restore_draft(draft)
            self.notice.show_notice(
                sentence(
                    describe_error(err, name_of=lambda sid: labels.get(sid) or self.label_of(sid))
                ),
                err.code,
            )
            return
        except FAULTS as err:
            self.restore_draft(draft)
            doing = "send the message" if edit_seq is None else "resend the edited message"
            self.report_fault(err, doing)
            return
        finally:
            self.activity = IDLE
            self._cancel_prepare = None
        composer.add_to_history(draft)
        self.transcript.follow()
        if stream is None:
            self.transcript.add_events(submitted.events)
        else:
            await self.control.edit_sent(chat)  # the replaced messages, folded
        self.set_unanswered(True)
        await self.stream_reply(chat, stream=stream, interrupt=interrupt)

    def restore_draft(self, draft: str) -> None:
        """Put a draft that was not sent back into the composer, losing nothing.

        When the user typed something meanwhile, the failed draft goes first, then a line
        break, then what they typed, with their cursor where it was: both texts stay in
        view and editable (sent history would hide the draft, and only sent messages
        belong there), in the order they were written.
        """
        composer = self.composer
        if not composer.draft:
            composer.set_draft(draft)
        else:
            composer.insert(draft + "\n", (0, 0))

    async def stream_reply(
        self,
        chat: ChatSession,
        *,
        again: bool = False,
        stream: AsyncIterator[EngineUpdate] | None = None,
        interrupt: asyncio.Event | None = None,
    ) -> None:
        """Stream the reply to the message just sent, or (``again``) to the last one left
        unanswered by a reply that failed, or the reply updates of ``stream`` (a retry, an
        edit: made with ``interrupt``, which Esc then sets)."""
        self._interrupt = interrupt if interrupt is not None else asyncio.Event()
        replying = Activity(Busy.STREAMING, "Replying… (Esc stops)")
        self.activity = replying
        view = self.transcript.begin_reply()
        if stream is not None:
            updates = stream
        elif again:
            updates = chat.reply_to_last(interrupt=self._interrupt)
        else:
            updates = chat.reply(interrupt=self._interrupt)
        try:
            waiting = False
            async for update in updates:
                if isinstance(update, ReplyDelta):
                    if waiting:
                        waiting = False
                        self.activity = replying
                    view.append(update.kind, update.text)
                elif isinstance(update, ReplyWaiting):
                    waiting = True
                    self.activity = Activity(
                        Busy.STREAMING,
                        f"Waiting {update.seconds_text} before retrying (Esc stops): "
                        f"{single_line(update.reason, 160)}",
                    )
                elif isinstance(update, ReplyFinished):
                    error = str(update.error) if update.error is not None else None
                    lost = update.store_error if update.status == "error" else None
                    if lost is not None:  # said beside the reply too: the notice line moves on
                        error = f"{lost} — the reply so far is saved"
                    view.finish(update.status, error, event=update.message_event)
                    self.set_unanswered(update.message_event is None)
                    if lost is not None:
                        self.notice.show_notice(
                            "The connection to the server was lost mid-reply: "
                            f"{describe_error(lost)}. The reply so far is saved, marked as "
                            "failed; r on it asks again.",
                            warning=True,
                        )
                    elif update.status == "error" and error is not None:
                        self.notice.show_notice(
                            f"The model failed: {single_line(error, 200)}. "
                            + (
                                "Your message and the partial reply are saved."
                                if update.message_event is not None
                                else "Your message is saved; press Ctrl+R to ask again."
                            )
                        )
                elif isinstance(update, TitleChanged):
                    await self.refresh_sessions()
        except LeaseLostError as err:
            # Another process writes the session now (`dsh unlock`): what streamed stays in
            # view, and its writes show as any other window's do.
            words = describe_error(err)
            view.finish("error", words)
            self.notice.show_notice(sentence(words), warning=True)
        except ReplyUnsavedError as err:  # the server stayed away: the reply waits here
            view.finish("error", f"{err} — {KEPT_WORDS}")
            self.set_unanswered(False)
            self.notice.show_notice(
                f"The server is unreachable: {describe_error(err)}. Your message is saved; "
                f"{KEPT_WORDS}.",
                warning=True,
            )
        except FAULTS as err:
            view.finish("error", str(err))
            self.notice.show_notice(self._reply_not_stored(err))
        finally:
            self.activity = IDLE
            self._interrupt = None
            self.meter.refresh()

    def _reply_not_stored(self, err: BaseException) -> str:
        """What a store failure during a reply left, and how to go on (one line)."""
        if not self._unanswered:
            return sentence(f"Could not save the reply: {describe_error(err)}")
        then = "Free some space, then press" if isinstance(err, DiskFullError) else "Press"
        return (
            f"Your message is saved; the reply could not be stored: {describe_error(err)}. "
            f"{then} Ctrl+R to answer it."
        )

    def action_answer_again(self) -> None:
        """Ctrl+R: answer the last message again, after a reply that could not be stored."""
        if self.busy:  # only from the palette: the key is dimmed
            self.say_busy("answering again")
            return
        if self.chat is None:
            return
        if not self._can("answer_again"):
            self.notice.show_notice(
                "Nothing to answer: the last message already has a reply.", warning=True
            )
            return
        if (no_key := self.profiles.send_blocked()) is not None:
            self.notice.show_notice(no_key, warning=True)
            return
        self.notice.clear()
        self._answer_again(self.chat)

    @work(exclusive=True, group="send")
    async def _answer_again(self, chat: ChatSession) -> None:
        self.transcript.follow()
        await self.stream_reply(chat, again=True)

    def action_cancel(self) -> None:
        """Esc: cancel preparation (draft kept) or stop a streaming reply (partial kept);
        otherwise close the Keys panel and clear the notice. Either way, back to the composer."""
        if self._cancel_prepare is not None:
            self._cancel_prepare.set()
        elif self._interrupt is not None:
            self._interrupt.set()
        elif self.control.cancel_edit():
            pass  # the edit is dropped, the earlier draft is back
        else:
            if self.screen.query(HelpPanel):
                self.action_hide_help_panel()
            self.notice.clear()
        if self.screen is self._chat_screen and not self.composer.has_focus:
            self.composer.focus()
