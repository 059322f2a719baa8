"""The composer: the message box, its ``@`` picker and the mention chips (``chiparea``: the
text area whose mentions are chips); the plain maths beside them: ``chips`` (chip spans),
``history`` (Up/Down walking), ``mentions`` (the ``@`` rules and the reference limit)."""
