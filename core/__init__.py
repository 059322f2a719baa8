"""dsh's domain: the session log, folding, titles, compaction and session references."""
