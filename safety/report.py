"""Turn target/safety/results.json into results.md, safety.svg and the README / docs summaries.

    python safety/report.py target/safety/results.json --out target/safety [--update-docs --root .]

results.md: a header line and one row per cell (strategy, fault, workload) with every count, the
fault's effects, the control's anomalies and the verdict's reason. safety.svg: the verdict grid
(report_chart.py). --update-docs also rewrites the text between the marker lines
`<!-- safety-results:begin -->` and `<!-- safety-results:end -->` in README.md (compact grid) and
docs/safety.md (full table and legend); it exits 2, touching neither, if a file lacks them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from matrix import FAULTS
from report_chart import DASH, NA, SHORT, Json, cell_order, grid, median, num, server_name, svg, values

BEGIN, END = "<!-- safety-results:begin -->", "<!-- safety-results:end -->"
NC = "n/c"
COLUMNS = [
    "strategy",
    "fault",
    "workload",
    "verdict",
    "runs",
    f"faults fired (min{DASH}max)",
    "what the fault did (sum over runs)",
    "lost updates",
    "mutex violations (within leases)",
    "expired overlaps",
    "stale reads / dup / reordered",
    "token order violations / duplicate tokens",
    "stale writes accepted / rejected",
    "grants/s (median)",
    "wait p99 ms (median)",
    f"control: anomalies (min{DASH}max)",
    "why",
]
LEGEND = f"""\
Verdicts. **safe**: in every run the fault fired (fault `none`: always) and the control (the
known-broken variant run beside the strategy in the same cell) showed anomalies, while the
strategy showed none: each `0` is a measured zero, and the row's "why" says what proves the cell
could have failed. **unsafe**: every run conclusive and at least one run with anomalies.
**inconclusive**: at least one run where the fault never fired or the control stayed clean; its
counts are prefixed `{NC}` (not conclusive) and prove nothing, the "why" says which runs and why.

