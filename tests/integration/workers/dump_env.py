"""Writes this worker's whole environment as JSON to env_<restart>_<local_rank>.json.

--fail-first-attempt: on restart 0, once every rank has written, the last rank exits 1, so that
a second attempt runs (needs done_<rank>.fifo for all but the last rank).
--by-rank: names the file env_<restart>_r<RANK>.json (LOCAL_RANK is 0 for every worker under
--virtual-local-rank).
--bind-master-port: rank 0 also checks that MASTER_PORT can host a server on 127.0.0.1, the
way torch's TCPStore binds it (SO_REUSEADDR, then listen), and records "ok" or the error.
--connect-master-port: rank 0 also connects to MASTER_ADDR:MASTER_PORT once, without retrying
(the agent's store must already listen when a worker starts), and records "ok" or the error.
"""
import json
import os
import socket
import sys

from worker_util import last_rank_fails_after_the_others, local_rank, restart_count, write_marker

env = dict(os.environ)
if "--bind-master-port" in sys.argv and local_rank() == 0:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", int(os.environ["MASTER_PORT"])))
            s.listen(1)
        env["__bind_master_port"] = "ok"
    except OSError as e:
        env["__bind_master_port"] = str(e)
if "--connect-master-port" in sys.argv and local_rank() == 0:
    try:
        socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])),
                                 timeout=5).close()
        env["__connect_master_port"] = "ok"
    except OSError as e:
        env["__connect_master_port"] = str(e)
env["__pid"] = str(os.getpid())
name = f"r{os.environ['RANK']}" if "--by-rank" in sys.argv else str(local_rank())
write_marker(f"env_{restart_count()}_{name}.json", json.dumps(env))
if "--fail-first-attempt" in sys.argv and restart_count() == 0:
    last_rank_fails_after_the_others(1)
