"""What a worker can observe about how it was started (issue 24, --preload).

usage: preload_probe.py TAG   (or python -m preload_probe TAG)
Writes $DDPRUN_TEST_OUT/probe_<TAG>_<RANK>.json with everything that would tell a worker forked
from ddprun's preload template from one started as `python -u script`: the test compares a
fresh run with a preloaded one, property by property. Reads its process state first, before
importing anything that could change it.
"""
import ctypes
import json
import os
import resource
import signal
import stat
import sys
import threading

probe = {}
# How it was started, which a worker CAN tell (docs/preload.md, "What remains different"): the
# modules --preload named are imported before the script runs, and a fork keeps the template's
# command line (`python3 -u /tmp/ddprun-preload-XXXX/template.py`), where an exec'd worker has
# its own. The test asserts both, so that a --preload silently starting fresh processes fails.
probe["torch_imported_before_the_script"] = "torch" in sys.modules
with open("/proc/self/cmdline", "rb") as f:
    probe["cmdline_is_the_templates"] = any(
        arg.endswith(b"/template.py") and b"ddprun-preload-" in arg for arg in f.read().split(b"\0"))
probe["task_threads"] = len(os.listdir("/proc/self/task"))
probe["python_threads"] = threading.active_count()
probe["argv"] = sys.argv
probe["path0"] = sys.path[0]
main = sys.modules["__main__"]
probe["main_name"] = __name__
probe["main_file"] = getattr(main, "__file__", None)
probe["main_spec"] = main.__spec__.name if main.__spec__ is not None else None
probe["main_cached"] = getattr(main, "__cached__", "absent")
probe["main_package"] = getattr(main, "__package__", "absent")
probe["unbuffered"] = [sys.stdout.write_through, sys.stderr.write_through,
                       sys.stdout.line_buffering, sys.stderr.line_buffering]
probe["flags"] = repr(sys.flags)
probe["cwd"] = os.getcwd()
umask = os.umask(0)
os.umask(umask)
probe["umask"] = umask
probe["rlimits"] = {name: resource.getrlimit(getattr(resource, name))
                    for name in dir(resource) if name.startswith("RLIMIT_")}


def disposition(signo):
    handler = signal.getsignal(signo)
    if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
        return str(handler)
    return getattr(handler, "__name__", repr(handler))


probe["signals"] = {signal.Signals(s).name: disposition(s) for s in signal.valid_signals()
                    if s not in (signal.SIGKILL, signal.SIGSTOP) and s in signal.Signals._value2member_map_}
probe["signal_mask"] = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
st = os.fstat(0)
probe["stdin"] = [stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)]


def open_fds():
    """Descriptors open in this process, without the one listing them."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if not (target.startswith("/proc/") and target.endswith("/fd")):
            fds.append(int(fd))
    return sorted(fds)


probe["fds"] = open_fds()
probe["pgid_is_pid"] = os.getpgid(0) == os.getpid()
probe["same_session_as_parent"] = os.getsid(0) == os.getsid(os.getppid())
with open(f"/proc/{os.getppid()}/comm") as f:
    probe["parent"] = f.read().strip()
libc = ctypes.CDLL(None)
pdeathsig = ctypes.c_int(0)
libc.prctl(2, ctypes.byref(pdeathsig), 0, 0, 0)  # PR_GET_PDEATHSIG
probe["pdeathsig"] = pdeathsig.value
libc.getenv.restype = ctypes.c_char_p
probe["c_environ_matches"] = all(
    (libc.getenv(k.encode()) or b"").decode() == v for k, v in os.environ.items())
# Keys whose values name this run's own paths and ports differ between any two runs.
volatile = {"MASTER_PORT", "TORCHELASTIC_ERROR_FILE", "DDPRUN_HEARTBEAT_FILE",
            "DDPRUN_AUTO_PROGRESS_FILE", "DDPRUN_WORKER_SOCKET",
            "TORCHELASTIC_RUN_ID", "TORCHELASTIC_TIMER_FILE"}
probe["environ"] = {k: v for k, v in os.environ.items() if k not in volatile}
import faulthandler  # noqa: E402  (after the state above was read)

probe["faulthandler"] = faulthandler.is_enabled()
import random  # noqa: E402

probe["random"] = random.random()
try:
    import numpy  # noqa: E402

    probe["numpy_random"] = float(numpy.random.random())
except ImportError:
    probe["numpy_random"] = None
import torch  # noqa: E402

probe["torch_initial_seed"] = torch.initial_seed()
probe["torch_rand"] = float(torch.rand(1))
probe["torch_threads"] = torch.get_num_threads()
probe["cuda_initialized"] = torch.cuda.is_initialized()
path = os.path.join(os.environ["DDPRUN_TEST_OUT"], f"probe_{sys.argv[1]}_{os.environ['RANK']}.json")
with open(path, "w") as f:
    json.dump(probe, f)
