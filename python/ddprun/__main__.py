"""``python -m ddprun ...``: replaces this interpreter with the installed ddprun, same argv."""

import os
import sys

from ddprun import executable


def main() -> None:
    program = executable("ddprun")
    # exec, not a child process: signals, the exit status and the process tree are ddprun's
    # own, as when it is run by name. ddprun then picks the python3 beside itself, this
    # environment's.
    os.execv(program, [program, *sys.argv[1:]])


if __name__ == "__main__":
    main()
