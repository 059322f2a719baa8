"""The transcript: messages, replies, reference and checkpoint cards, read a page at a time.

``transcript`` holds the widget, put together from ``loading``, ``tail`` and ``paging``
(mixins on the shared ``state``; the paging arithmetic is the plain ``window`` module);
beside them ``entries`` (the widget each entry gets), ``messages`` (stored messages),
``reply`` (the streaming reply), ``text`` (what a message's text shows as), ``cards``,
``history`` and ``navigation``."""
