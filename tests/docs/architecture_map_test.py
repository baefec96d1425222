#!/usr/bin/env python3
"""docs/architecture.md is the project's map: every file and folder it names must exist, and
every product folder (what builds into the programs and libraries) must be named in it.

Run by ctest (tests/docs/CMakeLists.txt) as: architecture_map_test.py <source dir>.
A name is what the map writes in backticks with a '/' or a file extension: `agent/process/`,
`rendezvous/wire/codec.*`, `codec.*` (found anywhere in the tree: the map often names a file
inside the room its row describes). Templates (`<log_dir>/...`), absolute paths, variables and
command lines are not names of the tree.
"""
import fnmatch
import os
import re
import subprocess
import sys

PRODUCT_ROOTS = ["common", "progress", "store", "metrics", "rendezvous", "agent", "launcher",
                 "worker_sdk", "python", "examples"]
FILE_NAME = re.compile(r"^[A-Za-z0-9_.*-]+\.(?:[a-z]+|\*)$")


def tracked_paths(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                         check=True).stdout.split()
    files = [p for p in out if os.path.exists(os.path.join(root, p))]
    folders = {os.path.dirname(p) for p in files}
    for f in list(folders):
        while f:
            folders.add(f)
            f = os.path.dirname(f)
    return files, folders


def names_in(text):
    for token in re.findall(r"`([^`\n]+)`", text):
        token = token.strip()
        if any(c in token for c in "<>$ =:(){}\"'|,") or token.startswith(("/", "-", "~")) \
                or token.endswith(".so"):  # a built library, not a file of the tree
            continue
        if "/" in token or FILE_NAME.match(token):
            yield token


def exists(name, files, folders):
    name = name.rstrip("/")
    pattern = name if "*" in name else None
    for path in files:
        if pattern:
            if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, "*/" + pattern):
                return True
        elif path == name or path.endswith("/" + name):
            return True
    return any(f == name or f.endswith("/" + name) for f in folders)


def product_folders(root, folders):
    skip = re.compile(r"(^|/)(__pycache__|corpus|build[^/]*)(/|$)")
    return sorted(f for f in folders
                  if f.split("/")[0] in PRODUCT_ROOTS and not skip.search(f)
                  and any(n.endswith((".cc", ".h", ".py", ".md", ".txt"))
                          for n in os.listdir(os.path.join(root, f))))


def main():
    root = sys.argv[1]
    text = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    files, folders = tracked_paths(root)
    names = sorted(set(names_in(text)))
    missing = [n for n in names if not exists(n, files, folders)]
    named = {n.rstrip("/") for n in names}
    unnamed = [f for f in product_folders(root, folders)
               if not any(f == n or f.endswith("/" + n) or n.startswith(f + "/") for n in named)]
    for n in missing:
        print(f"docs/architecture.md names `{n}`, which is not in the tree")
    for f in unnamed:
        print(f"docs/architecture.md does not name the folder `{f}/`")
    if missing or unnamed:
        return 1
    print(f"docs/architecture.md: {len(names)} names, all in the tree; "
          f"{len(product_folders(root, folders))} product folders, all named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
