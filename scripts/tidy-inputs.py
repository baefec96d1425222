#!/usr/bin/python3
"""The translation units clang-tidy reads to check the given source files (scripts/lint.sh).

  scripts/tidy-inputs.py BUILD_DIR FILE...     prints one translation unit a line

BUILD_DIR's compile_commands.json names each file compiled on its own, and in a unity build
(DDPRUN_UNITY_BUILD=ON) the batches (Unity/unity_<n>_cxx.cxx) that #include the others. A file
compiled on its own is its own unit; a file in a batch is checked through its batch, which
parses the heavy headers (Asio, Beast) once for up to 8 files: the same checks over the same
code for about a sixth of the time. Exit status 1, naming them, when a FILE is in no unit: a
file the lint does not read must not pass for a clean one.
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^#include "([^"]+)"$', re.MULTILINE)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    database = os.path.join(argv[1], "compile_commands.json")
    try:
        with open(database, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as error:
        print(f"tidy-inputs: {database}: {error}", file=sys.stderr)
        return 1
    wanted = {os.path.realpath(path): path for path in argv[2:]}
    units, found = [], set()
    for entry in entries:
        unit = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        if unit in wanted:
            members = [unit]
        elif re.search(r"/Unity/unity_\d+_cxx\.cxx$", unit):
            with open(unit, encoding="utf-8") as f:
                members = [os.path.realpath(m) for m in INCLUDE.findall(f.read())]
        else:
            continue
        checked = [m for m in members if m in wanted]
        if checked and unit not in units:
            units.append(unit)
            found.update(checked)
    missing = sorted(wanted[m] for m in set(wanted) - found)
    if missing:
        print(f"tidy-inputs: in no translation unit of {database}: {' '.join(missing)} "
              "(reconfigure it)", file=sys.stderr)
        return 1
    print("\n".join(units))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
