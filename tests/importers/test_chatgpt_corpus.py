"""The ChatGPT reader over the real exports of ``../shared/corpora/foreign_logs/chatgpt``
(skipped where that folder is absent; never copied here). Each conversation imports into
a SQLite store, its surface is the current branch, and a session reference to it carries
what the person and the model said, never a tool's output, a call or reasoning.

What these files do that the format's descriptions do not say: three of five have no
``current_node`` (the leaf written last is the branch), one has no parent or children
links and no ``content_type`` at all (its mapping's order is the conversation), one
names the conversation only by ``conversation_id``, and the one real export opens with
two empty hidden system nodes before the first question."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.importers import chatgpt
from core.importers.foreign import ForeignImportError, ForeignSession
from core.log import SessionHeader
from tests.importers.chatgpt_store import store_and_reference
from tui.cli.output import print_transcript
from tui.shared.items import classify_surface
from tui.shared.render import render_item

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "foreign_logs"
FOLDER = CORPUS / "chatgpt"
FILES = sorted(FOLDER.glob("*.json")) if FOLDER.is_dir() else []

pytestmark = pytest.mark.skipif(not FILES, reason="../shared/corpora is absent")

# file name prefix → (conversation id, surface event types in order)
EXPECTED = {
    "louisbove84": [("conv-fixture-aurora", "UAUA")],
    "misaka310": [("sample-001", "UAU")],
    "mitkury": [("conv-123", "UAUA")],
    "noo-bass": [("conv-chatgpt-1", "UA"), ("conv-chatgpt-2", "UA")],
    "realazthat": [
        (
            "966da5c4-5bb7-4e4d-ab6d-a7316b96266e",
            "UACTACTACTA" + "UCTA" * 3 + "UCTACTA" + "UCTA" * 3,
        )
    ],
}
_LETTER = {"user/message": "U", "assistant/message": "A", "tool/result": "T"}


def _letters(session: ForeignSession) -> str:
    out = []
    for event in session.events:
        if event.surface_op is None:
            continue
        letter = _LETTER[event.type]
        if letter == "A" and event.data["message"]["content"][0]["type"] == "tool-call":
            letter = "C"
        out.append(letter)
    return "".join(out)


def test_the_corpus_is_found_and_sniffed() -> None:
    assert len(FILES) == 5
    assert chatgpt.find_files(FOLDER) == FILES
    for path in FILES:
        assert chatgpt.sniff(path, path.read_bytes()[:65536])


@pytest.mark.parametrize("path", FILES, ids=[p.name.split("~")[0] for p in FILES])
async def test_a_real_export_imports_its_current_branch_and_references_only_talk(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = list(chatgpt.read_sessions([path]))
    assert not [r for r in results if isinstance(r, ForeignImportError)]
    sessions = [r for r in results if isinstance(r, ForeignSession)]
    expected = EXPECTED[path.name.split("~")[0]]
    assert [(s.provenance.original_id, _letters(s)) for s in sessions] == expected
    for number, session in enumerate(sessions):
        folder = tmp_path / str(number)
        folder.mkdir()
        stored, surface, conversation = await store_and_reference(session, folder)
        assert [(e.type, e.data) for e in stored[1:]] == [(e.type, e.data) for e in session.events]
        assert [e.data for e in surface] == [
            e.data for e in session.events if e.surface_op is not None
        ]
        said, unsaid = [], []
        for event in surface:
            message = event.data if event.type == "user/message" else event.data["message"]
            for block in message["content"]:
                if block["type"] == "text" and event.type != "tool/result":
                    said.append(block["text"])
                elif block["type"] == "reasoning":
                    unsaid.append(block["text"])
                elif block["type"] == "tool-call":
                    unsaid.append(block["arguments"])
                elif block["type"] == "tool-result":
                    unsaid.extend(b["text"] for b in block["content"])
        # replays as `dsh show` prints it, every item drawn
        header = SessionHeader(session.provenance.original_id, session.created_at)
        print_transcript(header, session.title, surface, expand=True)
        assert session.provenance.original_id in capsys.readouterr().out
        for item in classify_surface(surface):
            render_item(item, expand_cards=True, wrap=False)
        texts = [item["text"] for item in conversation]
        assert texts == [t for t in said if t]
        assert not set(texts) & set(unsaid)
        assert {item["role"] for item in conversation} <= {"user", "assistant"}
