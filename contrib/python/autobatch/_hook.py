"""autobatch._hook - the trial protocol's writer, and the step hook that needs no code change.

Owns what a probe trial learns from a Python process: the lines appended to
$AUTOBATCH_TRIAL_REPORT ({"step_s": S, "samples": N, "peak_bytes": N, "length": L} per step,
{"oom": true, "peak_at_least_bytes": N}, {"lengths": {...}} once, a final {"peak_bytes": N}),
written once here for both the helper (autobatch.trial()) and the probe's sitecustomize,
which calls install() so that a PyTorch program that knows nothing of autobatch is seen
through its optimizer steps (a JAX program through its jitted training steps: autobatch._jax)
and ends after the warm-up and the measured steps. In a trial
the program's DataLoader draws the dataset's longest samples first (the run's worst batch,
where batches are padded to their longest sample), and each step says how long its batches
were. Where the config evaluates inside training ($AUTOBATCH_TRIAL_EVAL=1; the probe's copy
evaluates after the last step), the trial ends after that evaluation's first batches, with
{"eval_batches": N} said. Before it ends, a trial rehearses a checkpoint: the model's and the
optimizer's state serialized as torch.save does, into nothing, with {"saved_bytes": N} and the
peak said (a gathered state dict, a copy per tensor). Standard library only; torch is touched
only once the program itself imports it.
"""

import atexit
import gc
import importlib.abc
import importlib.util
import itertools
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


def _framework_bytes(cuda, jax_figure):
    """A figure the framework keeps of its device memory: cuda(torch, device)'s largest over
    CUDA's devices when PyTorch used a GPU, else JAX's (_jax.<jax_figure>() where it keeps
    one); None where neither does."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return max(cuda(torch, i) for i in range(torch.cuda.device_count()))
    if "jax" in sys.modules:
        from autobatch import _jax

        return getattr(_jax, jax_figure)() or None
    return None


def peak_bytes():
    """The framework's peak: CUDA's reserved memory when PyTorch used a GPU, JAX's own
    per-device peak when it keeps one, else the RSS."""
    peak = _framework_bytes(lambda torch, i: torch.cuda.max_memory_reserved(i), "peak_bytes")
    if peak is not None:
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def held_bytes():
    """What the process holds now, between two steps, and whether the figure is exact:
    CUDA's live tensors when PyTorch used a GPU (not the allocator's cache), JAX's bytes in
    use (both exact: any rise is something kept), else the resident set (not exact: it moves
    by pages and arenas). A step that leaves more held than the one before keeps something of
    itself (a loss with its graph, outputs collected on the device): the run's later steps
    hold more than the trial's. (0, False) when unknown."""
    held = _framework_bytes(lambda torch, i: torch.cuda.memory_allocated(i), "held_bytes")
    if held is not None:
        return held, True
    _trim()
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize(), False
    except (OSError, ValueError, IndexError):
        return 0, False


_malloc_trim = []  # glibc's malloc_trim, once looked up (none: another libc)


def _trim():
    """glibc hands back the free memory it keeps (malloc_trim(0), every arena): the resident
    set is then what live objects hold, as a GPU allocator's live bytes are, not the heap's
    history (without it plain_torch.py's held set rose by 62 MiB at two steps running at
    batch 50, then fell: a growth that was none)."""
    if not _malloc_trim:
        try:
            import ctypes

            _malloc_trim.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError, ImportError):
            _malloc_trim.append(None)
    if _malloc_trim[0] is not None:
        _malloc_trim[0](0)


