"""ddprun's preload template (--preload): one warm interpreter per node that imports the listed
modules once, then becomes every worker of every attempt by forking.

Started by the agent (agent/preload/preload_launcher.h) as `<workers' python> -u <this file>` with the
workers' environment, it connects to the agent's socket (DDPRUN_PRELOAD_SOCKET), imports the
modules named in DDPRUN_PRELOAD_MODULES one by one, and says whether that worked. Then, for each
worker, the agent sends one request (a JSON line) and three descriptors (the worker's stdin,
stdout and stderr); the template forks twice, so that the worker is re-parented to the agent
(a child subreaper) and supervised exactly like a process the agent started itself, and
answers with the worker's pid.

The worker then undoes everything that would tell it from `python -u script` (docs/preload.md):
its own process group, the agent as parent with a parent-death signal, standard streams,
nothing else open, the signal mask and dispositions of a fresh interpreter, its own
environment (os.environ and the C library's), working directory and CPU affinity, fresh random
state, torch's thread count for its environment, faulthandler, and sys.argv, sys.path[0] and
__main__ as the interpreter sets them for a script or a -m module.

The script itself is run by ddprun's bootstrap (agent/python/_ddprun_bootstrap.py, written
beside this file), imported here before the preload: the worker calls its run() exactly as a
fresh worker's `python -u _ddprun_bootstrap.py script` does.

Only the standard library is imported before the preload; nothing here starts a thread.
"""
import json
import os
import signal
import socket
import sys
import time


def _import_bootstrap():
    """_ddprun_bootstrap from this file's directory, compiled here: nothing is written there
    (no __pycache__), and sys.path is not needed (-P / PYTHONSAFEPATH)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "_ddprun_bootstrap", os.path.join(here, "_ddprun_bootstrap.py"))
    module = importlib.util.module_from_spec(spec)
    with open(spec.origin, "rb") as f:
        code = compile(f.read(), spec.origin, "exec", dont_inherit=True)
    sys.modules[spec.name] = module
    exec(code, module.__dict__)
    return module


_bootstrap = _import_bootstrap()

_AGENT_PID = os.getppid()
# Every signal's disposition as this interpreter started, which is a fresh worker's: the agent
# starts the template as it starts workers, with PYTHONFAULTHANDLER when the workers get it.
_STARTUP_SIGNALS = {s: signal.getsignal(s) for s in signal.valid_signals()
                    if s not in (signal.SIGKILL, signal.SIGSTOP)}
_MAX_REQUEST_BYTES = 1 << 24


def _send(sock, message):
    sock.sendall((json.dumps(message) + "\n").encode())


def _threads():
    return len(os.listdir("/proc/self/task"))


def _cuda_initialized():
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def _preload(sock):
    modules = [m for m in os.environ.get("DDPRUN_PRELOAD_MODULES", "").split(",") if m]
    started = time.monotonic()
    for name in modules:
        try:
            __import__(name)
        except BaseException as e:  # the job goes on without the template
            _send(sock, {"error": f"importing {name} failed: {type(e).__name__}: {e}"})
            return False
        if _threads() != 1:
            _send(sock, {"error": f"importing {name} started a thread ({_threads()} threads "
                                  "now): a process with threads cannot be forked safely"})
            return False
        if _cuda_initialized():
            _send(sock, {"error": f"importing {name} initialised CUDA: a CUDA context cannot "
                                  "be forked"})
            return False
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    _send(sock, {"ready": True, "modules": modules,
                 "import_seconds": round(time.monotonic() - started, 3),
                 "torch_threads": threads})
    return True


def _receive(sock, buffer):
    """One request line and the descriptors that came with it."""
    fds = []
    while b"\n" not in buffer:
        data, got, _, _ = socket.recv_fds(sock, 65536, 3)
        if not data:
            return None, buffer, fds
        buffer += data
        fds.extend(got)
        if len(buffer) > _MAX_REQUEST_BYTES:
            raise ValueError("request too large")
    line, _, rest = buffer.partition(b"\n")
    return json.loads(line), rest, fds


def _fork_worker(request, fds):
    """In the template: forks the worker; returns its pid, or None in the worker itself."""
    # Both pipes before any fork: the intermediate child tells the grandchild's pid on one.
    pid_read, pid_write = os.pipe()
    child = os.fork()
    if child == 0:  # intermediate: forks the worker, gives it its own group, and leaves
        worker = -1
        try:
            os.close(pid_read)
            worker = os.fork()
            if worker != 0:
                os.setpgid(worker, worker)
                os.write(pid_write, str(worker).encode())
        except BaseException:
            pass
        if worker != 0:
            os._exit(0)
        os.close(pid_write)
        os.setpgid(0, 0)
        return None
    os.close(pid_write)
    for fd in fds:
        os.close(fd)
    with os.fdopen(pid_read, "rb") as r:
        text = r.read()
    os.waitpid(child, 0)
    if not text:
        raise OSError("the worker could not be forked")
    return int(text)


def serve():
    """The template's loop; returns (request, fds) in a worker, or exits in the template."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["DDPRUN_PRELOAD_SOCKET"])
    if not _preload(sock):
        sys.exit(0)
    buffer = b""
    while True:
        request, buffer, fds = _receive(sock, buffer)
        if request is None:
            sys.exit(0)  # the agent is gone or done: so is the template
        why = None
        if len(fds) != 3:
            why = f"expected 3 descriptors with the request, got {len(fds)}"
        elif _threads() != 1:
            why = f"the template has {_threads()} threads: it cannot fork safely"
        elif _cuda_initialized():
            why = "CUDA was initialised in the template: it cannot fork safely"
        if why:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": why})
            continue
        try:
            pid = _fork_worker(request, fds)
        except OSError as e:
            _send(sock, {"error": f"fork: {e}"})
            continue
        if pid is None:
            sock.close()
            return request, fds
        _send(sock, {"pid": pid})


