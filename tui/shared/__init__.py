"""What the three front ends (app, CLI, ACP agent) share, with no Textual in it: error wording,
transcript items, rendering for ``dsh show`` and the literal Markdown of every reply, export,
times (``times``), code fences (``fences``), files, the runtime and signals.

Modules that draw with Rich (``render``) are imported only by the app and the CLI; the ACP
agent uses the plain ones.
"""