def alloc_retries():
    """PyTorch's count of allocations it retried after freeing its cache (a CUDA device
    that ran out); 0 on the CPU or before CUDA is used."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return 0
    return max(torch.cuda.memory_stats(i).get("num_alloc_retries", 0)
               for i in range(torch.cuda.device_count()))


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
        self.length = 0  # the longest batch of the step under way (0: not seen)
        self.armed = True  # the step's first module call is the model's: its inputs' length
        self.from_loader = False  # a DataLoader's batches say it: the module call need not
        # the config evaluates inside training: after the last step, its evaluation is
        # awaited (EVAL_BATCHES of it), so that the peak holds it beside the optimizer's state
        self.eval_wanted = os.environ.get("AUTOBATCH_TRIAL_EVAL") == "1"
        self.eval_batches = None  # None: not awaited yet; then the batches evaluated
        self.optimizer = None  # the one whose steps are counted
        self.optimizers = []  # every one that stepped (a GAN's two): what a checkpoint saves

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
        held, exact = held_bytes()
        record = {"step_s": now - self.last, "samples": samples or self.batch,
                  "peak_bytes": peak_bytes(), "held_bytes": held}
        if exact:  # a device's live bytes: a rise under the resident set's noise counts
            record["held_exact"] = True
        if self.length:
            record["length"] = self.length
        retries = alloc_retries()
        if retries:  # memory that tight is an out-of-memory waiting to happen
            record["alloc_retries"] = retries
        self.write(record)
        self.last = now
        self.length = 0
        self.armed = True
        self.count += 1
        return self.count >= self.steps + 1

    def evaluated(self):
        """The evaluation after the last step ran (or a training step came instead)."""
        self.write({"eval_batches": self.eval_batches or 0, "peak_bytes": peak_bytes()})

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


class _Discard:
    """Where the rehearsed checkpoint goes: its bytes counted, never kept."""

    def __init__(self):
        self.bytes = 0

    def write(self, data):
        self.bytes += len(data)
        return len(data)

    def flush(self):
        pass


def _trained_models(torch, optimizer):
    """The outermost modules holding the parameters the optimizer trains (the model, its
    DDP or FSDP wrapper included), and those it trains outside any module: what a
    checkpoint of the run saves."""
    params = [p for g in getattr(optimizer, "param_groups", []) for p in g["params"]]
    trained = {id(p) for p in params}
    modules = [o for o in gc.get_objects() if isinstance(o, torch.nn.Module)]
    inner = {id(c) for m in modules for c in m.children()}
    roots = [m for m in modules if id(m) not in inner and
             any(id(p) in trained for p in m.parameters())]
    held = {id(p) for m in roots for p in m.parameters()}
    return roots, [p for p in params if id(p) not in held]  # and tensors trained bare


def _rehearse_save(rec):
    """A checkpoint of the run, rehearsed: its memory is in the trial's peak. An
    out-of-memory here is the trial's, as the run's save would be."""
    torch = sys.modules.get("torch")
    optimizers = rec.optimizers or ([rec.optimizer] if rec.optimizer is not None else [])
    if torch is None or not optimizers:
        return
    sink = _Discard()
    rec.write({"saving": True})  # an end from here on (the probe's kill too) is the save's
    try:
        roots, bare, seen = [], [], set()
        for optimizer in optimizers:  # a GAN's generator and discriminator, each once
            for held, found in zip((roots, bare), _trained_models(torch, optimizer)):
                held.extend(t for t in found if id(t) not in seen)
                seen.update(id(t) for t in found)
        state = {"model": [m.state_dict() for m in roots], "tensors": bare,
                 "optimizer": [o.state_dict() for o in optimizers]}
        torch.save(state, sink)
        del state
    except Exception as error:  # not a save this process can make: said by its peak alone
        if is_oom(error):
            rec.oom()
            _flush_and_exit(1)
        return
    rec.write({"saved_bytes": sink.bytes, "peak_bytes": peak_bytes()})


def _flush_and_exit(status):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(status)


def _end_trial():
    """The trial has its evidence: end now, as the probe would, without training on."""
    rec = recorder()
    _rehearse_save(rec)
    rec.finish()
    _flush_and_exit(0)


EVAL_BATCHES = 2  # the longest first (the eval DataLoader's too): what its peak needs


def _await_eval(rec, optimizer):
    """After the trial's last step, in a program that evaluates inside training: each
    outermost forward pass of the model (a module holding parameters the optimizer trains;
    not a frozen encoder, a teacher or a metric) without gradients or in eval mode is an
    eval batch; after EVAL_BATCHES of them the trial ends. Only in this process's main
    code: a DataLoader worker forked later inherits the hooks, not the trial."""
    torch = sys.modules.get("torch")
    hooks = getattr(getattr(getattr(torch, "nn", None), "modules", None), "module", None)
    if not hasattr(hooks, "register_module_forward_hook"):
        return False
    trained = {id(p) for g in getattr(optimizer, "param_groups", []) for p in g["params"]}
    state = {"depth": 0, "eval": False, "models": {}}

    def is_model(module):
        known = state["models"].get(id(module))
        if known is None:
            known = any(id(p) in trained for p in module.parameters())
            state["models"][id(module)] = known
        return known

    def ours():
        info = getattr(getattr(torch.utils, "data", None), "get_worker_info", None)
        return os.getpid() == rec.pid and (info is None or info() is None)

    def pre(module, args):
        if not ours():
            return
        if state["depth"] == 0:
            state["eval"] = (not torch.is_grad_enabled() or not module.training) and \
                is_model(module)
        state["depth"] += 1

    def post(module, args, output):
        if not ours():
            return
        state["depth"] = max(0, state["depth"] - 1)
        if state["depth"] == 0 and state["eval"]:
            rec.eval_batches += 1
            if rec.eval_batches >= EVAL_BATCHES:
                rec.evaluated()
                _end_trial()

    hooks.register_module_forward_pre_hook(pre)
    hooks.register_module_forward_hook(post)
    rec.eval_batches = 0
    rec.write({"eval_awaited": True})  # the probe waits for it: no fit without what it said
    atexit.register(rec.evaluated)  # a program that ends on its own: what it evaluated
    return True


def _on_step(optimizer=None):
    global _program_speaks
    if _program_speaks:
        return
    rec = recorder()
    rec.optimizer = optimizer
    if rec.foreign():  # the program's own protocol lines win
        _program_speaks = True
        return
    if rec.eval_batches is not None:  # training went on: its evaluation came, or never will
        rec.evaluated()
        _end_trial()
    if rec.step() and not (rec.eval_wanted and _await_eval(rec, optimizer)):
        _end_trial()


class _StepCounter:
    """Counts the training steps of the first optimizer that steps (a GAN's second optimizer,
    or a wrapper's inner one, is not a step of its own): one per optimizer update, so
    gradient accumulation counts once per update."""

    def __init__(self):
        self.depth = 0
        self.primary = None

    def pre(self, optimizer, args=None, kwargs=None):
        if _hold is not None:
            hold()
        self.depth += 1

    def post(self, optimizer, args=None, kwargs=None):
        self.depth -= 1
        if self.depth:
            return
        stepped = recorder().optimizers
        if all(o is not optimizer for o in stepped):
            stepped.append(optimizer)
        if self.primary is None:
            self.primary = id(optimizer)
        if id(optimizer) == self.primary:
            _on_step(optimizer)

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
    """Counts the program's optimizer steps from now on, and sees its batches."""
    if _hold is not None:
        _hold_before_cuda(torch)
    counter = _StepCounter()
    instrument_data(torch)
    optimizer = sys.modules.get("torch.optim.optimizer")
    if optimizer is not None and hasattr(optimizer, "register_optimizer_step_post_hook"):
        optimizer.register_optimizer_step_pre_hook(counter.pre)
        optimizer.register_optimizer_step_post_hook(counter.post)
    else:
        _wrap_instance_step(counter, torch)


def _instrument_jax(jax):
    from autobatch import _jax

    _jax.instrument_jax(jax, _on_step)


def _instrument_optax(optax):
    from autobatch import _jax

    _jax.instrument_optax(optax)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Instruments a framework right after the program imports it (INSTRUMENTED: its module's
    name and what is done to it), and never imports one itself. A name is done with once its
    module has run, not when something only asks whether it is installed
    (importlib.util.find_spec, as Transformers asks of torch, jax and flax)."""

    def __init__(self, instrumented):
        self.waiting = dict(instrumented)
        self.searching = threading.local()  # the name whose search must not come back here

    def find_spec(self, name, path, target=None):
        then = self.waiting.get(name)
        if then is None or getattr(self.searching, "name", None) == name:
            return None
        self.searching.name = name
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.searching.name = None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_instrument(module):
            exec_module(module)
            if self.waiting.pop(name, None) is not None:
                then(module)
            if not self.waiting and self in sys.meta_path:
                try:
                    sys.meta_path.remove(self)
                except ValueError:  # another thread's import removed it first
                    pass

        spec.loader.exec_module = exec_and_instrument
        return spec


# ---- a trial started ahead of its turn --------------------------------------------------
# The probe starts each next trial while the one before it runs, so that its interpreter and
# imports (most of a short trial) overlap that trial. Its batch is not known yet: it waits
# here ($AUTOBATCH_TRIAL_HOLD names the file that releases it, holding the batch) before the
# program opens its config copy (which does not exist until then), imports JAX, TensorFlow or
# a launcher (HOLD_IMPORTS), initializes CUDA, calls a module or steps.

_hold = None  # the file that releases this process; None once released, or never held
HOLD_POLL_S = 0.005
# JAX and TensorFlow take the GPU as they start; a launcher (torchrun, accelerate launch,
# DeepSpeed's) opens its rendezvous port and starts workers before any config is read: a
# second one beside the running trial's could take its port or join its rendezvous
HOLD_IMPORTS = ("jax", "jaxlib", "tensorflow", "torch.distributed.run",
                "torch.distributed.launch", "torch.distributed.elastic", "accelerate.commands",
                "deepspeed.launcher")


def hold():
    """Waits for the batch, once; from then on the process is a trial like any other."""
    global _hold
    path, _hold = _hold, None
    if path is None:
        return
    while True:
        try:
            with open(path) as f:
                batch = f.read().strip()
            break
        except FileNotFoundError:
            time.sleep(HOLD_POLL_S)
    os.environ.pop("AUTOBATCH_TRIAL_HOLD", None)  # its children start released
    os.environ["AUTOBATCH_BATCH_SIZE"] = batch
    if _recorder is not None and batch.isdigit():
        _recorder.batch = int(batch)
        _recorder.start()


def _held_import(name):
    return any(name == m or name.startswith(m + ".") for m in HOLD_IMPORTS)


class _HoldImport(importlib.abc.MetaPathFinder):
    """Waits before what takes the GPU or a port as it starts is imported (HOLD_IMPORTS)."""

    def find_spec(self, name, path, target=None):
        if _hold is not None and _held_import(name):
            hold()
        return None


def _hold_before_cuda(torch):
    """PyTorch initializes CUDA through torch.cuda._lazy_init, looked up on the module (from
    C++ too): waiting there keeps a trial started ahead off the GPU."""
    cuda = getattr(torch, "cuda", None)
    lazy_init = getattr(cuda, "_lazy_init", None)
    if lazy_init is None:
        return

    def held_lazy_init(*args, **kwargs):
        if _hold is not None:
            hold()
        return lazy_init(*args, **kwargs)

    cuda._lazy_init = held_lazy_init


def _start_held(path):
    """Lets the program start, and waits where the batch or the device is first needed."""
    global _hold
    _hold = path
    config = os.environ.get("AUTOBATCH_CONFIG")
    if not config or not hasattr(sys, "addaudithook"):
        hold()  # nothing to wait before that can be seen: wait now
        return
    target = os.path.abspath(config)

    def audit(event, args):
        if _hold is None or event != "open" or not args or \
                not isinstance(args[0], (str, bytes)):
            return
        try:
            if os.path.abspath(os.fsdecode(args[0])) != target:
                return
        except (TypeError, ValueError):
            return
        hold()

    sys.addaudithook(audit)
    sys.meta_path.insert(0, _HoldImport())


# ---- the run's longest batch -------------------------------------------------------------
# A trainer that pads each batch to its own longest sample (dynamic padding) needs the most
# memory at the batch of the dataset's longest samples, which a shuffled epoch draws at some
# step nobody knows. In a trial the DataLoader draws them first: the batch size is measured
# at the run's worst batch, not at the first batches (issue 41: 27% over the limit).

SCAN_S = 20.0  # reading every sample's length; past this, the longest of those read
FIXED_AFTER = 256  # samples read at random, all of one shape: a dataset of fixed shapes
KEY_SAMPLES = 16  # samples read for the name of a scan another trial of the probe left


def _fields(sample):
    """(name, value) of a sample's or a batch's parts: a dict's (or a BatchEncoding's) items,
    a tuple's or list's items, or the thing itself (name None)."""
    if isinstance(sample, dict) or hasattr(sample, "keys") and hasattr(sample, "values"):
        return list(sample.items())
    if isinstance(sample, (tuple, list)) and \
            any(hasattr(v, "shape") or isinstance(v, (tuple, list, dict)) for v in sample[:16]):
        return list(enumerate(sample))  # parts: (label, tokens) too; else a list of tokens
    return [(None, sample)]


def sample_sizes(sample):
    """Every size of one sample: {(part, dim): n} over its tensors, arrays and lists (a
    list's length as dim 0); None when it has none. Dynamic padding pads each (part, dim)
    that varies across samples to the batch's longest: several can (a seq2seq pair's source
    and target, an image's height and width), and a fixed one (80 mel bins before an audio
    clip's frames, a multi-hot label) is no length."""
    sizes = {}
    for name, v in _fields(sample):
        shape = getattr(v, "shape", None)
        if shape is not None:
            for d, n in enumerate(shape):
                sizes[(name, d)] = int(n)
        elif isinstance(v, (list, tuple)):
            sizes[(name, 0)] = len(v)
    return sizes or None


def batch_length(batch, coords=None):
    """A collated batch's padded length: with coords (the (part, dim)s that vary across the
    dataset's samples), the longest of those in the batch (a sample's dim d is the batch's
    d + 1); else, or when the batch has none of them, the largest second dimension of its
    tensors of two or more dimensions (batch, length, ...); 0 when it has none."""
    parts = dict(_fields(batch))
    best = 0
    for name, d in coords or ():
        shape = getattr(parts.get(name), "shape", None)
        if shape is not None and len(shape) > d + 1:
            best = max(best, int(shape[d + 1]))
    if best:
        return best
    for v in parts.values():
        shape = getattr(v, "shape", None)
        if shape is not None and len(shape) >= 2:
            best = max(best, int(shape[1]))
    return best


class Scan:
    """What a dataset's samples say of their lengths: coords, the (part, dim)s that vary;
    ranked, for each, the indices of its longest samples (RANKED of them), longest first;
    longest, the longest size along any; read of total samples (of those the loader's
    sampler can draw: a SubsetRandomSampler's); fixed, the largest first dimension of any
    part, a batch's length where no size varies (for the report)."""

    def __init__(self, coords, ranked, longest, read, total, fixed):
        self.coords, self.ranked, self.longest = coords, ranked, longest
        self.read, self.total, self.fixed = read, total, fixed

    def order(self):
        """The read samples for the worst batch first: each varying coordinate's longest in
        turn (a batch of them is padded to every coordinate's longest at once), then on."""
        seen, out = set(), []
        for row in itertools.zip_longest(*self.ranked):
            for i in row:
                if i is not None and i not in seen:
                    seen.add(i)
                    out.append(i)
        return out


RANKED = 1 << 14  # a coordinate's longest samples kept: what any batch size's worst needs
# A sample's one-dimensional parts end to end: a collator may join them (a prompt and its
# response, tokenized apart, concatenated and padded as one sequence: an SFT collator's way),
# and the batch is then padded to the longest such sum, which no one part's ranking finds
# (helper's run: parts of 8-256 tokens, the trial measured 484 and the epoch reached 506 at
# a batch 5% over its limit). Ranked as a coordinate, never a length on its own: a batch
# padded part by part (a seq2seq pair) is no longer than its longest part.
JOINED = ("+joined", 0)


def _random_indices(candidates, rng):
    """The candidates in a random order, lazily and in constant memory: a dataset of
    millions is neither listed nor shuffled before its first sample is read (past 2^14, a
    multiplicative permutation of the positions, a fair enough order for a sample; a list
    of a million indices, shuffled, added 40 MB to a trial's peak and moved it from run to
    run, where a dataset of fixed shapes needs 256 samples read)."""
    import math

    total = len(candidates)
    if total <= 1 << 14:
        order = list(range(total))
        rng.shuffle(order)
        for k in order:
            yield candidates[k]
        return
    step, start = int(total * 0.6180339887) | 1, rng.randrange(total)
    while math.gcd(step, total) != 1:
        step += 2
    for k in range(total):
        yield candidates[(start + k * step) % total]


class _Sizes:
    """A scan's running account: each (part, dim)'s smallest and largest size, how many
    samples had it, and its RANKED longest samples (a heap); whether every sample so far
    had the first one's shape."""

    def __init__(self):
        self.low, self.high, self.count, self.top = {}, {}, {}, {}
        self.first, self.one_shape, self.read = None, True, 0

    def add(self, i, sizes):
        import heapq

        ones = [n for (name, d), n in sizes.items() if d == 0 and (name, 1) not in sizes]
        if len(ones) >= 2:
            sizes = dict(sizes)
            sizes[JOINED] = sum(ones)
        if self.first is None:
            self.first = sizes
        self.one_shape = self.one_shape and sizes == self.first
        self.read += 1
        for k, n in sizes.items():
            self.low[k] = min(self.low.get(k, n), n)
            self.high[k] = max(self.high.get(k, n), n)
            self.count[k] = self.count.get(k, 0) + 1
            top = self.top.setdefault(k, [])
            if len(top) < RANKED:
                heapq.heappush(top, (n, i))
            elif n > top[0][0]:
                heapq.heapreplace(top, (n, i))

    def scan(self, total):
        # a size a sample lacks is 0 there: it varies too
        coords = sorted((k for k in self.high if self.count[k] < self.read or
                         self.low[k] != self.high[k]), key=repr)
        ranked = [[i for _, i in sorted(self.top[k], reverse=True)] for k in coords]
        return Scan(coords, ranked, max((self.high[k] for k in coords if k != JOINED), default=0),
                    self.read, total, max((n for k, n in self.high.items()
                                           if k[1] == 0 and k != JOINED), default=0))


def scan_lengths(dataset, candidates=None, budget_s=SCAN_S):
    """The samples' sizes, read in a random order so that a scan cut short by budget_s is a
    fair sample: a Scan, or None when a sample has no sizes. After FIXED_AFTER samples of one
    shape, the dataset is taken to be of fixed shapes (padded to a maximum length, or
    images) and the scan stops. candidates: the indices the run can draw (all)."""
    import random

    if candidates is None:
        candidates = range(len(dataset))
    end = time.perf_counter() + budget_s
    seen = _Sizes()
    for i in _random_indices(candidates, random.Random(0)):
        if seen.read and time.perf_counter() > end:
            break
        sizes = sample_sizes(dataset[i])
        if sizes is None:
            return None
        seen.add(i, sizes)
        if seen.read == FIXED_AFTER and seen.one_shape:
            break
    return seen.scan(len(candidates))


def _scan_cache(dataset, total):
    """Where the probe's earlier trials left this dataset's scan: beside their own trial
    directories, in the probe's work directory (the user's own); None without one."""
    import hashlib

    report = os.environ.get("AUTOBATCH_TRIAL_REPORT")
    if not report:
        return None
    head = [sorted((sample_sizes(dataset[i]) or {}).items(), key=repr)
            for i in range(min(len(dataset), KEY_SAMPLES))]
    key = "%s.%s %d %d %s" % (type(dataset).__module__, type(dataset).__qualname__,
                              len(dataset), total, head)
    name = "sizes-%s.json" % hashlib.sha256(key.encode()).hexdigest()[:16]
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(report))), name)


