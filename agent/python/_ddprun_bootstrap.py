"""ddprun's bootstrap: the program every Python worker runs before its script (issue 34).

Fresh workers:    <python> -u <dir>/_ddprun_bootstrap.py <script> args...
                  <python> -u <dir>/_ddprun_bootstrap.py -m <module> args...
Preload workers:  the template (agent/preload/template.py, in the same <dir>) imports this
                  module before the preload and, in each forked worker, calls
                  run(kind, target, args) as below: one way to run a script.

run() makes the script see what `python -u script args` (or `-m module`) would: sys.argv,
sys.path[0], a fresh __main__ module, tracebacks that start at the script's own frame, and the
exit status the interpreter would give. It opens nothing that stays open and starts no thread.
Standard library only; torch is touched only through the hooks of _ddprun_progress.py (beside
this file), after the script imported it. What ddprun adds, from the worker's environment:
  * DDPRUN_AUTO_PROGRESS_FILE: steps and busy times written by hooks (_ddprun_progress.py);
  * DDPRUN_WORKER_SOCKET: an uncaught exception is told to the agent in one datagram
    (agent/process/worker_channel.h) before the traceback is printed;
  * DDPRUN_QUICK_EXIT ("0": off): once the script is done, non-daemon threads are joined and
    the atexit handlers run, the streams and files are flushed, and the process ends with
    os._exit(status), skipping the interpreter's teardown (torch 2.x spends most of a second
    there). Module teardown and __del__ at exit are skipped, as Python allows.
The runtime is reachable as sys.modules["_ddprun_bootstrap"] (the public module ddprun uses
begin_waiting / end_waiting).
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_OWN_FILES = frozenset(os.path.join(_HERE, name)
                       for name in ("_ddprun_bootstrap.py", "_ddprun_progress.py"))
_MAX_NOTICE_CHARS = 2000   # the message's length in a notice
_MAX_NOTICE_BYTES = 8192   # the agent's limit for one datagram (worker_channel.h)

progress = None  # _ddprun_progress.Progress while automatic progress is on


def run(kind, target, args):
    """Runs `target` ("script": a path; "module": a module name, as -m) with `args` as the
    interpreter would, then ends the process (quick exit) or returns / raises as the script
    did, for the interpreter to end it."""
    global progress
    quick = os.environ.get("DDPRUN_QUICK_EXIT", "") != "0"
    path = os.environ.get("DDPRUN_AUTO_PROGRESS_FILE")
    if path:
        try:
            progress = _load_neighbour("_ddprun_progress").start(path)
        except Exception:
            progress = None  # never worth failing the script for
    try:
        if kind == "module":
            _run_module(target, args)
        else:
            _run_script(target, args)
    except SystemExit as e:
        status = _system_exit_status(e)
        if status != 0:
            _tell_agent(e)
        if quick:
            _print_exit_code(e)
            _quick_exit(status)
        raise
    except BaseException as e:
        _strip_own_frames(e)
        _tell_agent(e)
        _print_uncaught(e)
        if quick:
            _quick_exit(1, sigint=isinstance(e, KeyboardInterrupt))
        # The interpreter ends the process as for any uncaught exception (KeyboardInterrupt: by
        # SIGINT); the traceback was printed above, without this file's frames.
        sys.excepthook = _printed_already
        raise
    if quick:
        _quick_exit(0)


def begin_waiting():
    """For ddprun.waiting(): a region spent waiting for other ranks begins; returns a token."""
    p = progress
    return p.begin_waiting() if p is not None else None


def end_waiting(token):
    """For ddprun.waiting(): the region that begin_waiting() returned `token` for ends."""
    p = progress
    if p is not None:
        p.end_waiting(token)


# --- running the target, as the interpreter does -------------------------------------------
def _run_script(path, args):
    sys.argv = [path] + list(args)
    importer = _importer_for(path)
    if importer is not None:  # a directory or zip file: its __main__ module, path[0] = it
        _set_path0(os.path.abspath(path), always=True)
        _run_module_as_main("__main__", alter_argv=False)
        return
    if not getattr(sys.flags, "safe_path", False):
        _set_path0(os.path.dirname(os.path.realpath(path)))
    absolute = os.path.abspath(path)
    import importlib.machinery
    import io
    try:
        with io.open_code(absolute) as f:
            source = f.read()
    except OSError as e:
        program = (getattr(sys, "orig_argv", None) or [sys.executable])[0]
        sys.stderr.write(f"{program}: can't open file {absolute!r}: "
                         f"[Errno {e.errno}] {e.strerror}\n")
        raise SystemExit(2) from None
    code = compile(source, absolute, "exec", dont_inherit=True)
    # As the interpreter runs `python script`: a module named __main__ (no __spec__,
    # __package__ None, __file__ absolute) that stays sys.modules["__main__"].
    main = _fresh_main()
    main.__dict__.update(__file__=absolute, __cached__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", absolute))
    exec(code, main.__dict__)


def _run_module(name, args):
    # As `python -m`: argv[0] becomes the module's file, sys.path[0] the working directory.
    sys.argv = ["-m"] + list(args)
    if not getattr(sys.flags, "safe_path", False):
        _set_path0(os.getcwd())
    _run_module_as_main(name, alter_argv=True)


def _run_module_as_main(name, alter_argv):
    """What `python -m` calls, in a fresh __main__ (its errors: SystemExit with the message)."""
    import runpy
    _fresh_main()
    runpy._run_module_as_main(name, alter_argv)


def _fresh_main():
    import builtins
    main = type(sys)("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    return main


def _set_path0(entry, always=False):
    """sys.path[0] is this file's directory (fresh) or the template's (preload): replaced.
    Under -P / PYTHONSAFEPATH there is none, and only a directory or zip target adds one."""
    if getattr(sys.flags, "safe_path", False):
        if always:
            sys.path.insert(0, entry)
    elif sys.path:
        sys.path[0] = entry
    else:
        sys.path.append(entry)


def _importer_for(path):
    """A path-entry finder for `path` when the interpreter would run it as a directory or zip
    (PyImport_GetImporter, without its cache); None for a plain script."""
    if not os.path.exists(path):
        return None
    for hook in sys.path_hooks:
        try:
            return hook(path)
        except ImportError:
            continue
    return None


def _load_neighbour(name):
    """The module `name` from the .py file beside this one; compiled here, so that nothing is
    written into the directory (no __pycache__) and sys.path is not needed."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    with open(spec.origin, "rb") as f:
        code = compile(f.read(), spec.origin, "exec", dont_inherit=True)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


