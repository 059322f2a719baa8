"""The theme of the consoles ``dsh`` prints with (``tui.cli.output``): apart from the
transcript's renderer (``tui.shared.render``, which loads markdown_it), so that a table
printed on a terminal (``dsh sessions``, ``dsh search``) does not load it."""

from __future__ import annotations

from rich.theme import Theme

__all__ = ["THEME"]


THEME = Theme(
    {
        "dsh.mention": "bold cyan",
        "dsh.user": "bold blue",
        "dsh.assistant": "bold green",
        "dsh.card": "bold magenta",
        "dsh.checkpoint": "bold yellow",
        "dsh.interrupted": "yellow",
        "dsh.error": "red",
    }
)
"""The colours of a transcript printed by ``dsh show`` (its console's theme): the
renderables below name these styles, they never spell a colour. (The app styles its own
widgets from its Textual theme.)"""