def cached_scan(dataset, candidates=None):
    """scan_lengths, read once per probe: the next trial of the same dataset reads the file."""
    total = len(candidates) if candidates is not None else len(dataset)
    path = _scan_cache(dataset, total)
    try:
        with open(path) as f:
            saved = json.load(f)
        return Scan([tuple(c) for c in saved["coords"]], saved["ranked"], saved["longest"],
                    saved["read"], saved["total"], saved["fixed"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    scan = scan_lengths(dataset, candidates)
    if path and scan is not None:
        try:
            tmp = "%s.%d" % (path, os.getpid())
            with open(tmp, "w") as f:
                json.dump({"coords": scan.coords, "ranked": scan.ranked,
                           "longest": scan.longest, "read": scan.read, "total": scan.total,
                           "fixed": scan.fixed}, f)
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError):  # a part named by something not JSON
            pass
    return scan


class LongestFirst:
    """A trial's batches: the worst batch (Scan.order's first batch_size samples) for each
    of the trial's first `repeat` batches (every measured step then has it, with the
    optimizer's state already held), then the rest of the order, then the samples not read;
    as many batches as the loader would give (its len is the loader's). After an endless
    sampler's worst batches, its own."""

    def __init__(self, inner, order, candidates, batch_size, repeat):
        self.inner = inner
        self.order = order
        self.candidates = candidates
        self.batch_size = batch_size
        self.repeat = repeat
        self._read = None  # the order's indices as a set, once: the rest skips them

    def __len__(self):
        return len(self.inner)

    def __getattr__(self, name):  # what a framework asks of its own sampler (set_epoch)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _indices(self):
        yield from self.order
        if len(self.order) < len(self.candidates):
            if self._read is None:
                self._read = set(self.order)
            yield from (i for i in self.candidates if i not in self._read)

    def __iter__(self):
        worst = itertools.repeat(self.order[:self.batch_size], self.repeat)
        try:
            count = len(self.inner)
        except TypeError:  # an endless sampler: the worst batches, then its own
            return itertools.chain(worst, iter(self.inner))
        return itertools.islice(itertools.chain(worst, self._batches()), count)

    def _batches(self):
        rest = itertools.islice(self._indices(), self.batch_size, None)  # past the worst
        while True:
            batch = list(itertools.islice(rest, self.batch_size))
            if not batch:
                return
            yield batch


def pad_batch(batch, width):
    """A collated batch padded to width along its length (the second dimension of each
    tensor of two or more whose length is the batch's): labels with -100 (what losses
    ignore), the rest with 0 (pad token, masked out). The same container back."""
    import torch

    length = batch_length(batch)
    if not length or length >= width:
        return batch

    def pad(key, v):
        shape = getattr(v, "shape", None)
        if shape is None or len(shape) < 2 or int(shape[1]) != length:
            return v
        fill = -100 if str(key).startswith("label") and not v.is_floating_point() else 0
        return torch.nn.functional.pad(v, (0, 0) * (len(shape) - 2) + (0, width - length),
                                       value=fill)

    if hasattr(batch, "keys") and hasattr(batch, "__setitem__"):
        for k in list(batch.keys()):
            batch[k] = pad(k, batch[k])
        return batch
    if isinstance(batch, (tuple, list)):
        names = getattr(batch, "_fields", range(len(batch)))  # a namedtuple's: labels
        padded = [pad(k, v) for k, v in zip(names, batch)]
        return type(batch)(*padded) if hasattr(batch, "_fields") else type(batch)(padded)
    return pad(0, batch)


def _pad_stream(loader):
    """A loader whose samples cannot be read ahead (a stream): with the config's maximum
    length, its batches are padded to it, the longest any batch of the run can be; said
    once, as the run's longest."""
    width = positive_int("AUTOBATCH_TRIAL_PAD_TO")
    rec = recorder()
    if not width:
        return
    object.__setattr__(loader, "_autobatch_pad_to", width)
    if rec.eval_batches is None:
        rec.write({"lengths": {"run_longest": width, "read": 0, "samples": 0, "varies": True,
                               "longest_first": False, "padded_to": width}})


class _Indices:
    """A sampler's own indices (a list, a tensor) read as ints, not copied."""

    def __init__(self, indices):
        self.indices = indices

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, k):
        return int(self.indices[k])

    def __iter__(self):
        return (int(i) for i in self.indices)


