"""The sidebar: the session list (drawn row by row) and its filter."""
