"""Print "<passed> <failed>" from a pytest JUnit XML report (for make test's closing line)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def counts(path: str) -> tuple[int, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return total - failed - skipped, failed


if __name__ == "__main__":
    passed, failed = counts(sys.argv[1])
    print(passed, failed)
