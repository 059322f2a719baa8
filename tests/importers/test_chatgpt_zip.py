"""The ChatGPT export reader on the export's ``.zip``: read in place, never extracted; an
archive without an export, a zip bomb, a lying or encrypted member, a huge directory
refused before anything is decompressed."""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
from pathlib import Path

import pytest

from core.importers import chatgpt
from core.importers.chatgpt import files as chatgpt_files
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from tests.importers.chatgpt_helpers import EXPORT, _conversation, _read, _sessions, _zip

# --------------------------------------------------------------------------- zip


def test_the_exports_zip_is_read_in_place(tmp_path: Path) -> None:
    export = EXPORT.read_bytes()
    archive = _zip(
        tmp_path / "export.zip",
        {
            "chat.html": b"<html></html>",
            "user.json": b"{}",
            "file-abc.png": b"\x89PNG",
            "deeper/conversations.json": b"[]",
            "conversations.json": export,
        },
    )
    from_zip = _sessions(archive)
    plain = _sessions(EXPORT)
    assert [s.events for s in from_zip] == [s.events for s in plain]
    assert from_zip[0].provenance.file == str(archive)
    assert list(tmp_path.iterdir()) == [archive]  # nothing extracted
    stored = _zip(tmp_path / "stored.zip", {"x/conversations.json": export}, zipfile.ZIP_STORED)
    assert len(_sessions(stored)) == 2


def test_a_zip_without_an_export_or_with_it_only_inside_another_zip_is_refused(
    tmp_path: Path,
) -> None:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as archive:
        archive.writestr("conversations.json", EXPORT.read_bytes())
    nested = _zip(tmp_path / "nested.zip", {"inner.zip": inner.getvalue()})
    (error,) = _read(nested)
    assert str(error) == "the zip archive holds no conversations.json"
    assert isinstance(error, ForeignImportError) and error.file == str(nested)
    assert not chatgpt.sniff(nested, nested.read_bytes()[:SNIFF_BYTES])
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    (error,) = _read(damaged)
    assert "zip archive" in str(error)


def test_a_zip_bomb_is_refused_before_it_is_decompressed(tmp_path: Path) -> None:
    bomb = _zip(tmp_path / "bomb.zip", {"conversations.json": b"[" + b" " * (32 * 1024**2) + b"]"})
    assert bomb.stat().st_size < 100_000
    (error,) = _read(bomb)
    assert str(error).startswith("conversations.json is compressed ")
    assert "refused as a zip bomb" in str(error)


def test_a_refused_export_is_still_taken_as_chatgpts_and_a_stray_zip_is_not(
    tmp_path: Path,
) -> None:
    """``dsh import bomb.zip`` says it is a zip bomb (before, sniff turned the bomb down and
    the file was read as a dsh log: "not valid UTF-8"); a zip without conversations.json
    is nobody's, so a folder import passes it by."""
    bomb = _zip(tmp_path / "bomb.zip", {"conversations.json": b"[" + b" " * (32 * 1024**2) + b"]"})
    assert chatgpt.sniff(bomb, bomb.read_bytes()[:SNIFF_BYTES])
    stray = _zip(tmp_path / "photos.zip", {"a.png": b"\x89PNG"})
    assert not chatgpt.sniff(stray, stray.read_bytes()[:SNIFF_BYTES])
    assert chatgpt.find_files(tmp_path) == [bomb]


def test_a_zip_member_that_lies_about_its_size_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member whose headers declare fewer bytes than it holds: never more than declared
    is read, the damage is one error, conversations wholly before it import."""
    noise = [os.urandom(50_000).hex() for _ in range(2)]  # deflates little: many reads
    data = json.dumps([_conversation("a", noise[0]), _conversation("b", noise[1])]).encode()
    path = _zip(tmp_path / "liar.zip", {"conversations.json": data})
    raw = bytearray(path.read_bytes())
    declared = len(data) - 40
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = raw.find(signature)
        assert struct.unpack_from("<I", raw, at + offset)[0] == len(data)
        struct.pack_into("<I", raw, at + offset, declared)
    path.write_bytes(bytes(raw))
    monkeypatch.setattr(chatgpt_files, "_READ", 64)  # the damage is seen at the member's end
    results = _read(path)
    assert isinstance(results[0], ForeignSession) and results[0].provenance.original_id == "a"
    assert isinstance(results[-1], ForeignImportError) and len(results) == 2


def test_a_zip_declaring_too_much_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chatgpt_files, "MAX_ZIP_MEMBER_BYTES", 1000)
    path = _zip(tmp_path / "big.zip", {"conversations.json": EXPORT.read_bytes()})
    (error,) = _read(path)
    assert "would decompress to" in str(error) and "more than the 1,000 dsh reads" in str(error)


def test_an_encrypted_member_is_refused(tmp_path: Path) -> None:
    path = _zip(tmp_path / "secret.zip", {"conversations.json": b"[]"}, zipfile.ZIP_STORED)
    raw = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(signature)
        struct.pack_into("<H", raw, at + offset, struct.unpack_from("<H", raw, at + offset)[0] | 1)
    path.write_bytes(bytes(raw))
    (error,) = _read(path)
    assert str(error) == "conversations.json is encrypted in the zip archive"


def test_a_zip_listing_too_many_entries_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chatgpt_files, "_MAX_ZIP_ENTRIES", 2)
    path = _zip(tmp_path / "many.zip", {"a": b"", "b": b"", "conversations.json": b"[]"})
    (error,) = _read(path)
    assert str(error).startswith("the zip archive lists 3 entries in ")
    assert not chatgpt.sniff(path, path.read_bytes()[:SNIFF_BYTES])
