"""The ``llm`` workload's driver: runs in the peer's own virtual environment (its
interpreter, ``llm`` 0.36 installed there), never imported by dsh's process. Only the
standard library and ``llm`` are used.

    python _llm_driver.py load CORPUS_DIR LOGS_DB [--no-history]
        Read every ``*.jsonl`` under CORPUS_DIR (dsh's export: a header line, then events;
        ``user/message`` and ``assistant/message`` in turn) and log each conversation
        through llm's own logging layer: a ``Conversation`` of a model whose ``execute``
        yields the recorded response, ``conversation.prompt(text)``, the response read,
        then ``LogStore.log(response)`` (what ``Response.log_to_db`` does, with one
        ``LogStore`` rather than one per response: its ``migrate`` runs once). Prints one
        JSON line: messages, the seconds in ``LogStore.log`` alone, the whole loop's.
        ``--no-history``: each exchange logged as a prompt of its own (``model.prompt``),
        without its conversation's earlier messages, which ``LogStore.log`` otherwise
        hashes and looks up again at every exchange (its cost grows with the
        conversation).

    python _llm_driver.py serve LOGS_DB
        Answer requests, one JSON line each on standard input, one JSON line each on
        standard output: ``{"query": Q, "count": N, "reps": R}`` times ``R`` calls of
        llm's search layer (``merged_log_rows(store, count=N, query=Q)``, what ``llm logs
        -q Q -n N`` calls) and of raw FTS5 on the same index (``SELECT rowid FROM
        turn_search_fts WHERE turn_search_fts MATCH ? ORDER BY rank LIMIT N``), in turn;
        answers ``{"merged": [s...], "raw": [s...], "merged_hits": n, "raw_hits": n}``.
        An empty line ends it.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

USER_MESSAGE = "user/message"
ASSISTANT_MESSAGE = "assistant/message"
RAW_SQL = "SELECT rowid FROM turn_search_fts WHERE turn_search_fts MATCH ? ORDER BY rank LIMIT ?"


def _text(message: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in message["content"] if b.get("type") == "text")


def read_exchanges(path: Path) -> list[tuple[str, str]]:
    """(prompt, response) of each exchange of one dsh export."""
    prompts: list[str] = []
    responses: list[str] = []
    with path.open(encoding="utf-8") as lines:
        next(lines)  # the session header
        for line in lines:
            event = json.loads(line)
            if event["type"] == USER_MESSAGE:
                prompts.append(_text(event["data"]))
            elif event["type"] == ASSISTANT_MESSAGE:
                responses.append(_text(event["data"]["message"]))
    assert len(prompts) == len(responses), path
    return list(zip(prompts, responses, strict=True))


def load(corpus: str, db_path: str, history: bool = True) -> dict[str, Any]:
    import llm  # type: ignore[import-not-found]
    import sqlite_utils  # type: ignore[import-not-found]
    from llm.logs import LogStore  # type: ignore[import-not-found]

    class Canned(llm.Model):  # type: ignore[misc]
        """A model whose next reply is set before each prompt."""

        model_id = "bench-canned"
        can_stream = True

        def __init__(self) -> None:
            self.reply = ""

        def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Any:
            yield self.reply

    model = Canned()
    files = sorted(Path(corpus).rglob("*.jsonl"))
    started = time.perf_counter()
    db = sqlite_utils.Database(db_path)
    store = LogStore(db)
    logging = 0.0
    messages = 0
    for path in files:
        conversation = model.conversation()
        for prompt, reply in read_exchanges(path):
            model.reply = reply
            # Without history each exchange is a prompt of its own (its own thread, as
            # separate `llm "…"` calls log them): a chain of one message to store.
            response = conversation.prompt(prompt) if history else model.prompt(prompt)
            response.text()
            at = time.perf_counter()
            store.log(response)
            logging += time.perf_counter() - at
            messages += 2
    db.close()
    return {
        "messages": messages,
        "conversations": len(files),
        "log_seconds": logging,
        "seconds": time.perf_counter() - started,
    }


def serve(db_path: str) -> None:
    import sqlite_utils
    from llm.logs import LogStore, merged_log_rows

    db = sqlite_utils.Database(db_path)
    store = LogStore(db)
    raw = sqlite3.connect(db_path)
    for line in sys.stdin:
        if not line.strip():
            break
        ask = json.loads(line)
        query, count, reps = ask["query"], ask["count"], ask["reps"]
        merged: list[float] = []
        raws: list[float] = []
        merged_hits = raw_hits = 0
        for _ in range(reps):
            at = time.perf_counter()
            rows = merged_log_rows(store, count=count, query=query)
            merged.append(time.perf_counter() - at)
            at = time.perf_counter()
            ids = raw.execute(RAW_SQL, (query, count)).fetchall()
            raws.append(time.perf_counter() - at)
            merged_hits, raw_hits = len(rows), len(ids)
        answer = {"merged": merged, "raw": raws, "merged_hits": merged_hits, "raw_hits": raw_hits}
        print(json.dumps(answer), flush=True)
    raw.close()
    db.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["load"] and len(argv) in (3, 4) and argv[3:] in ([], ["--no-history"]):
        print(json.dumps(load(argv[1], argv[2], history=len(argv) == 3)), flush=True)
        return 0
    if argv[:1] == ["serve"] and len(argv) == 2:
        serve(argv[1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
