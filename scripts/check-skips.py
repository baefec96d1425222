#!/usr/bin/python3
"""Fails CI on a skipped test that is not on the list of allowed skips.

  scripts/check-skips.py ALLOWED JUNIT...

ALLOWED: .ci/allowed-skips.txt, one test name (or fnmatch pattern) a line, each with its reason
after '#'. JUNIT: files written by `ctest --output-junit` (with the passed tests' output kept:
--test-output-size-passed, --test-output-truncation head). A skip is
  - a ctest test that did not run (status "notrun": GTEST_SKIP in a test of its own, a
    SKIP_RETURN_CODE), or
  - a GoogleTest test skipped inside a ctest test that passed (one ctest test per suite:
    ddprun_add_suite_test), from gtest's "[  SKIPPED ] <name>" lines, or
  - a Python unittest script's skips ("OK (skipped=N)"), named by the ctest test.
Exit status 1 on a skip not allowed, on a file with no test at all, and on an allowed line
without its reason. DDPRUN_ALLOW_SKIPS=1 (a developer's machine that lacks what CI has) lists
the skips and passes.
"""
import fnmatch
import os
import re
import sys
import xml.etree.ElementTree as ElementTree

GTEST_SKIPPED = re.compile(r"^\[  SKIPPED \] (\S+) \(\d+ ms\)$", re.MULTILINE)
UNITTEST_SKIPPED = re.compile(r"\(.*skipped=(\d+).*\)")


def read_allowed(path):
    allowed = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, _, reason = line.partition("#")
            if not name.strip() or not reason.strip():
                raise ValueError(f"{path}:{number}: '{line.strip()}': each line is "
                                 "'<test name>  # <why CI may skip it>'")
            allowed.append(name.strip())
    return allowed


def skips_in(junit):
    """(test name, where) of each skip in one ctest JUnit file, and the number of tests."""
    root = ElementTree.parse(junit).getroot()
    cases = root.iter("testcase")
    skips, count = [], 0
    for case in cases:
        count += 1
        name = case.get("name", "?")
        output = case.findtext("system-out") or ""
        if case.get("status") == "notrun" or case.find("skipped") is not None:
            skips.append((name, f"ctest test {name}"))
            continue
        for skipped in GTEST_SKIPPED.findall(output):
            skips.append((skipped, f"inside ctest test {name}"))
        for match in UNITTEST_SKIPPED.finditer(output):
            if int(match.group(1)) > 0:
                skips.append((name, f"{match.group(1)} unittest skip(s) in ctest test {name}"))
    return skips, count


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        allowed = read_allowed(argv[1])
    except (OSError, ValueError) as error:
        print(f"check-skips: {error}", file=sys.stderr)
        return 1
    status, unlisted = 0, 0
    for junit in argv[2:]:
        try:
            skips, count = skips_in(junit)
        except (OSError, ElementTree.ParseError) as error:
            print(f"check-skips: {junit}: {error}", file=sys.stderr)
            return 1
        if count == 0:
            print(f"check-skips: {junit}: no test ran", file=sys.stderr)
            status = 1
        for name, where in skips:
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed):
                print(f"check-skips: {name} skipped ({where}): allowed by {argv[1]}")
            else:
                print(f"check-skips: {name} skipped ({where}), not in {argv[1]}: "
                      "make it run in CI, or list it there with the reason", file=sys.stderr)
                unlisted += 1
        print(f"check-skips: {junit}: {count} test(s), {len(skips)} skip(s)")
    if unlisted and os.environ.get("DDPRUN_ALLOW_SKIPS") == "1":
        print(f"check-skips: DDPRUN_ALLOW_SKIPS=1: {unlisted} skip(s) not on the list let pass",
              file=sys.stderr)
    elif unlisted:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
