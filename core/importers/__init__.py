"""Readers and writers for session logs written by other programs (pure: no store, no I/O)."""
