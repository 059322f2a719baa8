"""The virtual session list: only rows in view are drawn; keys, paging and clicks move the
highlight the way OptionList's did, with tens of thousands of rows."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from tui.app.sidebar.sessionlist import ROW_HEIGHT, SessionList

ROWS = 20_000
SIZE = (40, 22)  # 22 lines: 11 rows in view


class ListApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.drawn: set[int] = set()
        self.selected: list[int] = []

    def compose(self) -> ComposeResult:
        yield SessionList(id="rows")

    @property
    def rows(self) -> SessionList:
        return self.query_one(SessionList)

    def row(self, index: int) -> tuple[Text, Text]:
        self.drawn.add(index)
        return Text(f"session {index}"), Text(f"detail {index}", style="dim")

    def on_session_list_selected(self, message: SessionList.Selected) -> None:
        self.selected.append(message.index)


def line_text(app: ListApp, y: int) -> str:
    return app.rows.render_line(y).text.rstrip()


async def test_only_rows_in_view_are_drawn() -> None:
    app = ListApp()
    async with app.run_test(size=SIZE) as pilot:
        app.rows.set_rows(ROWS, app.row)
        await pilot.pause()
        assert app.rows.virtual_size.height == ROWS * ROW_HEIGHT
        assert app.rows.highlighted == 0
        assert line_text(app, 0) == "session 0"
        assert line_text(app, 1) == "detail 0"
        assert app.drawn and max(app.drawn) < 20, sorted(app.drawn)

        app.drawn.clear()
        app.rows.focus()
        await pilot.press("end")
        await pilot.pause()
        assert app.rows.highlighted == ROWS - 1
        # The last row is in view, at the bottom; only rows near it were drawn.
        assert line_text(app, SIZE[1] - 2) == f"session {ROWS - 1}"
        assert app.drawn and min(app.drawn) > ROWS - 20, sorted(app.drawn)


async def test_keys_move_and_page_the_highlight() -> None:
    app = ListApp()
    async with app.run_test(size=SIZE) as pilot:
        app.rows.set_rows(ROWS, app.row, highlighted=5)
        app.rows.focus()
        await pilot.pause()
        assert app.rows.highlighted == 5
        await pilot.press("down", "down", "up")
        assert app.rows.highlighted == 6
        await pilot.press("pagedown")
        assert app.rows.highlighted == 6 + SIZE[1] // ROW_HEIGHT
        await pilot.press("home", "up")
        assert app.rows.highlighted == 0  # clamped at the top
        await pilot.press("end", "down")
        assert app.rows.highlighted == ROWS - 1  # and at the bottom
        await pilot.press("pageup", "enter")
        assert app.selected == [ROWS - 1 - SIZE[1] // ROW_HEIGHT]


async def test_click_selects_the_row_under_the_pointer_after_scrolling() -> None:
    app = ListApp()
    async with app.run_test(size=SIZE) as pilot:
        app.rows.set_rows(ROWS, app.row)
        app.rows.focus()
        await pilot.pause()
        app.rows.highlighted = 1000  # scrolls it into view
        await pilot.pause()
        top = app.rows.scroll_offset.y // ROW_HEIGHT
        assert top <= 1000 < top + SIZE[1] // ROW_HEIGHT
        await pilot.click(SessionList, offset=(3, 2 * ROW_HEIGHT + 1))  # the detail line
        assert app.selected == [top + 2]
        assert app.rows.highlighted == top + 2


async def test_empty_and_shrinking_lists() -> None:
    app = ListApp()
    async with app.run_test(size=SIZE) as pilot:
        app.rows.set_rows(0, app.row)
        await pilot.pause()
        assert app.rows.highlighted is None
        app.rows.focus()
        await pilot.press("down", "end", "enter")
        assert app.selected == []
        assert line_text(app, 0) == ""

        app.rows.set_rows(ROWS, app.row, highlighted=ROWS - 1)
        await pilot.pause()
        app.rows.set_rows(3, app.row, highlighted=ROWS - 1)  # out of range: clamped
        await pilot.pause()
        assert app.rows.highlighted == 2
        assert app.rows.scroll_offset.y == 0
        assert line_text(app, 4) == "session 2"
        assert line_text(app, 6) == ""


async def test_long_and_hostile_labels_are_cut_to_one_line_each() -> None:
    app = ListApp()
    async with app.run_test(size=SIZE) as pilot:
        label = Text("[bold]x[/bold] " + "w" * 200)
        app.rows.set_rows(1, lambda index: (label, Text("d")))
        await pilot.pause()
        first = line_text(app, 0)
        assert first.startswith("[bold]x[/bold] www")
        assert first.endswith("…")
        assert len(first) == app.rows.scrollable_content_region.width
        assert line_text(app, 1) == "d"
