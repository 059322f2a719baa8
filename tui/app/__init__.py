"""The Textual app: the only room of ``tui`` that imports Textual.

``app.py`` holds the app and its ``app.tcss``, built in layers by concern (``parts``, ``keys``,
``lifetime``, ``opening``, ``sending``, ``actions``: see ``parts``); ``host.py`` the one
interface its helpers (follow, commands, control, meter, profiles) see of it; ``screens/``
the modal screens; ``composer/``, ``transcript/`` and ``sidebar/`` the widgets of each part of
the window; the plain modules beside them (drafts, follow, uistate, …) hold the app's
Textual-free logic.

CSS has one home per kind: the app's and each screen's ``.tcss`` beside its module
(``CSS_PATH``), a reusable widget's ``DEFAULT_CSS`` in its class; colours are theme
variables there (``$accent``), read in Python through component classes when needed.
"""

from tui.app.app import DshApp, run_app

__all__ = ["DshApp", "run_app"]
