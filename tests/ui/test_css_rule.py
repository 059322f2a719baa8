"""One rule for CSS: a screen's (or the app's) ``.tcss`` beside its module through
``CSS_PATH``; a reusable widget's ``DEFAULT_CSS``; nothing else."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

from textual.app import App
from textual.screen import Screen
from textual.widget import Widget

import tui.app


def _classes() -> list[type]:
    found: list[type] = []
    for info in pkgutil.walk_packages(tui.app.__path__, "tui.app."):
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == module.__name__:
                found.append(value)
    return found


def test_every_stylesheet_is_a_screens_css_path_beside_it() -> None:
    root = Path(tui.app.__file__).parent
    sheets = {path.resolve() for path in root.rglob("*.tcss")}
    named: set[Path] = set()
    for cls in _classes():
        paths = cls.__dict__.get("CSS_PATH")
        if paths is None:
            continue
        assert issubclass(cls, (App, Screen)), f"{cls.__name__}: only screens have a CSS_PATH"
        beside = Path(inspect.getfile(cls)).parent
        for path in [paths] if isinstance(paths, (str, Path)) else paths:
            sheet = (beside / path).resolve()
            assert sheet.parent == beside, f"{cls.__name__}: {path} is not beside its module"
            assert sheet.is_file(), f"{cls.__name__}: {path} is missing"
            named.add(sheet)
    assert sheets == named, f"stylesheets no screen names: {sorted(sheets - named)}"


def test_widget_styles_are_their_own_default_css() -> None:
    for cls in _classes():
        if issubclass(cls, Widget) and not issubclass(cls, Screen):
            css = cls.__dict__.get("DEFAULT_CSS")
            if css is not None:
                # Written in the class, not read from a file or filled from a template.
                source = inspect.getsource(cls)
                assert 'DEFAULT_CSS = """' in source, cls.__name__