# --- how the script ended --------------------------------------------------------------------
def _system_exit_status(e):
    """The status the interpreter exits with for SystemExit `e` (_Py_HandleSystemExit): a code
    that is neither None nor an integer gives 1 (and is printed: _print_exit_code)."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if -(1 << 63) <= code < (1 << 63) else 255
    return 1


def _print_exit_code(e):
    """As the interpreter does: sys.exit("message") prints the message to sys.stderr."""
    if e.code is not None and not isinstance(e.code, int):
        try:
            sys.stderr.write(f"{e.code}\n")
        except Exception:
            pass


def _strip_own_frames(e):
    """Tracebacks start at the script's own frame, as under `python -u script`: this file's
    frames and runpy's go from the front, and the hooks' frames (a wrapped collective) from
    anywhere, in `e` and the exceptions chained to it."""
    runpy = sys.modules.get("runpy")  # imported for -m, or by the script
    leading = _OWN_FILES | {"<frozen runpy>"}
    if runpy is not None and getattr(runpy, "__file__", None):
        leading |= {os.path.abspath(runpy.__file__)}
    todo, seen = [e], set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None and _file_of(tb) in leading:
            tb = tb.tb_next
        link = tb
        while link is not None:
            while link.tb_next is not None and _file_of(link.tb_next) in _OWN_FILES:
                link.tb_next = link.tb_next.tb_next
            link = link.tb_next
        e.__traceback__ = tb
        todo += [e.__cause__, e.__context__]


def _file_of(tb):
    name = tb.tb_frame.f_code.co_filename
    return name if name.startswith("<") else os.path.abspath(name)


def _print_uncaught(e):
    """What the interpreter does with an uncaught exception (PyErr_Print): the sys.last_*
    variables, then sys.excepthook, whatever the script made it."""
    kind, tb = type(e), e.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = kind, e, tb
    hook = getattr(sys, "excepthook", None)
    if hook is None:
        sys.stderr.write("sys.excepthook is missing\n")
        sys.__excepthook__(kind, e, tb)
        return
    try:
        hook(kind, e, tb)
    except BaseException as failure:
        sys.stderr.write("Error in sys.excepthook:\n")
        sys.__excepthook__(type(failure), failure, failure.__traceback__)
        sys.stderr.write("\nOriginal exception was:\n")
        sys.__excepthook__(kind, e, tb)


def _printed_already(kind, value, tb):
    pass


def _tell_agent(e):
    """One datagram to the agent (DDPRUN_WORKER_SOCKET) saying that this worker failed; sent
    without waiting, every error ignored."""
    path = os.environ.get("DDPRUN_WORKER_SOCKET")
    if not path:
        return
    try:
        import json
        import socket
        kind = type(e)
        name = kind.__qualname__ if kind.__module__ in ("builtins", "__main__") else \
            f"{kind.__module__}.{kind.__qualname__}"
        try:
            text = str(e)
        except Exception:
            text = "<exception str() failed>"
        message = f"{name}: {text}" if text else name
        try:
            local_rank = int(os.environ.get("LOCAL_RANK", "-1"))
        except ValueError:
            local_rank = -1
        limit = _MAX_NOTICE_CHARS
        while True:
            data = json.dumps({"event": "exception", "local_rank": local_rank,
                               "pid": os.getpid(), "message": message[:limit]},
                              ensure_ascii=False).encode("utf-8", "replace")
            if len(data) <= _MAX_NOTICE_BYTES or limit == 0:
                break
            limit //= 2
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.setblocking(False)
            s.sendto(data, path)
    except Exception:
        pass


def _quick_exit(status, sigint=False):
    """The interpreter's exit up to its teardown (Py_FinalizeEx: threads joined, atexit handlers,
    streams flushed; a failed flush of stdout or stderr gives 120), then os._exit(status).
    sigint: as after an uncaught KeyboardInterrupt, the process ends by SIGINT."""
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        try:
            threading._shutdown()
        except BaseException:
            pass
    try:
        import atexit
        atexit._run_exitfuncs()
    except BaseException:
        pass
    if not _flush_std_streams():
        status = 120
    _flush_open_files()
    _flush_c_streams()
    if sigint:
        import signal
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except (OSError, ValueError):
            pass
        status = 128 + signal.SIGINT
    os._exit(status)


def _flush_std_streams():
    """Flushes sys.stdout and sys.stderr (and the original ones); False if that failed."""
    ok = True
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        stream = getattr(sys, name, None)
        if stream is None or getattr(stream, "closed", True):
            continue
        try:
            stream.flush()
        except Exception as e:
            if name == "stdout":
                try:
                    sys.stderr.write(f"Exception ignored in: {stream!r}\n"
                                     f"{type(e).__name__}: {e}\n")
                except Exception:
                    pass
            if not name.startswith("__"):
                ok = False
    return ok


def _writable_regular_files():
    """Whether a descriptor above 2 is a regular file open for writing: only then can a file
    object the script left open hold unwritten data (it keeps its descriptor until closed). The
    scan below walks every object (60-80 ms with torch 2.x's DDP loaded): skipped when there is
    none. Pipes, sockets and devices are not looked at (torch's event loops keep pipes open), nor
    ddprun's own progress and heartbeat files."""
    import stat
    # ddprun's own progress and heartbeat files: written with os.pwrite, nothing buffered.
    own = {os.path.realpath(os.environ[key]) for key in
           ("DDPRUN_AUTO_PROGRESS_FILE", "DDPRUN_HEARTBEAT_FILE") if os.environ.get(key)}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return True  # cannot tell: look
    for name in names:
        if int(name) <= 2:
            continue
        try:
            if not stat.S_ISREG(os.stat(f"/proc/self/fd/{name}").st_mode):
                continue
            if os.readlink(f"/proc/self/fd/{name}") in own:
                continue
            with open(f"/proc/self/fdinfo/{name}", "rb") as info:
                for line in info:
                    if line.startswith(b"flags:"):
                        if int(line.split()[1], 8) & 3:  # O_WRONLY or O_RDWR
                            return True
                        break
        except (OSError, ValueError):
            continue  # closed meanwhile (the listing's own descriptor)
    return False


def _flush_open_files():
    """Files the script left open for writing: the teardown would have closed them, so their
    buffered data is written now (text layers first, then the buffers under them)."""
    if not _writable_regular_files():
        return
    import gc
    import io
    texts, buffers = [], []
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance(): it reads __class__, which some objects compute
        if issubclass(kind, io.TextIOWrapper):
            texts.append(obj)
        elif issubclass(kind, (io.BufferedWriter, io.BufferedRandom)):
            buffers.append(obj)
    for stream in texts + buffers:
        try:
            if not stream.closed:
                stream.flush()
        except Exception:
            pass
    # gzip, bz2 and lzma write their trailer only when closed: close them (nothing else is).
    compression = sys.modules.get("_compression")
    if compression is not None:
        for obj in gc.get_objects():
            if issubclass(type(obj), compression.BaseStream):
                try:
                    obj.close()
                except Exception:
                    pass


def _flush_c_streams():
    """The C library's buffered output (printf, std::cout from extensions), which exit() would
    have written: fflush(NULL)."""
    try:
        import ctypes  # torch has loaded it already
        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass


def _main():
    """`python -u _ddprun_bootstrap.py [-m module | script] args...`"""
    sys.modules["_ddprun_bootstrap"] = sys.modules[__name__]
    argv = sys.argv[1:]
    if argv[:1] == ["-m"] and len(argv) >= 2:
        run("module", argv[1], argv[2:])
    elif argv and argv[0] != "-m":
        run("script", argv[0], argv[1:])
    else:
        sys.stderr.write("usage: _ddprun_bootstrap.py [-m module | script] [args...]\n")
        raise SystemExit(2)


if __name__ == "__main__":
    _main()