def _draws(sampler, total):
    """The indices a loader's sampler can draw: a subset's (SubsetRandomSampler, a train/val
    split), else every index (None)."""
    indices = getattr(getattr(sampler, "sampler", None), "indices", None)
    try:
        if indices is not None and len(indices) < total:
            return _Indices(indices)
    except (TypeError, ValueError):
        pass
    return None


def _batch_size(loader, sampler):
    """The loader's batch size; of a batch_sampler of its own, its largest batch, or of an
    endless one (no len: its batches never end), its first."""
    if loader.batch_size:
        return loader.batch_size
    try:
        count = len(sampler)
    except TypeError:
        return len(next(iter(sampler)))
    return max(len(b) for b in itertools.islice(sampler, count))


def _longest_first(loader):
    """Has a DataLoader over a sized dataset draw its worst batch first (Scan.order), and
    says once what the run's longest is. Loaders of fixed shapes, without automatic
    batching or with an endless sampler are left as they are; of an IterableDataset, padded
    to the config's maximum (_pad_stream). Each batch's length is then read along the
    coordinates that vary (batch_length)."""
    rec = recorder()
    sampler = getattr(loader, "batch_sampler", None)
    dataset = getattr(loader, "dataset", None)
    if isinstance(dataset, _iterable_dataset()):
        return _pad_stream(loader)
    if sampler is None or dataset is None or not hasattr(dataset, "__getitem__"):
        return
    try:
        size = _batch_size(loader, sampler)
        candidates = _draws(sampler, len(dataset))
        scan = cached_scan(dataset, candidates)
    except Exception:  # a dataset without len, or one that fails when read: as it is
        return
    if not scan:
        return
    varies = bool(scan.coords)
    object.__setattr__(loader, "_autobatch_coords", scan.coords)
    if rec.eval_batches is None and _training():  # the training data's, not an eval's
        rec.write({"lengths": {"run_longest": scan.longest if varies else scan.fixed,
                               "read": scan.read,
                               "samples": scan.total, "varies": varies,
                               "longest_first": varies}})
    if varies:
        # a step of several micro-batches (gradient accumulation) still gets only the worst
        repeat = 2 * (rec.steps + 1)
        everything = candidates if candidates is not None else range(len(dataset))
        object.__setattr__(loader, "batch_sampler",
                           LongestFirst(sampler, scan.order(), everything, size, repeat))


