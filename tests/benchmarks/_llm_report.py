"""The ``llm`` workload's table: the figures ``bench_llm.measure`` returns as rows (dsh's
figure, what it is compared with, the ratio, the issue's goal, met or not)."""

from __future__ import annotations

from typing import Any

from tests.benchmarks._common import Row, median
from tests.benchmarks._llm_corpus import LONG_LABELS, SHORT_LABELS

WORKLOAD = "llm"
IMPORT_GOAL = 4.0  # dsh's import rate at least this many times llm's
FILE_GOAL = 0.7  # dsh's file at most this fraction of llm's
SEARCH_GOAL = 0.2  # in process, at most this fraction of llm's search layer
SHORT_GOAL = 2.0  # a 1-2 character term at most this many times the rare word
COMMAND_GOAL = 0.25  # a command at most this fraction of `llm logs -q`
BARE_GOAL = 8.0  # a command at most this many times a bare interpreter

Line = tuple[Row, str]
"""A row and the name of what its baseline is (llm's figure, a bare interpreter, …)."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _row(
    what: str,
    size: str,
    ours: float,
    unit: str,
    baseline: float | None,
    target: str,
    met: bool | None,
    note: str = "",
    samples: list[float] | None = None,
    baseline_samples: list[float] | None = None,
) -> Row:
    ratio = None if baseline in (None, 0) else ours / baseline  # type: ignore[operator]
    return Row(
        f"{WORKLOAD}: {what}",
        size,
        ours,
        unit,
        target,
        met,
        baseline=baseline,
        ratio=ratio,
        note=note,
        samples=samples or [],
        baseline_samples=baseline_samples or [],
    )


def _import_lines(figures: dict[str, Any], size: str) -> list[Line]:
    messages = figures["messages"]
    llm = figures["import"]["llm"]
    flat = figures["import"].get("llm_flat")
    dsh_rate = messages / figures["import"]["dsh_seconds"]
    llm_rate = messages / llm["log_seconds"]
    note = (
        f"messages/s, ratio dsh over llm (higher is faster); dsh: `dsh import DIR` "
        f"{figures['import']['dsh_seconds']:.1f} s wall; llm: {llm['log_seconds']:.1f} s in "
        f"LogStore.log as conversations ({messages / llm['log_seconds']:,.0f} msg/s; "
        f"{llm['seconds']:.1f} s with the loop making the responses)"
    )
    if flat is not None:
        flat_rate = messages / flat["log_seconds"]
        note += (
            f", {flat['log_seconds']:.1f} s without history ({flat_rate:,.0f} msg/s); "
            "llm's figure is the faster"
        )
        llm_rate = max(llm_rate, flat_rate)
    lines = [
        (
            _row(
                "import",
                size,
                dsh_rate,
                "msg/s",
                llm_rate,
                f">= {IMPORT_GOAL:g}x llm",
                dsh_rate >= IMPORT_GOAL * llm_rate,
                note,
            ),
            "llm",
        )
    ]
    pg = figures.get("pg")
    if pg is not None:
        rate = messages / pg["import_seconds"]
        sizes = ", ".join(f"{name} {b / 1e6:,.1f} MB" for name, b in pg["sizes"].items())
        lines.append(
            (
                _row(
                    "import on PostgreSQL (member)",
                    size,
                    rate,
                    "msg/s",
                    llm_rate,
                    "reported",
                    None,
                    f"`dsh import DIR` by the member, {pg['import_seconds']:.1f} s; "
                    f"sizes with indexes: {sizes}",
                ),
                "llm",
            )
        )
    return lines


def _size_lines(figures: dict[str, Any], size: str) -> list[Line]:
    b = figures["bytes"]
    file_ratio = b["dsh_file"] / b["llm_file"]
    return [
        (
            _row(
                "file size",
                size,
                b["dsh_file"] / 1e6,
                "MB",
                b["llm_file"] / 1e6,
                f"<= {FILE_GOAL:g}x llm",
                file_ratio <= FILE_GOAL,
                "the whole database file (and its WAL, if any)",
            ),
            "llm",
        ),
        (
            _row(
                "search index size",
                size,
                b["dsh_index"] / 1e6,
                "MB",
                b["llm_index"] / 1e6,
                "reported",
                None,
                f"dbstat: dsh's search_* ({b['dsh_index'] / b['dsh_file']:.0%} of its file), "
                f"llm's turn_search and its FTS5 tables ({b['llm_index'] / b['llm_file']:.0%})",
            ),
            "llm",
        ),
    ]


def _command_lines(figures: dict[str, Any], size: str) -> list[Line]:
    c = figures["commands"]
    bare = c["dsh python -c pass"]
    llm_help = median(c["llm --help"])
    lines: list[Line] = []
    for name, against in (
        ("dsh search rare", "llm logs -q rare"),
        ("dsh search common", "llm logs -q common"),
        ("dsh sessions", "llm logs -q rare"),
        ("dsh --help", "llm logs -q rare"),
    ):
        ours, theirs = median(c[name]), median(c[against])
        note = (
            (
                f"llm --help {_ms(llm_help)}; bare interpreters: dsh's {_ms(median(bare))}, "
                f"llm's {_ms(median(c['llm python -c pass']))}"
            )
            if name == "dsh --help"
            else ""
        )
        lines.append(
            (
                _row(
                    f"`{name}` vs `{against}`",
                    size,
                    ours,
                    "s",
                    theirs,
                    f"<= {COMMAND_GOAL:g}x llm logs -q",
                    ours <= COMMAND_GOAL * theirs,
                    note,
                    c[name],
                    c[against],
                ),
                against,
            )
        )
        lines.append(
            (
                _row(
                    f"`{name}` vs bare python",
                    size,
                    ours,
                    "s",
                    median(bare),
                    f"<= {BARE_GOAL:g}x bare interpreter",
                    ours <= BARE_GOAL * median(bare),
                    "",
                    c[name],
                    bare,
                ),
                "python -c pass",
            )
        )
    return lines


def _search_lines(figures: dict[str, Any], size: str) -> list[Line]:
    searches = {s["label"]: s for s in figures["searches"]}
    expected = figures["expected_hits"]
    rare = median(searches["rare word"]["dsh"])
    lines: list[Line] = []
    for label, s in searches.items():
        dsh, llm, raw = median(s["dsh"]), median(s["llm"]), median(s["raw"])
        hits = (
            f"hits (of 20) dsh {s['dsh_hits']}, llm {s['llm_hits']} (turns), raw {s['raw_hits']}; "
            f"messages holding it {expected[label]:,}"
        )
        note = f"{s['query']!r}: raw FTS5 {_ms(raw)} (dsh {dsh / raw:,.1f}x raw); {hits}"
        if label in SHORT_LABELS:
            note = f"{s['query']!r}: llm {_ms(llm)}, raw FTS5 {_ms(raw)}; {hits}"
            row = _row(
                f"search {label}",
                size,
                dsh,
                "s",
                rare,
                f"<= {SHORT_GOAL:g}x rare word",
                dsh <= SHORT_GOAL * rare,
                note,
                s["dsh"],
                searches["rare word"]["dsh"],
            )
            lines.append((row, "dsh, rare word"))
            continue
        if label in LONG_LABELS:
            target, met = f"<= {SEARCH_GOAL:g}x llm", dsh <= SEARCH_GOAL * llm
        else:
            target, met = "reported (llm: whole tokens)", None
        lines.append(
            (
                _row(f"search {label}", size, dsh, "s", llm, target, met, note, s["dsh"], s["llm"]),
                "llm merged_log_rows",
            )
        )
    if figures.get("pg") is not None:
        for label, s in searches.items():
            pg, sqlite = median(s["pg"]), median(s["dsh"])
            note = f"{s['query']!r}: llm {_ms(median(s['llm']))} (PG {pg / median(s['llm']):,.2f}x llm); hits {s['pg_hits']}"
            lines.append(
                (
                    _row(
                        f"search {label}, PostgreSQL member",
                        size,
                        pg,
                        "s",
                        sqlite,
                        "reported beside SQLite",
                        None,
                        note,
                        s["pg"],
                        s["dsh"],
                    ),
                    "dsh on SQLite",
                )
            )
    return lines


def report(figures: dict[str, Any]) -> list[Line]:
    size = f"{figures['messages']:,} msgs"
    return (
        _import_lines(figures, size)
        + _size_lines(figures, size)
        + _command_lines(figures, size)
        + _search_lines(figures, size)
    )


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return _ms(value) if value < 10 else f"{value:,.2f} s"
    if unit == "MB":
        return f"{value:,.1f} MB"
    return f"{value:,.0f} {unit}"


def table(lines: list[Line]) -> str:
    """The workload's own table: what dsh measured, against what, the ratio, the goal."""
    header = ("measure", "dsh", "against", "ratio", "goal", "met?")
    cells = [
        (
            row.workload.removeprefix(f"{WORKLOAD}: "),
            _value(row.ours, row.unit),
            f"{against} {_value(row.baseline, row.unit)}",
            "-" if row.ratio is None else f"{row.ratio:,.2f}x",
            row.target,
            "-" if row.met is None else ("met" if row.met else "UNMET"),
        )
        for row, against in lines
    ]
    widths = [max(len(c) for c in col) for col in zip(header, *cells, strict=False)]

    def line(values: tuple[str, ...]) -> str:
        return " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(header), "-+-".join("-" * w for w in widths), *(line(c) for c in cells)]
    notes = [
        f"  {row.workload.removeprefix(WORKLOAD + ': ')}: {row.note}"
        for row, _ in lines
        if row.note
    ]
    size = lines[0][0].size if lines else ""
    return "\n".join([f"dsh vs llm 0.36, {size}", *out, "", "notes:", *notes])
