#!/usr/bin/python3
"""The in-process test programs: what CI's sanitizer pass builds and runs (scripts/run-tests.sh).

Derived from the test labels of a built and discovered build (ctest --show-only=json-v1), so
that a new test program is in the sanitizer pass as soon as its tests carry an in-process
label, with no list to keep by hand:

  scripts/in-process-tests.py BUILD_DIR            prints one CMake target per line
  scripts/in-process-tests.py --labels             prints the ctest label options (-L, -LE)

A test is in-process when one of its labels matches LABELS and none matches EXCLUDED. Its
program counts when it was built in BUILD_DIR (not python3, promtool). A program that links
LibTorch is left out, saying so on stderr: the sanitizer pass builds without LibTorch, whose
prebuilt libraries are not instrumented. Exit status 1, with the reason, when the build has no
such tests (not built, not discovered): an empty list must not pass for a short one.
"""
import json
import os
import subprocess
import sys

# ctest -L/-LE regular expressions. unit: pure units; rendezvous, store, metrics: in-process
# servers on port 0 (and the real daemon, itself built with the sanitizers). integration and
# integration-torch: real processes running torch, left to the first (GCC) pass.
LABELS = "unit|rendezvous|store|metrics"
EXCLUDED = "integration"


def links_libtorch(program):
    needed = subprocess.run(["readelf", "-d", program], capture_output=True, text=True,
                            check=True).stdout
    return "libtorch" in needed


def main(argv):
    if argv[1:] == ["--labels"]:
        print(f"-L\n{LABELS}\n-LE\n{EXCLUDED}")
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.realpath(argv[1])
    listing = subprocess.run(
        ["ctest", "--test-dir", build, "-N", "-L", LABELS, "-LE", EXCLUDED,
         "--show-only=json-v1"], capture_output=True, text=True)
    if listing.returncode != 0:
        print(f"in-process-tests: ctest --test-dir {build} failed: {listing.stderr.strip()}",
              file=sys.stderr)
        return 1
    programs = set()
    for test in json.loads(listing.stdout).get("tests", []):
        command = test.get("command") or []
        if command and os.path.realpath(command[0]).startswith(build + os.sep):
            programs.add(os.path.realpath(command[0]))
    if not programs:
        print(f"in-process-tests: no test program in {build} has a test labelled {LABELS} "
              f"(build and discover its tests first: cmake --build {build})", file=sys.stderr)
        return 1
    for program in sorted(programs, key=os.path.basename):
        name = os.path.basename(program)
        if links_libtorch(program):
            print(f"in-process-tests: {name} left out: it links LibTorch", file=sys.stderr)
        else:
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
