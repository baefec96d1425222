"""Automatic progress for unmodified PyTorch scripts (DDPRUN_AUTO_PROGRESS_FILE, issue 34).

Imported by _ddprun_bootstrap.py (its neighbour) when the agent turns automatic progress on.
Standard library only; torch is never imported here: the hooks go in once the script's own
`import torch` has finished (a sys.meta_path entry notices it), or at once when torch is
already loaded (a worker forked from the preload template).

What the agent reads: the first line of its file, rewritten in place (pwrite at 0) with
"<step>\\n" or "<step> <busy seconds>\\n" (agent/progress/heartbeat_watcher.h parses it). Here:
  * a step is one step() of the leading optimizer (the first instance that steps, held weakly;
    when it is collected the next one to step leads and the count goes on); a script that
    never steps an optimizer counts each DDP backward that synchronised gradients instead;
  * busy = the time since the previous step minus the time spent waiting for other ranks in
    between: DDP's gradient synchronisation (from the end of the local backward to the end of
    DDP's finalisation), synchronous torch.distributed collectives, ddprun.waiting() regions.
    No busy time for the process's first step, nor for a step whose period held a DDP forward
    without grad or in eval mode (validation): such lines carry the step alone;
  * a DDP forward, or a step of another optimizer, rewrites the current line without busy time
    (at most every 100 ms) so the agent sees the rank alive in a long step ("0" before step 1).
Nothing here may break the script: every write error is ignored, every hook swallows its own
errors. Not thread-safe beyond what the GIL gives: waiting regions entered by several threads
at once are counted once (under-counted, never twice).
"""
import functools
import importlib
import os
import sys
import time
import weakref

_clock = time.monotonic
_LIVENESS_S = 0.1  # the fewest seconds between two liveness-only rewrites
_FROM_OPTIMIZER, _FROM_DDP = "optimizer", "ddp"
_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "broadcast", "reduce", "barrier", "monitored_barrier",
                "all_to_all", "all_to_all_single", "gather", "scatter", "all_gather_object",
                "broadcast_object_list", "gather_object")


class Progress:
    """The step counter and its file. One per worker process; see the module's docstring."""
    __slots__ = ("path", "fd", "enabled", "step", "last_event", "waited", "tainted",
                 "last_write", "lead", "source", "depth", "forward_began", "install_error",
                 "__weakref__")

    def __init__(self, path):
        self.path = path
        self.fd = None          # opened at the first write: nothing open when the script starts
        self.enabled = True     # False after the file could not be opened, and in forked children
        self.step = 0           # steps counted so far
        self.last_event = None  # when the last step was counted (None: no step yet)
        self.waited = 0.0       # seconds spent waiting since last_event
        self.tainted = False    # the period since last_event held a validation forward
        self.last_write = -1e9
        self.lead = None        # weakref to the leading optimizer
        self.source = None      # what counts steps: None (nothing yet), _FROM_DDP, _FROM_OPTIMIZER
        self.depth = 0          # nesting of waiting regions (collectives calling collectives)
        self.forward_began = None  # when the running DDP forward began (its pre-forward syncs)
        self.install_error = None  # why the torch hooks could not go in, for debugging

    def __copy__(self):  # copy.deepcopy() of a DDP model copies its hooks: one counter still
        return self

    def __deepcopy__(self, memo):
        return self

    # --- the file ---------------------------------------------------------------------------
    def _write(self, line, now):
        self.last_write = now
        if not self.enabled:
            return
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
            os.pwrite(self.fd, line.encode(), 0)
        except OSError:
            if self.fd is None:
                self.enabled = False

    def beat(self, now):
        """Liveness: the current step again, without busy time, at most every _LIVENESS_S."""
        if now - self.last_write >= _LIVENESS_S:
            self._write(f"{self.step}\n", now)

    def _count(self, now):
        self.step += 1
        if self.last_event is None or self.tainted:
            line = f"{self.step}\n"
        else:
            busy = now - self.last_event - self.waited
            line = f"{self.step} {busy if busy > 0.0 else 0.0:.6f}\n"
        self._restart_period(now)
        self._write(line, now)

    def _restart_period(self, now):
        self.last_event = now
        self.waited = 0.0
        self.tainted = False

    # --- events -----------------------------------------------------------------------------
    def on_optimizer_step(self, optimizer):
        now = _clock()
        lead = self.lead() if self.lead is not None else None
        if lead is None:
            self.lead = weakref.ref(optimizer)
        elif lead is not optimizer:
            self.beat(now)
            return
        if self.source == _FROM_DDP:
            # This iteration's step was counted at its DDP backward: from now on the optimizer
            # counts, from here.
            self.source = _FROM_OPTIMIZER
            self._restart_period(now)
            return
        self.source = _FROM_OPTIMIZER
        self._count(now)

    def on_ddp_synced(self, local_done, synced):
        if self.depth == 0:
            self.waited += synced - local_done
        if self.source != _FROM_OPTIMIZER:
            self.source = _FROM_DDP
            self._count(synced)

    def begin_waiting(self):
        """Enters a waiting region; returns the token for end_waiting (None when nested)."""
        self.depth += 1
        return _clock() if self.depth == 1 else None

    def end_waiting(self, token):
        self.depth -= 1
        if token is not None:
            self.waited += _clock() - token


