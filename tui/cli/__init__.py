"""The ``dsh`` command line: its parser and most commands (``commands.py``), with the
larger ones beside it (``listing``: sessions; ``replying``: streaming a reply for send,
reply, retry and edit; ``control``: retry, edit, fork; ``profiles``; ``usage``; ``demo``).

It never imports Textual: ``dsh`` (no command) loads the app only when it runs it.
"""

from tui.cli.commands import main

__all__ = ["main"]
