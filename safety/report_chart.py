"""The data side of the safety report, shared by report.py, and the chart (hand-written SVG, no dependency).

results.json's schema is in docs/safety.md ("results.json"). A grid square is one cell, i.e. one
(strategy, fault) pair (each strategy runs one workload); an unsafe square shows the most
anomalies in one run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from html import escape
from typing import Any

from matrix import FAULTS, STRATEGIES

Json = dict[str, Any]

# Column headers for the compact README table.
SHORT = {
    "none": "none",
    "client-pause": "pause",
    "net-delay": "delay",
    "net-drop": "drop",
    "failover-lost-writes": "failover",
    "restart-no-persistence": "restart empty",
    "restart-aof": "restart AOF",
    "redlock-split": "redlock split",
    "clock-jump": "clock jump",
    "clock-skew": "clock skew",
    "clock-behind-failover": "failover, clock behind",
    "nemesis": "nemesis",
}
VERDICTS = ("safe", "unsafe", "inconclusive")
DASH = "\N{EN DASH}"
NA = DASH  # not applicable: the strategy does not run this fault
COLOURS = {"safe": "#2e9d4f", "unsafe": "#d62d2d", "inconclusive": "url(#hatch)", None: "#ffffff"}


def values(cell: Json, key: str, side: str = "main") -> list[float]:
    """One number per run that has it: run[side][key], or run[key] when side is ""."""
    out: list[float] = []
    for run in cell.get("runs") or []:
        src = run.get(side) if side else run
        if isinstance(src, dict) and isinstance(src.get(key), (int, float)):
            out.append(src[key])
    return out


def num(x: float) -> str:
    """An integral value without decimals, anything else with one."""
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def ordered(present: set[str], known: list[str]) -> list[str]:
    """Every known name in its fixed order (absent ones are "not applicable"), then any other name found."""
    return known + sorted(present - set(known))


def cell_order(cell: Json) -> tuple[int, int, str]:
    s, f = cell.get("strategy", ""), cell.get("fault", "")
    return (
        STRATEGIES.index(s) if s in STRATEGIES else len(STRATEGIES),
        FAULTS.index(f) if f in FAULTS else len(FAULTS),
        f"{s} {f} {cell.get('workload', '')}",
    )


@dataclass
class Square:
    """One grid square: verdict None = not applicable (no cell ran)."""

    verdict: str | None = None
    anomalies: float | None = None  # the most main anomalies in one run (an unsafe cell)
    reason: str = ""
    lost: float | None = None  # median lost updates (shown beside: an unfenced lock's cost)

    @property
    def text(self) -> str:
        return self.marked("")

    def marked(self, strong: str) -> str:
        """The square's text; an unsafe count wrapped in ``strong`` (``**`` in Markdown)."""
        beside = f" ({num(self.lost)})" if self.lost else ""
        if self.verdict == "safe":
            return "0" + beside
        if self.verdict == "unsafe":
            return (f"{strong}{num(self.anomalies)}{strong}" if self.anomalies is not None else "?") + beside
        if self.verdict == "inconclusive":
            return "n/c"
        return NA


def grid(data: Json) -> tuple[list[str], list[str], dict[tuple[str, str], Square]]:
    """Rows (strategies), columns (faults) and the square of every pair that ran."""
    cells: list[Json] = data.get("cells") or []
    squares: dict[tuple[str, str], Square] = {}
    for cell in cells:
        verdict = cell.get("verdict")
        verdict = verdict if verdict in ("safe", "unsafe") else "inconclusive"
        anomalies = max(values(cell, "anomalies"), default=None) if verdict == "unsafe" else None
        lost = median(values(cell, "lost_updates")) if verdict != "inconclusive" else None
        label = f"{cell.get('workload', '?')}: {verdict}: {cell.get('reason', '')}"
        squares[(str(cell.get("strategy")), str(cell.get("fault")))] = Square(verdict, anomalies, label, lost)
    rows = ordered({s for s, _ in squares}, STRATEGIES)
    cols = ordered({f for _, f in squares}, FAULTS)
    return rows, cols, squares


