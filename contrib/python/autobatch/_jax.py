"""autobatch._jax - the step hook for a JAX program in a trial, with no code change.

Owns what makes a JAX training step seen: a jitted (or pmapped) function that takes gradients
(jax.grad, jax.value_and_grad) or applies an optimizer's updates (optax.apply_updates) while it
is traced is the program's training step, and each call of it, its results ready, is one step.
JAX's own per-device peak (memory_stats()'s peak_bytes_in_use) is the trial's memory. Installed
by autobatch._hook as JAX is imported; JAX, optax and flax are touched only once the program
imports them. Not yet run against JAX itself here: tests/gpu/device-check's jax stage is.
"""

import functools
import sys
import threading
import types

_tracing = threading.local()  # the outermost counted function being called, in this thread
_called = False  # a jitted function was called: JAX's backend is in use, its statistics kept


def peak_bytes():
    """The largest peak_bytes_in_use of this process's devices; 0 where JAX keeps none (its
    CPU backend), is not loaded, or has run nothing jitted yet (asking would start its
    backend, a CUDA context on each GPU, in a program that only imported it)."""
    return _largest("peak_bytes_in_use")


def held_bytes():
    """The largest bytes_in_use of this process's devices now (0 as for peak_bytes)."""
    return _largest("bytes_in_use")


def _largest(stat):
    jax = sys.modules.get("jax")
    if jax is None or not _called:
        return 0
    try:
        stats = [device.memory_stats() or {} for device in jax.local_devices()]
    except Exception:  # a backend without statistics, or not started
        return 0
    return max([int(s.get(stat, 0)) for s in stats] or [0])


def _mark():
    """Called where gradients are taken or updates applied: the function traced now, if one
    is being called, is a training step."""
    current = getattr(_tracing, "current", None)
    if current is not None:
        current.trains = True


def _ready(jax, value):
    """Waits for a call's results: JAX returns before the device has finished."""
    try:
        jax.block_until_ready(value)
    except Exception:  # a result with leaves that are not arrays
        pass


class _Counted:
    """A jitted function, called as the program calls it. A call that traced (or had traced)
    gradients or an optimizer update is a step, counted once its results are ready; calls
    nested in another counted call are part of it."""

    def __init__(self, compiled, on_step):
        self._compiled = compiled
        self._on_step = on_step
        self.trains = False
        try:
            functools.update_wrapper(self, compiled)
        except (AttributeError, TypeError):
            pass

    def __call__(self, *args, **kwargs):
        global _called
        _called = True
        outer = getattr(_tracing, "current", None)
        if outer is not None:  # traced inside another: that one's step
            return self._compiled(*args, **kwargs)
        _tracing.current = self
        try:
            result = self._compiled(*args, **kwargs)
        finally:
            _tracing.current = None
        if self.trains:
            _ready(sys.modules.get("jax"), result)
            self._on_step()
        return result

    def __get__(self, obj, objtype=None):  # a jitted function as a method, bound as JAX's is
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __getattr__(self, name):  # lower, eval_shape, trace, clear_cache ...
        if name.startswith("__") or name in ("_compiled", "_on_step", "trains"):
            raise AttributeError(name)  # not set yet (a copy, an unpickling): no recursion
        return getattr(self._compiled, name)


def _counting(transform, on_step):
    """jax.jit or jax.pmap whose functions are counted; as a decorator with options too."""

    @functools.wraps(transform)
    def counted_transform(fun=None, *args, **kwargs):
        if fun is None:  # jax.jit(static_argnames=...) used as a decorator
            return lambda f: _Counted(transform(f, *args, **kwargs), on_step)
        return _Counted(transform(fun, *args, **kwargs), on_step)

    counted_transform._autobatch = True
    return counted_transform


def _marking(fn):
    """A function that marks the traced step when called (and, for jax.grad and
    value_and_grad, the function it returns, which the step calls)."""

    @functools.wraps(fn)
    def marked(*args, **kwargs):
        _mark()
        result = fn(*args, **kwargs)
        if callable(result):
            inner = result

            @functools.wraps(inner)
            def marked_result(*a, **kw):
                _mark()
                return inner(*a, **kw)

            return marked_result
        return result

    marked._autobatch = True
    return marked


def instrument_jax(jax, on_step):
    """Counts the program's jitted training steps from now on."""
    for name in ("jit", "pmap"):
        transform = getattr(jax, name, None)
        if transform is not None and not getattr(transform, "_autobatch", False):
            setattr(jax, name, _counting(transform, on_step))
    for name in ("grad", "value_and_grad"):
        fn = getattr(jax, name, None)
        if fn is not None and not getattr(fn, "_autobatch", False):
            setattr(jax, name, _marking(fn))


def instrument_optax(optax):
    """optax.apply_updates inside a traced function marks it (a loop that takes gradients
    through another library)."""
    fn = getattr(optax, "apply_updates", None)
    if fn is not None and not getattr(fn, "_autobatch", False):
        optax.apply_updates = _marking(fn)
