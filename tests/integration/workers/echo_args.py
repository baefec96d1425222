"""Writes its arguments (sys.argv[1:]) as a JSON list to args_<local_rank>.json."""
import json
import sys

from worker_util import local_rank, write_marker

write_marker(f"args_{local_rank()}.json", json.dumps(sys.argv[1:]))
