"""The main chain: the path from the last message that is not a sidechain back to the
root, through ``parentUuid`` (and a compaction's ``logicalParentUuid``)."""

from __future__ import annotations

from core.importers.claude_code.records import _MESSAGE_TYPES, _Record

# --------------------------------------------------------------------------- the chain


def _main_chain(records: list[_Record], leaf: _Record) -> set[str]:
    """The keys of the records from ``leaf`` back to its root."""
    by_key: dict[str, int] = {}
    previous_message: dict[str, str] = {}  # key -> the message before it in its file
    last: str | None = None
    for index, record in enumerate(records):
        by_key[record.key] = index
        if last is not None:
            previous_message[record.key] = last
        if record.obj["type"] in _MESSAGE_TYPES and not record.log_only:
            last = record.key
    chain: set[str] = set()
    key: str | None = leaf.key
    while key is not None and key not in chain:
        chain.add(key)
        obj = records[by_key[key]].obj
        parent = obj.get("parentUuid")
        if parent is None or parent not in by_key:
            logical = obj.get("logicalParentUuid")
            if isinstance(logical, str) and logical in by_key:
                parent = logical
            elif "parentUuid" not in obj or obj.get("subtype") == "compact_boundary":
                # no link at all (a hand-written transcript), or a compaction's boundary
                parent = previous_message.get(key)
            else:
                parent = None
        key = parent
    return chain
