"""report.py on a small synthetic results.json: one safe, one unsafe, one inconclusive cell, the rest missing."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from checker import Check, as_row
from report import BEGIN, END, main, readme_summary, results_md
from report_chart import DASH, svg

SVG = "{http://www.w3.org/2000/svg}"


def metrics(**over: float) -> dict[str, float]:
    keys = list(as_row(Check(), 1.0))  # the checker's schema (test_checker.py pins its order)
    m: dict[str, float] = dict.fromkeys(keys, 0)
    m.update(grants=80, ops=80, acknowledged=80, grants_per_s=13.3, wait_p99_ms=580.0)
    m.update(over)
    return m


def run(fired: int, main_: dict[str, float], control: dict[str, float], **effects: int) -> dict[str, Any]:
    ok = fired > 0 and control["anomalies"] > 0
    why = None if ok else ("fault never fired" if fired == 0 else "control stayed clean")
    return {"seed": 1001, "seconds": 6, "faults_fired": fired, "effects": effects, "main": main_,
            "control": control, "conclusive": ok, "why_inconclusive": why}  # fmt: skip


RESULTS: dict[str, Any] = {
    "server": "7.0.15", "date": "2026-11-27T13:00:00Z", "machine": "2 cores, 24 GiB", "seed": 1,
    "runs_per_cell": 2, "seconds": 6, "elapsed_s": 1500,
    "cells": [
        {"strategy": "module-fence", "fault": "client-pause", "workload": "guarded", "control": "fence-unchecked",
         "verdict": "safe", "reason": "fault fired 20 times; control fence-unchecked lost 41 updates",
         "runs": [run(11, metrics(expired_overlaps=9, stale_writes_rejected=9), metrics(lost_updates=20, anomalies=20),
                      paused_past_lease=9),
                  run(9, metrics(expired_overlaps=7, stale_writes_rejected=7), metrics(lost_updates=21, anomalies=21),
                      paused_past_lease=7)]},
        {"strategy": "module", "fault": "client-pause", "workload": "lock-set", "control": "no-lock",
         "verdict": "unsafe", "reason": "lost 30 updates",
         "runs": [run(10, metrics(lost_updates=12, anomalies=14, stale_reads=2), metrics(anomalies=50)),
                  run(10, metrics(lost_updates=16, anomalies=16), metrics(anomalies=60))]},
        {"strategy": "lua", "fault": "net-drop", "workload": "lock-set", "control": "no-lock",
         "verdict": "inconclusive", "reason": "run 2: fault never fired",
         "runs": [run(3, metrics(), metrics(anomalies=4), dropped=3), run(0, metrics(), metrics(anomalies=5))]},
    ],
}  # fmt: skip


def test_markdown_has_every_verdict_and_says_why() -> None:
    md = results_md(RESULTS)
    assert "2026-11-27T13:00:00Z" in md and "Redis 7.0.15" in md and "25 min 0 s" in md
    rows = {line.split(" | ")[0].strip("| `"): line for line in md.splitlines() if line.startswith("| `")}
    assert set(rows) == {"module", "module-fence", "lua"}
    assert " | safe | " in rows["module-fence"] and "control fence-unchecked lost 41 updates" in rows["module-fence"]
    assert " | **unsafe** | " in rows["module"] and f"14 (12{DASH}16)" in rows["module"]
    assert " | inconclusive | " in rows["lua"] and "n/c 0" in rows["lua"] and "run 2: fault never fired" in rows["lua"]
    assert "paused_past_lease 16" in rows["module-fence"] and f"fence-unchecked: 20{DASH}21" in rows["module-fence"]
    assert "| 0 | " in rows["module-fence"] and "n/c" not in rows["module-fence"]
    assert "Expired overlaps" in md and "not violations" in md


def test_svg_is_xml_with_hatched_inconclusive_square() -> None:
    root = ET.fromstring(svg(RESULTS))
    assert root.find(f".//{SVG}pattern[@id='hatch']") is not None
    groups = {g.get("class"): g for g in root.iter(f"{SVG}g")}
    nc = groups["inconclusive"]
    assert nc.find(f"{SVG}rect").get("fill") == "url(#hatch)"  # type: ignore[union-attr]
    assert nc.find(f"{SVG}text").text == "n/c"  # type: ignore[union-attr]
    assert groups["unsafe"].find(f"{SVG}text").text == "16 (14)"  # type: ignore[union-attr]
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert DASH in texts and "redlock-3" in texts and "nemesis" in texts
    assert sum(1 for g in root.iter(f"{SVG}g")) == 6 * 12


def test_readme_table() -> None:
    summary = readme_summary(RESULTS)
    lines = summary.splitlines()
    assert lines[0].startswith("Measured 2026-11-27 on Redis 7.0.15 (2 cores, 24 GiB), 2 runs of 6 s")
    assert lines[-1].startswith("n/c: inconclusive (the fault did not fire or its control stayed clean).")
    header = next(line for line in lines if line.startswith("| fault |"))
    assert header.count("`") == 12 and header.index("`module`") < header.index("`redlock-3`")
    rows = {
        line.split(" | ")[0].strip("| "): line.strip("|").split(" | ")[1:] for line in lines if line.startswith("| ")
    }
    assert rows["pause"][0] == "**16** (14) · 20\N{MULTIPLICATION SIGN} · 110", rows["pause"]
    assert rows["pause"][1].startswith("0 · ") and rows["drop"][3].startswith("n/c · ")
    assert [x.strip() for x in rows["none"]] == [DASH] * 6 and rows["pause"][2] == DASH
    assert "n/c" in summary and DASH in summary


def test_update_docs_replaces_only_between_markers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS), encoding="utf-8")
    (tmp_path / "docs").mkdir()
    readme, docs = tmp_path / "README.md", tmp_path / "docs" / "safety.md"
    readme.write_text(f"# Title\nbefore\n{BEGIN}\nold table\n{END}\nafter\n", encoding="utf-8")
    docs.write_text(f"intro\n{BEGIN}\nOLD-DOCS-ROWS\n{END}\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main([str(results), "--out", str(out), "--update-docs", "--root", str(tmp_path)]) == 0
    assert (out / "results.md").is_file() and (out / "safety.svg").is_file()
    text = readme.read_text(encoding="utf-8")
    assert text.startswith(f"# Title\nbefore\n{BEGIN}\n") and text.endswith(f"\n{END}\nafter\n")
    assert "old table" not in text and "| pause |" in text and "n/c" in text
    text = docs.read_text(encoding="utf-8")
    assert text.startswith(f"intro\n{BEGIN}\n") and text.endswith(f"{END}\n") and "OLD-DOCS-ROWS" not in text
    assert "| strategy | fault | workload | verdict |" in text and "Expired overlaps" in text
    again = readme.read_text(encoding="utf-8")
    assert main([str(results), "--out", str(out), "--update-docs", "--root", str(tmp_path)]) == 0
    assert readme.read_text(encoding="utf-8") == again  # idempotent

    readme.write_text("# no markers\n", encoding="utf-8")
    before = docs.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main([str(results), "--out", str(out), "--update-docs", "--root", str(tmp_path)]) == 2
    assert "README.md" in capsys.readouterr().err
    assert readme.read_text(encoding="utf-8") == "# no markers\n" and docs.read_text(encoding="utf-8") == before
