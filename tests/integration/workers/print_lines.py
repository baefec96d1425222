"""Prints each argument as a line on stdout, prefixed by nothing (ddprun adds the prefix)."""
import sys

for line in sys.argv[1:]:
    print(line)
