"""The transcript: messages, replies, reference and checkpoint cards, read a page at a time."""