Anomalies count what breaks the strategy's own promise. An unfenced lock (`module`,
`module-sync-replicas`, `lua`, `redis-py`, `redlock-3`) promises mutual exclusion within the
lease: mutex violations + token order violations + duplicate tokens + duplicated + reordered +
stale reads; its lost updates and stale writes accepted are shown beside, the cost of a holder
that outlived its lease. `module-fence` promises an intact resource: lost updates + stale writes
accepted + the token and register counts (its mutex violations are shown, not counted: fencing
makes a second holder harmless). A control counts everything. Counts are `median (min{DASH}max)` over the
runs when the runs differ, one number when they all agree. Mutex violations are overlaps of two
holders while both leases surely held. **Expired overlaps** (a holder kept working after its
lease ran out while another held the lock) are expected for every unfenced lock under pauses and
delays and are not violations by themselves: what they cost shows in lost updates and stale reads,
and a fenced resource turns them into stale writes rejected. A strategy and fault pair with no row
was not run (not applicable)."""


def counts(xs: list[float]) -> str:
    """`median (min-max)` when the runs differ, one number when they agree, `?` when absent."""
    if not xs:
        return "?"
    lo, hi, mid = min(xs), max(xs), median(xs)
    return num(lo) if lo == hi else f"{num(mid or 0)} ({num(lo)}{DASH}{num(hi)})"


def span(xs: list[float]) -> str:
    if not xs:
        return "?"
    lo, hi = min(xs), max(xs)
    return num(lo) if lo == hi else f"{num(lo)}{DASH}{num(hi)}"


def effects(cell: Json) -> str:
    """What the fault did, summed over runs: "name N, name N" (in order of first appearance)."""
    total: dict[str, float] = {}
    for run in cell.get("runs") or []:
        for name, n in (run.get("effects") or {}).items():
            if isinstance(n, (int, float)):
                total[name] = total.get(name, 0) + n
    return ", ".join(f"{name} {num(n)}" for name, n in total.items()) or "nothing recorded"


def duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    return (f"{h} h " if h else "") + f"{rest // 60} min {rest % 60} s"


def md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row(cell: Json) -> list[str]:
    """One table row; inconclusive cells have their counts prefixed n/c."""
    verdict = str(cell.get("verdict", "inconclusive"))
    mark = f"{NC} " if verdict not in ("safe", "unsafe") else ""

    def c(*keys: str) -> str:
        return mark + " / ".join(counts(values(cell, k)) for k in keys)

    control = cell.get("control")
    ctl = f"{control}: {span(values(cell, 'anomalies', 'control'))}" if control else "none"
    grants, wait = median(values(cell, "grants_per_s")), median(values(cell, "wait_p99_ms"))
    return [
        f"`{cell.get('strategy', '?')}`",
        str(cell.get("fault", "?")),
        str(cell.get("workload", "?")),
        f"**{verdict}**" if verdict == "unsafe" else verdict,
        str(len(cell.get("runs") or [])),
        span(values(cell, "faults_fired", "")),
        effects(cell),
        c("lost_updates"),
        c("mutex_violations"),
        mark + counts(values(cell, "expired_overlaps")),
        c("stale_reads", "duplicated", "reordered"),
        c("token_order_violations", "duplicate_tokens"),
        c("stale_writes_accepted", "stale_writes_rejected"),
        "?" if grants is None else f"{grants:.1f}",
        "?" if wait is None else f"{wait:.0f}",
        ctl,
        str(cell.get("reason") or "no reason recorded"),
    ]


def header(data: Json) -> str:
    return (
        f"Run of {data.get('date', '?')}: {server_name(data)}, {data.get('machine', '?')}, seed "
        f"{data.get('seed', '?')}, {data.get('runs_per_cell', '?')} runs per cell, {data.get('seconds', '?')} s "
        f"per run, {duration(float(data.get('elapsed_s') or 0))} in total."
    )


def table(data: Json) -> str:
    """The full table (one row per cell) and its legend."""
    align = "|" + "---|" * 4 + "---:|" * 2 + "---|" + "---:|" * 8 + "---|---|"
    lines = ["| " + " | ".join(COLUMNS) + " |", align]
    for cell in sorted(data.get("cells") or [], key=cell_order):
        lines.append("| " + " | ".join(md_escape(x) for x in row(cell)) + " |")
    return "\n".join(lines) + "\n\n" + LEGEND + "\n"


def results_md(data: Json) -> str:
    return "# Safety results\n\n" + header(data) + "\n\n" + table(data)


def readme_summary(data: Json) -> str:
    """The README's table: one row per fault, one column per strategy; each number with how often
    the fault fired and what the control beside it showed."""
    rows, cols, squares = grid(data)
    cells = {(str(c.get("strategy")), str(c.get("fault"))): c for c in data.get("cells") or []}
    date = str(data.get("date", "?"))[:10]
    lines = [
        f"Measured {date} on {server_name(data)} ({data.get('machine', '?')}), "
        f"{data.get('runs_per_cell', '?')} runs of {data.get('seconds', '?')} s per cell. A cell reads "
        "`anomalies (lost updates) · fired · control`: 0 when the strategy kept its promise in every "
        "run (safe), else the most anomalies against its promise in one run, in bold (unsafe); in "
        "brackets the median lost updates where there were some; how many times the fault fired "
        "over the runs; the anomalies of the known-broken control that ran beside it.",
        "",
        "| fault | " + " | ".join(f"`{s}`" for s in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    for f in cols:
        texts = []
        for s in rows:
            cell = cells.get((s, f))
            if cell is None:
                texts.append(NA)
                continue
            runs = cell.get("runs") or []
            fired = sum(int(r.get("faults_fired", 0)) for r in runs)
            control = sum(int((r.get("control") or {}).get("anomalies", 0)) for r in runs)
            fired_text = DASH if f == "none" else f"{fired}\N{MULTIPLICATION SIGN}"
            texts.append(f"{squares[(s, f)].marked('**')} · {fired_text} · {control}")
        lines.append(f"| {SHORT.get(f, f)} | " + " | ".join(texts) + " |")
    lines += [
        "",
        f"{NC}: inconclusive (the fault did not fire or its control stayed clean). Effects of every "
        "fault, every count and the reason of every verdict: [docs/safety.md](docs/safety.md)",
    ]
    return "\n".join(lines) + "\n"


def replace_between(text: str, block: str) -> str | None:
    """`text` with the lines between the marker lines replaced by `block`; None unless both occur once, in order."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        return None
    b, e = begins[0], ends[0]
    return "".join(lines[: b + 1]) + "\n" + block.rstrip("\n") + "\n\n" + "".join(lines[e:])


def update_docs(root: Path, data: Json) -> int:
    """Rewrite the marked sections of README.md and docs/safety.md; 2 (nothing written) if markers are missing."""
    targets = {
        root / "README.md": readme_summary(data),
        root / "docs" / "safety.md": header(data) + "\n\n" + table(data),
    }
    updated: dict[Path, str] = {}
    for path, block in targets.items():
        if not path.is_file():
            print(f"report: {path} not found", file=sys.stderr)
            return 2
        new = replace_between(path.read_text(encoding="utf-8"), block)
        if new is None:
            print(
                f"report: {path} needs exactly one line {BEGIN} followed by one line {END}; not updated",
                file=sys.stderr,
            )
            return 2
        updated[path] = new
    for path, new in updated.items():
        path.write_text(new, encoding="utf-8")
        print(f"report: updated {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("results", type=Path, help="results.json written by safety/run.py")
    ap.add_argument("--out", type=Path, default=Path("target/safety"), help="where results.md and safety.svg go")
    ap.add_argument("--update-docs", action="store_true", help="rewrite the marked sections of the docs")
    ap.add_argument("--root", type=Path, default=Path("."), help="repository root (README.md, docs/safety.md)")
    args = ap.parse_args(argv)
    data: Json = json.loads(args.results.read_text(encoding="utf-8"))
    unknown = sorted({str(c.get("fault")) for c in data.get("cells") or []} - set(FAULTS))
    if unknown:
        print(f"report: faults not in matrix.FAULTS, shown last: {', '.join(unknown)}", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(results_md(data), encoding="utf-8")
    (args.out / "safety.svg").write_text(svg(data), encoding="utf-8")
    print(f"report: wrote {args.out / 'results.md'} and {args.out / 'safety.svg'}")
    return update_docs(args.root, data) if args.update_docs else 0


if __name__ == "__main__":
    sys.exit(main())
