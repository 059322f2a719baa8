"""The ``dsh`` command line: its entry point and dispatch (``commands.py``) and its parser
(``parser``), with the commands beside them by family (``listing``: sessions;
``conversation``: new, send, reply, prepare, compact, rename; ``replying``: streaming a
reply for send, reply, retry and edit; ``control``: retry, edit, fork; ``showing``: show,
replay; ``finding``: search, candidates, mention; ``sharing``; ``transfer``: export,
import, migrate; ``asking``: delete, unlock, demo; ``profiles``; ``usage``; ``demo``).

It never imports Textual: ``dsh`` (no command) loads the app only when it runs it.
"""

from tui.cli.commands import main

__all__ = ["main"]