def start(path):
    """Automatic progress into `path`: the hooks now if torch is loaded, else at its import."""
    progress = Progress(path)
    os.register_at_fork(after_in_child=functools.partial(_disable, weakref.ref(progress)))
    torch = sys.modules.get("torch")
    if torch is not None:
        _install(torch, progress)
    else:
        sys.meta_path.insert(0, _TorchImportWatch(progress))
    return progress


def _disable(progress_ref):
    """In a process forked from the worker (DataLoader workers): it must not write the file."""
    progress = progress_ref()
    if progress is not None:
        progress.enabled = False


class _TorchImportWatch:
    """The first entry of sys.meta_path until `import torch` has run torch/__init__.py; then
    installs the hooks and leaves. Answers nothing itself: it asks the finders after it and
    wraps the found loader's exec_module for that one call."""

    def __init__(self, progress):
        self.progress = progress
        self.searching = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.searching:
            return None
        self.searching = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is not self and find is not None:
                    spec = find(name, path, target)
                    if spec is not None:
                        break
        finally:
            self.searching = False
        if spec is not None and spec.loader is not None:
            try:
                _after_exec(spec.loader, self._imported)
            except (AttributeError, TypeError):
                pass  # a loader that cannot be wrapped: no automatic progress
        return spec

    def _imported(self, module):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        _install(module, self.progress)


def _after_exec(loader, then):
    """Makes `loader.exec_module(module)` call then(module) once it succeeded, for one call;
    the loader is left as it was (torch.__loader__ is the loader the import system found)."""
    inner = loader.exec_module

    def exec_module(module):
        try:
            del loader.exec_module
        except AttributeError:
            pass
        inner(module)
        then(module)

    loader.exec_module = exec_module


def _install(torch, progress):
    errors = []
    for install in (_on_every_optimizer_step, _watch_ddp, _time_collectives):
        try:
            install(torch, progress)
        except Exception as e:  # a torch too different: the script runs without this part
            errors.append(f"{install.__name__}: {type(e).__name__}: {e}")
    progress.install_error = "; ".join(errors) or None


# ---- The one place where torch versions differ -------------------------------------------------
def _on_every_optimizer_step(torch, progress):
    """progress.on_optimizer_step(optimizer) after every step() of every torch.optim optimizer."""
    callback = progress.on_optimizer_step
    module = importlib.import_module("torch.optim.optimizer")  # torch.optim deletes the name
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:  # torch >= 2.0: a global post-step hook
        register(lambda optimizer, args, kwargs: _quietly(callback, optimizer))
        return
    # torch 1.13: no global hook, but Optimizer._hook_for_profile wraps every optimizer class's
    # step() to call self._optimizer_step_code() after the step (torch/optim/optimizer.py).
    cls = module.Optimizer
    original = cls._optimizer_step_code

    @functools.wraps(original)
    def _optimizer_step_code(self):
        original(self)
        _quietly(callback, self)

    cls._optimizer_step_code = _optimizer_step_code
# ------------------------------------------------------------------------------------------------


def _quietly(function, *args):
    try:
        function(*args)
    except Exception:
        pass