def _become_agents_child():
    """Waits (bounded) until the worker is the agent's child, then dies with the agent."""
    deadline = time.monotonic() + 5
    while os.getppid() != _AGENT_PID:
        if time.monotonic() > deadline:
            os._exit(70)
        time.sleep(0.0002)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != _AGENT_PID:  # the agent died in between
        os._exit(70)


def _fresh_process_state(request, fds):
    _become_agents_child()
    # The signal mask and dispositions of a fresh interpreter: what a preloaded module changed
    # goes back (None: a handler installed in C at start-up, faulthandler's, left as it is).
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for signo, startup in _STARTUP_SIGNALS.items():
        if startup is not None and signal.getsignal(signo) != startup:
            try:
                signal.signal(signo, startup)
            except (OSError, ValueError):
                pass
    # Standard streams, and nothing else open.
    for target, fd in enumerate(fds):
        os.dup2(fd, target, inheritable=True)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    # Environment: os.environ and the C library's (putenv / unsetenv under os.environ).
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if request.get("cpus"):
        os.sched_setaffinity(0, request["cpus"])
    # Random state: what a fresh process's would be (seeded from the OS per process).
    import random
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()
        threads = _torch_threads()
        if threads is not None and threads != torch.get_num_threads():
            torch.set_num_threads(threads)
    # faulthandler: on in the template exactly when the workers' environment turns it on.
    import faulthandler
    if os.environ.get("PYTHONFAULTHANDLER") and not faulthandler.is_enabled():
        faulthandler.enable()


def _torch_threads():
    """torch's intra-op threads in a fresh process of this environment, when it names them;
    otherwise the template's (started with the workers' environment: the same default)."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


_request, _fds = serve()
_fresh_process_state(_request, _fds)
del _fds
_bootstrap.run(_request["kind"], _request["target"], _request["args"])