def server_name(data: Json) -> str:
    server = str(data.get("server", "?"))
    return f"Redis {server}" if server[:1].isdigit() else server


CELL, GAP, LEFT, TOP = 58, 4, 200, 180


def svg(data: Json) -> str:
    """The verdict grid as an SVG document: one row per strategy, one column per fault."""
    rows, cols, squares = grid(data)
    pitch = CELL + GAP
    width = LEFT + len(cols) * pitch + 30
    grid_bottom = TOP + len(rows) * pitch
    height = grid_bottom + 100
    date = str(data.get("date", "?"))
    sub = (
        f"{date}, {server_name(data)}, {data.get('machine', '?')}: {data.get('runs_per_cell', '?')} runs "
        f"of {data.get('seconds', '?')} s per cell, seed {data.get('seed', '?')}"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        "<defs>",
        '<pattern id="hatch" patternUnits="userSpaceOnUse" width="8" height="8" patternTransform="rotate(45)">',
        '<rect width="8" height="8" fill="#c8c8c8"/>',
        '<line x1="0" y1="0" x2="0" y2="8" stroke="#8a8a8a" stroke-width="3"/>',
        "</pattern>",
        "</defs>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="20" y="28" font-size="18" font-weight="bold">{escape("Lock safety under faults: verdict per cell")}'
        "</text>",
        f'<text x="20" y="50" fill="#444">{escape(sub)}</text>',
    ]
    for j, fault in enumerate(cols):
        x = LEFT + j * pitch + CELL / 2
        out.append(f'<text x="{x:.0f}" y="{TOP - 8}" transform="rotate(-45 {x:.0f} {TOP - 8})">{escape(fault)}</text>')
    for i, strategy in enumerate(rows):
        y = TOP + i * pitch
        out.append(f'<text x="{LEFT - 10}" y="{y + CELL / 2 + 5:.0f}" text-anchor="end">{escape(strategy)}</text>')
        for j, fault in enumerate(cols):
            sq = squares.get((strategy, fault), Square())
            out.append(square(LEFT + j * pitch, y, sq, f"{strategy}, {fault}: {sq.reason or 'not applicable'}"))
    out += legend(20, grid_bottom + 30)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def square(x: int, y: int, sq: Square, tip: str) -> str:
    """One grid square with its text and a tooltip."""
    fill = COLOURS.get(sq.verdict, COLOURS[None])
    stroke = "#bbbbbb" if sq.verdict is None else "#ffffff"
    ink = {"safe": "#ffffff", "unsafe": "#ffffff"}.get(sq.verdict or "", "#333333")
    bold = ' font-weight="bold"' if sq.verdict in ("unsafe", "inconclusive") else ""
    backdrop = (  # keeps "n/c" readable over the hatch
        f'<rect x="{x + CELL / 2 - 17:.0f}" y="{y + CELL / 2 - 10:.0f}" width="34" height="20" rx="3" fill="#ffffff"/>'
        if sq.verdict == "inconclusive"
        else ""
    )
    return (
        f'<g class="{sq.verdict or "na"}"><title>{escape(tip)}</title>'
        f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{fill}" stroke="{stroke}"/>{backdrop}'
        f'<text x="{x + CELL / 2:.0f}" y="{y + CELL / 2 + 5:.0f}" text-anchor="middle" fill="{ink}"{bold}>'
        f"{escape(sq.text)}</text></g>"
    )


def legend(x: int, y: int) -> list[str]:
    items = [
        ("safe", "safe: the fault fired, the control broke, no anomaly"),
        ("unsafe", "unsafe: the most anomalies in one run written inside"),
        ("inconclusive", "inconclusive (n/c): the fault never fired or the control stayed clean"),
        (None, "not applicable: not run for this strategy"),
    ]
    out = []
    for k, (verdict, label) in enumerate(items):
        left, top = x + (k % 2) * 490, y + (k // 2) * 30
        stroke = "#bbbbbb" if verdict is None else "none"
        out.append(f'<rect x="{left}" y="{top}" width="20" height="20" fill="{COLOURS[verdict]}" stroke="{stroke}"/>')
        out.append(f'<text x="{left + 28}" y="{top + 15}">{escape(label)}</text>')
    return out
