#!/usr/bin/env python3
"""Print the closing line of `make test`: `N passed, N failed` over every suite.

Arguments: the cargo test log (its `test result:` lines), the client's pytest JUnit XML, then
any further JUnit files. The Python
suite runs twice (newest redis-py, and the oldest supported into `<name>-old.xml` beside the
given file); both files are summed. A missing file counts as one failure (the suite did not run
to the end)."""

import re
import sys
import xml.etree.ElementTree as ET


def cargo(path: str) -> tuple[int, int]:
    passed = failed = 0
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return 0, 1
    for m in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed", text):
        passed += int(m.group(1))
        failed += int(m.group(2))
    return passed, failed


def pytest(path: str) -> tuple[int, int]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0, 1
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return tests - bad - skipped, bad


def pytests(path: str) -> tuple[int, int]:
    """The JUnit file and its ``-old`` sibling (the run on the oldest supported redis-py)."""
    passed = failed = 0
    for one in (path, re.sub(r"(\.xml)?$", "-old.xml", path, count=1)):
        p, f = pytest(one)
        passed += p
        failed += f
    return passed, failed


if __name__ == "__main__":
    rust = cargo(sys.argv[1])
    py = pytests(sys.argv[2])
    # Further JUnit files (the safety harness's self-test), each counted on its own.
    extra = [pytest(p) for p in sys.argv[3:]]
    other = (sum(e[0] for e in extra), sum(e[1] for e in extra))
    line = f"rust: {rust[0]} passed, {rust[1]} failed; python client: {py[0]} passed, {py[1]} failed"
    if extra:
        line += f"; safety harness: {other[0]} passed, {other[1]} failed"
    print(line)
    print(f"{rust[0] + py[0] + other[0]} passed, {rust[1] + py[1] + other[1]} failed")
