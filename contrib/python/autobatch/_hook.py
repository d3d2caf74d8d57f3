"""autobatch._hook - the trial protocol's writer, and the step hook that needs no code change.

Owns what a probe trial learns from a Python process: the lines appended to
$AUTOBATCH_TRIAL_REPORT ({"step_s": S, "samples": N, "peak_bytes": N} per step,
{"oom": true, "peak_at_least_bytes": N}, a final {"peak_bytes": N}), written once here for both the helper (autobatch.trial()) and the
probe's sitecustomize, which calls install() so that a PyTorch program that knows nothing of
autobatch is seen through its optimizer steps and ends after the warm-up and the measured
steps. Standard library only; torch is touched only once the program itself imports it.
"""

import importlib.abc
import importlib.util
import json
import os
import resource
import sys
import threading
import time
import types

_recorder = None
_program_speaks = False  # the program writes the protocol itself: the hook stands aside
_installed = False


def positive_int(name):
    value = os.environ.get(name, "")
    if value.isdigit() and 0 < int(value) < 2**31:
        return int(value)
    return None


def in_trial():
    return os.environ.get("AUTOBATCH_TRIAL") == "1"


def peak_bytes():
    """The framework's peak: CUDA's reserved memory when a GPU was used, else the RSS."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return max(torch.cuda.max_memory_reserved(i) for i in range(torch.cuda.device_count()))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def is_oom(error):
    name = type(error).__name__
    text = str(error)
    return isinstance(error, MemoryError) or name == "OutOfMemoryError" or \
        "out of memory" in text.lower() or "can't allocate memory" in text


class Recorder:
    """Appends this process's trial lines to $AUTOBATCH_TRIAL_REPORT; with
    $AUTOBATCH_TRIAL_PER_PROCESS=1 (a trial step's task, whose command may be a launcher
    starting several workers) to a report of its own beside it, REPORT.pid.PID, so that each
    worker's steps and memory are its own."""

    def __init__(self):
        self.pid = os.getpid()
        self.base = os.environ.get("AUTOBATCH_TRIAL_REPORT")
        self.path = self.base
        if self.base and os.environ.get("AUTOBATCH_TRIAL_PER_PROCESS") == "1":
            self.path = "%s.pid.%d" % (self.base, self.pid)
        self.steps = positive_int("AUTOBATCH_TRIAL_STEPS") or 3
        self.batch = positive_int("AUTOBATCH_BATCH_SIZE") or 1
        self.count = 0
        self.written = 0
        self.last = time.perf_counter()

    def write(self, record):
        if not self.path:
            return
        line = json.dumps(record) + "\n"
        with open(self.path, "a") as f:
            f.write(line)
        self.written += len(line.encode())

    def foreign(self):
        """True when something other than this recorder wrote to the report (the program
        itself, to the trial's own report)."""
        try:
            if self.path != self.base:
                return os.path.getsize(self.base) > 0
            return os.path.getsize(self.path) > self.written
        except (OSError, TypeError):
            return False

    def start(self):
        self.last = time.perf_counter()

    def step(self, samples=None):
        """Records a finished step; True once the warm-up and the measured steps are done."""
        now = time.perf_counter()
        self.write({"step_s": now - self.last, "samples": samples or self.batch,
                    "peak_bytes": peak_bytes()})
        self.last = now
        self.count += 1
        return self.count >= self.steps + 1

    def oom(self):
        # what the process held when it failed: the failed peak was at least that
        # (the probe adds the request the error message names)
        record = {"oom": True}
        held = peak_bytes()
        if held > 0:
            record["peak_at_least_bytes"] = held
        self.write(record)

    def finish(self):
        self.write({"peak_bytes": peak_bytes()})


def recorder():
    """The process's recorder (a forked DataLoader worker gets its own)."""
    global _recorder
    if _recorder is None or _recorder.pid != os.getpid():
        _recorder = Recorder()
    return _recorder


def claim():
    """The program speaks the protocol (the helper calls this): the hook stands aside."""
    global _program_speaks
    _program_speaks = True


def _end_trial():
    """The trial has its evidence: end now, as the probe would, without training on."""
    recorder().finish()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(0)


def _on_step():
    global _program_speaks
    if _program_speaks:
        return
    rec = recorder()
    if rec.foreign():  # the program's own protocol lines win
        _program_speaks = True
        return
    if rec.step():
        _end_trial()


class _StepCounter:
    """Counts the training steps of the first optimizer that steps (a GAN's second optimizer,
    or a wrapper's inner one, is not a step of its own): one per optimizer update, so
    gradient accumulation counts once per update."""

    def __init__(self):
        self.depth = 0
        self.primary = None

    def pre(self, optimizer, args=None, kwargs=None):
        self.depth += 1

    def post(self, optimizer, args=None, kwargs=None):
        self.depth -= 1
        if self.depth:
            return
        if self.primary is None:
            self.primary = id(optimizer)
        if id(optimizer) == self.primary:
            _on_step()

    def failed(self):
        self.depth -= 1


def _wrap_instance_step(counter, torch):
    """PyTorch before 2.0 has no global step hooks: each optimizer's step is wrapped as it is
    made, as a bound method so that LR schedulers can wrap it again."""
    original_init = torch.optim.Optimizer.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        step = type(self).step

        def counted_step(opt, *a, **kw):
            counter.pre(opt)
            try:
                result = step(opt, *a, **kw)
            except BaseException:
                counter.failed()
                raise
            counter.post(opt)
            return result

        self.step = types.MethodType(counted_step, self)

    torch.optim.Optimizer.__init__ = __init__


def _oom_excepthooks():
    previous = sys.excepthook

    def excepthook(kind, error, tb):
        if is_oom(error):
            recorder().oom()
        previous(kind, error, tb)

    sys.excepthook = excepthook
    if hasattr(threading, "excepthook"):
        previous_thread = threading.excepthook

        def thread_excepthook(args):
            if is_oom(args.exc_value):
                recorder().oom()
            previous_thread(args)

        threading.excepthook = thread_excepthook


def instrument(torch):
    """Counts the program's optimizer steps from now on."""
    counter = _StepCounter()
    optimizer = sys.modules.get("torch.optim.optimizer")
    if optimizer is not None and hasattr(optimizer, "register_optimizer_step_post_hook"):
        optimizer.register_optimizer_step_pre_hook(counter.pre)
        optimizer.register_optimizer_step_post_hook(counter.post)
    else:
        _wrap_instance_step(counter, torch)


class _TorchImport(importlib.abc.MetaPathFinder):
    """Instruments torch right after the program imports it, and never imports it itself."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_instrument(module):
            exec_module(module)
            instrument(module)

        spec.loader.exec_module = exec_and_instrument
        return spec


def install():
    """Called by the probe's sitecustomize in a trial: steps, OOM and the end of the trial."""
    global _installed
    if _installed or not in_trial() or not os.environ.get("AUTOBATCH_TRIAL_REPORT"):
        return
    _installed = True
    _oom_excepthooks()
    if "torch" in sys.modules:
        instrument(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImport())
