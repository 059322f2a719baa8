"""The transcript: messages, replies, reference and checkpoint cards, read a page at a time
(the paging and pruning arithmetic is the plain ``window`` module)."""
