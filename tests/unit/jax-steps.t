#!/bin/sh
# jax-steps.t - autobatch._jax, the step hook's counting of a JAX program's training steps
# (TAP), as far as it goes without JAX, which no Debian release packages: its transforms
# wrap plain Python functions here, one that traces its function at its first call only, as
# jax.jit does. That a real JAX program's steps are seen is tests/gpu/device-check's jax stage.
. "$(dirname "$0")/tap.sh"
py=$(cd "$(dirname "$0")/../../contrib/python" && pwd)
PY=${PYTHON:-$(test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)}
echo "1..6"
if [ -z "$PY" ]; then
	for i in 1 2 3 4 5 6; do echo "ok $i # skip python3 is not installed"; done
	exit 0
fi
# jit_once: a transform that calls (traces) its function at the first call only, then
# returns what it returned then, as a compiled function does (named as jax.jit names it)
run() {
	PYTHONPATH=$py "$PY" -c "
from autobatch import _jax
steps = []
import functools
def jit_once(f, *args, **kwargs):
    seen = []
    @functools.wraps(f)
    def compiled(*a):
        if not seen:
            seen.append(f(*a))
        return seen[0]
    return compiled
jit = _jax._counting(jit_once, lambda: steps.append(1))
grad = _jax._marking(lambda f: (lambda *a: f(*a)))
$1"
}
# prints: what CODE prints is WANT
prints() {
	got=$(run "$2") && [ "$got" = "$1" ] || { echo "# want '$1', got '$got'" >&2; return 1; }
}
check "a jitted function that takes gradients as it is traced is a step at every call" prints 4 "
@jit
def train(x):
    return grad(lambda p: p * 2)(x)
for i in range(4):
    train(i)
print(len(steps))"
check "a jitted function that takes none (an evaluation) is no step" prints 0 "
@jit
def evaluate(x):
    return x + 1
for i in range(3):
    evaluate(i)
print(len(steps))"
check "a jitted function called inside a jitted step is part of that step" prints 3 "
inner = jit(lambda x: grad(lambda p: p)(x))
@jit
def train(x):
    return inner(x) + 1
for i in range(3):
    train(i)
print(len(steps))"
check "a gradient function made outside the step marks it when the step calls it" prints 2 "
loss_grad = grad(lambda p: p * p)
@jit
def train(x):
    return loss_grad(x)
train(1); train(2)
print(len(steps))"
check "jit with options as a decorator, and a jitted function as a method" prints "2 step" "
class Model:
    @jit(static_argnames=('n',))
    def step(self, x):
        return grad(lambda p: p)(x)
m = Model()
m.step(1); m.step(2)
print(len(steps), Model.step.__name__)"
# the hook's import finder (torch here, jax and optax alike): asking whether a framework is
# installed (importlib.util.find_spec, as Transformers asks of torch, jax and flax) does not
# use up its instrumentation; the import that follows is counted
if "$PY" -c 'import torch' 2>/dev/null; then
	dir=$(mktemp -d /tmp/autobatch-jax-steps.XXXXXX)
	AUTOBATCH_TRIAL=1 AUTOBATCH_TRIAL_STEPS=5 AUTOBATCH_TRIAL_REPORT=$dir/r.jsonl PYTHONPATH=$py "$PY" -c '
import importlib.util
assert importlib.util.find_spec("torch") is not None
import torch
m = torch.nn.Linear(2, 2)
o = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(3):
    m(torch.ones(1, 2)).sum().backward()
    o.step()'
	check "a framework asked for before its import is still instrumented by it" \
		test "$(grep -c step_s "$dir/r.jsonl" 2>/dev/null)" = 3
	rm -rf "$dir"
else
	echo "ok 6 # skip PyTorch is not installed for $PY"
fi
exit $failed