def _watch_ddp(torch, progress):
    """Every DistributedDataParallel gets a forward pre-hook and a forward hook: liveness,
    validation, and the waits of its synchronisations. Gradients: engine callbacks (see
    _forward_hook). Before the forward (buffers broadcast from rank 0, the buckets rebuilt at
    the second iteration, Join): the time from the pre-hook to DDP's _run_ddp_forward, which
    runs the wrapped module once those are done (both torch versions)."""
    ddp = torch.nn.parallel.DistributedDataParallel
    if getattr(ddp.__init__, "_ddprun_wrapped", False):
        return
    original_init = ddp.__init__
    hook = functools.partial(_forward_hook, progress, torch.is_grad_enabled,
                             torch.autograd.Variable._execution_engine.queue_callback)
    pre_hook = functools.partial(_forward_pre_hook, progress)
    run_forward = getattr(ddp, "_run_ddp_forward", None)

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        try:
            if run_forward is not None:
                self.register_forward_pre_hook(pre_hook)
            self.register_forward_hook(hook)
        except Exception:
            pass

    __init__._ddprun_wrapped = True
    ddp.__init__ = __init__
    if run_forward is not None:
        @functools.wraps(run_forward)
        def _run_ddp_forward(self, *args, **kwargs):
            began = progress.forward_began
            if began is not None:
                progress.forward_began = None
                if progress.depth == 0:
                    progress.waited += _clock() - began
            return run_forward(self, *args, **kwargs)

        ddp._run_ddp_forward = _run_ddp_forward


def _forward_pre_hook(progress, module, inputs):
    progress.forward_began = _clock()


def _forward_hook(progress, grad_enabled, queue_callback, module, inputs, output):
    try:
        now = _clock()
        if now - progress.last_write >= _LIVENESS_S:
            progress.beat(now)
        if not module.training or not grad_enabled():
            progress.tainted = True
            return
        if not module.require_backward_grad_sync:
            return  # under no_sync(): this backward does not synchronise
        tensor = _first_requiring_grad(output)
        if tensor is not None:
            tensor.register_hook(_SyncTimer(progress, queue_callback).on_grad)
    except Exception:
        pass


class _SyncTimer:
    """One synchronising backward. The output's gradient hook runs at the start of backward and
    queues `local_done` on the autograd engine; final callbacks run in queue order once the
    local graph is done, so it runs before DDP's finalisation (queued when the last gradient
    bucket is ready, later in that backward). It queues `synced`, which therefore runs after
    the finalisation has waited for the gradient all-reduce."""
    __slots__ = ("progress", "queue_callback", "fired", "local_done")

    def __init__(self, progress, queue_callback):
        self.progress = progress
        self.queue_callback = queue_callback
        self.fired = False
        self.local_done = None

    def on_grad(self, grad):
        if not self.fired:  # once, even with retain_graph
            self.fired = True
            try:
                self.queue_callback(self._local_done)
            except Exception:
                pass

    def _local_done(self):
        self.local_done = _clock()
        try:
            self.queue_callback(self._synced)
        except Exception:
            pass

    def _synced(self):
        try:
            self.progress.on_ddp_synced(self.local_done, _clock())
        except Exception:
            pass


def _first_requiring_grad(output, depth=0):
    if getattr(output, "requires_grad", False) and hasattr(output, "register_hook"):
        return output
    if depth > 4:
        return None
    if isinstance(output, dict):
        output = output.values()
    elif not isinstance(output, (tuple, list)):
        return None
    for item in output:
        found = _first_requiring_grad(item, depth + 1)
        if found is not None:
            return found
    return None


def _time_collectives(torch, progress):
    """The time inside synchronous torch.distributed collectives counts as waiting. Patched in
    torch.distributed and distributed_c10d, so `from torch.distributed import all_reduce`
    after the import of torch gets the wrapper too."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available():
        return
    import inspect  # torch has imported it already
    c10d = dist.distributed_c10d
    for name in _COLLECTIVES:
        original = getattr(c10d, name, None)
        if original is None or getattr(original, "_ddprun_wrapped", False):
            continue
        try:
            parameters = list(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            parameters = []
        async_at = parameters.index("async_op") if "async_op" in parameters else None
        wrapper = _timed(original, async_at, progress)
        setattr(c10d, name, wrapper)
        if getattr(dist, name, None) is original:
            setattr(dist, name, wrapper)


def _timed(function, async_at, progress):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if kwargs.get("async_op") or (async_at is not None and len(args) > async_at and
                                      args[async_at]):
            return function(*args, **kwargs)
        token = progress.begin_waiting()
        try:
            return function(*args, **kwargs)
        finally:
            progress.end_waiting(token)

    wrapper._ddprun_wrapped = True
    return wrapper