def _training():
    """Whether the batches now drawn are for training: an evaluation (before training, or
    inside it) runs without gradients."""
    torch = sys.modules.get("torch")
    return torch is None or torch.is_grad_enabled()


def _iterable_dataset():
    import torch

    return torch.utils.data.IterableDataset


def instrument_data(torch):
    """In a trial: DataLoaders draw their longest samples first; each batch's length is
    noted for its step."""
    try:
        dataloader = torch.utils.data.dataloader
    except AttributeError:
        return
    loader_iter = dataloader.DataLoader.__iter__
    next_batch = dataloader._BaseDataLoaderIter.__next__

    def __iter__(self):
        if not self.__dict__.get("_autobatch_seen"):
            object.__setattr__(self, "_autobatch_seen", True)
            _longest_first(self)
        it = loader_iter(self)
        for name in ("_autobatch_pad_to", "_autobatch_coords"):
            if self.__dict__.get(name):
                setattr(it, name, self.__dict__[name])
        return it

    handle = []  # the module hook, removed once a DataLoader gives the lengths

    def __next__(self):
        batch = next_batch(self)
        rec = recorder()
        try:
            if getattr(self, "_autobatch_pad_to", 0):
                batch = pad_batch(batch, self._autobatch_pad_to)
            if _training():  # an evaluation's batches are not the step's
                coords = getattr(self, "_autobatch_coords", None)
                rec.length = max(rec.length, batch_length(batch, coords))
                rec.from_loader = rec.from_loader or rec.length > 0
        except Exception:
            pass
        if rec.from_loader and handle:  # no hook on every module call (torch.compile)
            handle.pop().remove()
        return batch

    def first_call(module, args):
        """A program that builds its batches by hand: the first module called in a step
        is its model, whose inputs give the batch's length."""
        if _hold is not None:
            hold()
        rec = recorder()
        if rec.armed and not rec.from_loader and _training():
            rec.armed = False
            try:
                rec.length = max(rec.length, batch_length(args))
            except Exception:
                pass

    dataloader.DataLoader.__iter__ = __iter__
    dataloader._BaseDataLoaderIter.__next__ = __next__
    hooks = getattr(getattr(torch.nn, "modules", None), "module", None)
    if hasattr(hooks, "register_module_forward_pre_hook"):
        handle.append(hooks.register_module_forward_pre_hook(first_call))


def install():
    """Called by the probe's sitecustomize in a trial: steps, OOM and the end of the trial."""
    global _installed
    if _installed or not in_trial() or not os.environ.get("AUTOBATCH_TRIAL_REPORT"):
        return
    _installed = True
    if os.environ.get("AUTOBATCH_TRIAL_HOLD"):
        _start_held(os.environ["AUTOBATCH_TRIAL_HOLD"])
    _oom_excepthooks()
    if os.environ.get("AUTOBATCH_TRIAL_OWN_STEPS") == "1":
        claim()  # the program's own per-step lines are the trial's (MaxText's metrics file)
    waiting = {}
    for name, then in (("torch", instrument), ("jax", _instrument_jax),
                       ("optax", _instrument_optax)):
        if name in sys.modules:
            then(sys.modules[name])
        else:
            waiting[name] = then
    if waiting:
        sys.meta_path.insert(0, _AfterImport(waiting))
