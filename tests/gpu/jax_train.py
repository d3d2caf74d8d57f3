"""jax_train.py - a GPT-2-shaped transformer trained in plain JAX, knowing nothing of autobatch.

The JAX program of tests/gpu/device-check's jax stage: no Flax or optax (the lease's machine
has JAX alone), so its AdamW is written out; its layers are one lax.scan over stacked
parameters (a compile of seconds, not of 12 unrolled blocks); its training step is one
jax.jit'd function that takes jax.value_and_grad, as most JAX loops are written. It reads its
batch from its JSON config (--config FILE: batch_size, size, steps), as the probe edits it,
and prints one JSON line at its end: {"batch_size", "seconds", "peak_reserved_bytes" (JAX's
own peak_bytes_in_use), "pool_bytes" (XLA's pool), "peak_process_bytes" (NVML's view of the
process, 0 without NVML), "total_bytes"}. Out of memory, XLA's RESOURCE_EXHAUSTED error ends it uncaught.
"""

import functools
import json
import os
import sys
import time

import jax
import jax.numpy as jnp

SIZES = {  # layers, width, heads, sequence, vocabulary
    "124m": (12, 768, 12, 1024, 50257),
    "tiny": (2, 64, 2, 64, 512),
}


def init(key, size):
    layers, d, _, seq, vocab = SIZES[size]
    k = jax.random.split(key, 6)

    def normal(key, shape, scale=0.02):
        return scale * jax.random.normal(key, shape, jnp.float32)

    return {
        "wte": normal(k[0], (vocab, d)),
        "wpe": normal(k[1], (seq, d), 0.01),
        "blocks": {  # each leaf stacked over the layers: lax.scan walks them
            "ln1": jnp.ones((layers, d)), "ln2": jnp.ones((layers, d)),
            "qkv": normal(k[2], (layers, d, 3 * d)),
            "proj": normal(k[3], (layers, d, d)),
            "fc": normal(k[4], (layers, d, 4 * d)),
            "out": normal(k[5], (layers, 4 * d, d)),
        },
        "lnf": jnp.ones((d,)),
    }


def norm(x, g):
    x = x - x.mean(-1, keepdims=True)
    return g * x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-5)


def block(heads, x, p):
    b, s, d = x.shape
    h = norm(x, p["ln1"]).astype(jnp.bfloat16)
    q, k, v = jnp.split(h @ p["qkv"].astype(jnp.bfloat16), 3, axis=-1)
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in (q, k, v))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // heads).astype(jnp.bfloat16)
    mask = jnp.tril(jnp.ones((s, s), bool))
    att = jax.nn.softmax(jnp.where(mask, scores, -1e9).astype(jnp.float32), axis=-1)
    y = jnp.einsum("bhqk,bkhd->bqhd", att.astype(jnp.bfloat16), v).reshape(b, s, d)
    x = x + (y @ p["proj"].astype(jnp.bfloat16)).astype(jnp.float32)
    h = norm(x, p["ln2"]).astype(jnp.bfloat16)
    h = jax.nn.gelu(h @ p["fc"].astype(jnp.bfloat16))
    return x + (h @ p["out"].astype(jnp.bfloat16)).astype(jnp.float32), None


def loss_fn(params, tokens, heads):
    x = params["wte"][tokens[:, :-1]] + params["wpe"][: tokens.shape[1] - 1]
    x, _ = jax.lax.scan(lambda c, p: block(heads, c, p), x, params["blocks"])
    logits = norm(x, params["lnf"]).astype(jnp.bfloat16) @ params["wte"].T.astype(jnp.bfloat16)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1).mean()


def adamw(params, grads, state, lr=3e-4, b1=0.9, b2=0.95, wd=0.1, eps=1e-8):
    t = state["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    params = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / c1 / (jnp.sqrt(v / c2) + eps) + wd * p), params, m, v)
    return params, {"t": t, "m": m, "v": v}


def nvml_bytes():
    """What NVML says this process holds on the GPU and the GPU's memory, or zeros."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        total = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if p.pid == os.getpid():
                return int(p.usedGpuMemory or 0), total
        return 0, total
    except Exception:  # no NVML, or no per-process accounting
        return 0, 0


def main():
    path = sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else None
    cfg = json.load(open(path)) if path else {}
    batch, size = int(cfg.get("batch_size", 8)), cfg.get("size", "124m")
    heads, seq, vocab = SIZES[size][2], SIZES[size][3], SIZES[size][4]
    params = init(jax.random.PRNGKey(0), size)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = {"t": jnp.zeros((), jnp.float32), "m": zeros, "v": jax.tree_util.tree_map(jnp.zeros_like, params)}

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def train_step(params, state, tokens):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, heads)
        params, state = adamw(params, grads, state)
        return params, state, loss

    key = jax.random.PRNGKey(1)
    t0 = time.perf_counter()
    for step in range(int(cfg.get("steps", 20))):
        key, sub = jax.random.split(key)
        tokens = jax.random.randint(sub, (batch, seq + 1), 0, vocab)
        params, state, loss = train_step(params, state, tokens)
        if step % 5 == 0:
            print(f"step {step} loss {float(loss):.3f}", flush=True)
    jax.block_until_ready(params)
    out = {"batch_size": batch, "seconds": round(time.perf_counter() - t0, 3)}
    stats = jax.local_devices()[0].memory_stats() or {}
    if stats:  # a GPU (JAX's CPU backend keeps none)
        held, total = nvml_bytes()
        out.update(peak_reserved_bytes=int(stats.get("peak_bytes_in_use", 0)),
                   pool_bytes=int(stats.get("bytes_limit", 0)), peak_process_bytes=held,
                   total_bytes=total or int(stats.get("bytes_limit", 0)))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
