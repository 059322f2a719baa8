"""``dsh replay FILE``: a log file shown exactly as a stored session, read-only, without a
database — as text (``--text``, as ``dsh show``) or as the app's screen in SVG (``--svg``)."""

from __future__ import annotations

import html
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tui.shared.replay as replay_module
from tests.cli.conftest import Result, Run

pytestmark = pytest.mark.timeout(120)

REFERENCE_LOG = (
    Path(__file__).parents[1]
    / "importers/reference_logs/packages/test-support/acp-snapshot/tests/fixtures/record-suite/rec-child/session.jsonl"
)


@pytest.fixture(autouse=True, params=["in memory", "streamed"])
def replay_mode(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """Every test twice: the log held in memory, and streamed into a temporary database
    (as a log above ``STREAM_ABOVE_BYTES`` is), whose folder is gone afterwards."""
    if request.param == "in memory":
        yield
        return
    spool = tmp_path_factory.mktemp("spool")
    monkeypatch.setattr(replay_module, "STREAM_ABOVE_BYTES", 0)
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args: object, **kwargs: object) -> str:
        made.append(real_mkdtemp(*args, **kwargs))  # type: ignore[call-overload]
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    yield
    assert made or request.node.name.startswith(("test_a_bad_file", "test_missing"))
    assert list(spool.iterdir()) == [], "the temporary database is removed"


def demo_export(dsh: Run, tmp_path: Path, session: str = "demo-research-with-references") -> Path:
    assert dsh("demo").code == 0
    out = tmp_path / "log.jsonl"
    result = dsh("export", session, "--format", "json", "-o", str(out))
    assert result.code == 0, result.err
    return out


def svg_text(svg: str) -> str:
    return html.unescape(" ".join(re.findall(r">([^<]*)</text>", svg))).replace("\xa0", " ")


def test_text_is_what_dsh_show_prints_for_the_stored_session(
    dsh: Run, tmp_path: Path, dsh_env: Path
) -> None:
    log = demo_export(dsh, tmp_path)
    shown = dsh("show", "demo-research-with-references")
    elsewhere = tmp_path / "never.sqlite3"
    replayed = dsh("replay", str(log), "--text", db=elsewhere)
    assert replayed.code == 0, replayed.err
    assert replayed.out == shown.out
    assert "@hostile trying" in replayed.out
    assert not elsewhere.exists(), "replay opened no database"


def test_svg_is_the_apps_screen_and_writes_nothing_else(
    dsh: Run, tmp_path: Path, dsh_env: Path
) -> None:
    log = demo_export(dsh, tmp_path)
    elsewhere = tmp_path / "never.sqlite3"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    out = tmp_path / "shot.svg"
    result = dsh("replay", str(log), "--svg", str(out), "--size", "100x30", db=elsewhere)
    assert result.code == 0, result.err
    assert result.out == f"wrote {out}\n"
    text = svg_text(out.read_text(encoding="utf-8"))
    assert "Replay of" in text and "(read-only)" in text
    assert "Release review (uses references)" in text
    assert "@hostile" in text and " trying to give you instructions?" in text
    assert 'viewBox="0 0 1238 ' in out.read_text(encoding="utf-8")  # 100 columns
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([*before, "shot.svg"])


def test_expand_cards_and_at(dsh: Run, tmp_path: Path) -> None:
    log = demo_export(dsh, tmp_path)
    out = tmp_path / "cards.svg"
    assert dsh("replay", str(log), "--svg", str(out), "--expand-cards").code == 0
    assert "captured through:" in svg_text(out.read_text(encoding="utf-8"))
    first = dsh("replay", str(log), "--text", "--at", "2")  # the first card and message
    assert first.code == 0, first.err
    assert "Summarise the checkout decisions" in first.out
    assert "Assistant" not in first.out and "@hostile" not in first.out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"type":"session","id":"s","created_at":1}\n{"seq": 0, "ty', r": line 2: "),
        ("not json at all\n", r": line 1: "),
        ("", r": "),
    ],
)
def test_a_bad_file_is_one_line_naming_the_line(
    dsh: Run, tmp_path: Path, content: str, expected: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content, encoding="utf-8")
    result = dsh("replay", str(bad), "--text")
    assert result.code == 1 and not result.out
    assert result.err.startswith(f"dsh: error: {bad}{expected}"), result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err


def test_missing_file_bad_size_and_bad_at(dsh: Run, tmp_path: Path) -> None:
    missing = dsh("replay", str(tmp_path / "nope.jsonl"), "--text")
    assert missing.code == 1 and "cannot read" in missing.err and "No such file" in missing.err
    log = demo_export(dsh, tmp_path)
    with pytest.raises(SystemExit) as caught:
        dsh("replay", str(log), "--svg", "x.svg", "--size", "9x9")
    assert caught.value.code == 2
    far = dsh("replay", str(log), "--text", "--at", "100000")
    assert far.code == 1 and "--at 100000 is outside the log" in far.err


def test_a_reference_log_replays(dsh: Run, tmp_path: Path) -> None:
    result: Result = dsh("replay", str(REFERENCE_LOG), "--text")
    assert result.code == 0, result.err
    assert result.out.strip()
    out = tmp_path / "ref.svg"
    assert dsh("replay", str(REFERENCE_LOG), "--svg", str(out)).code == 0
    assert "(read-only)" in svg_text(out.read_text(encoding="utf-8"))
