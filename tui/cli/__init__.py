"""The ``dsh`` command line: its parser and commands (``commands.py``) and ``dsh demo``.

It never imports Textual: ``dsh`` (no command) loads the app only when it runs it.
"""

from tui.cli.commands import main

__all__ = ["main"]
