"""Writes the CPUs this worker may run on (os.sched_getaffinity) to affinity_<local_rank>."""
import os

from worker_util import local_rank, write_marker

write_marker(f"affinity_{local_rank()}", ",".join(str(c) for c in sorted(os.sched_getaffinity(0))))
