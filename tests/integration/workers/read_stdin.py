"""Reads a line from stdin, as a stray input() would; writes what it got to stdin_<local_rank>:
"eof" when stdin is at end of file (ddprun gives workers /dev/null), else the line."""
from worker_util import local_rank, write_marker

try:
    line = input()
    write_marker(f"stdin_{local_rank()}", line)
except EOFError:
    write_marker(f"stdin_{local_rank()}", "eof")
