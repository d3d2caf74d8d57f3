"""gpt2_train.py - a plain GPT-2 training script that knows nothing of autobatch.

Owns the program tests/gpu/device-check sizes: GPT-2 124M (or a tiny shape for CPU dry runs),
sequence 1024, bf16 autocast on CUDA, AdamW, random tokens, read from a JSON config
({"batch_size": N, "size": "124m"|"tiny", "steps": K, "compile": false}). It prints its own
peak at the end ("peak_reserved_bytes", "peak_process_bytes" from NVML where it can), as
training scripts log memory: device-check's plain runs read that line. Started as rank of a
world (WORLD_SIZE > 1, RANK, LOCAL_RANK, MASTER_ADDR/PORT, as torchrun or srun set them) it
trains under DistributedDataParallel over gloo, which lets ranks share one GPU (NCCL refuses
two ranks on one device), and says its rank in that line.
"""

import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {  # layers, hidden, heads, sequence, vocabulary
    "124m": (12, 768, 12, 1024, 50257),
    "tiny": (2, 64, 2, 64, 512),
}


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2: flash attention
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # Debian 12's PyTorch 1.13 (CPU dry runs)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, size):
        super().__init__()
        layers, hidden, heads, seq, vocab = SHAPES[size]
        self.seq, self.vocab = seq, vocab
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as GPT-2

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def build(size, device, compile_model=False, ddp=False):
    """The model and its AdamW, as a training script sets them up."""
    torch.manual_seed(0)
    model = GPT(size).to(device)
    if ddp:
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    fused = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, **fused)
    return (torch.compile(model) if compile_model else model), opt


def train_step(model, opt, batch, device):
    """One full step: forward, backward, optimizer (bf16 autocast on a GPU)."""
    raw = model._orig_mod if hasattr(model, "_orig_mod") else model
    raw = raw.module if hasattr(raw, "module") else raw  # under DistributedDataParallel
    idx = torch.randint(raw.vocab, (batch, raw.seq + 1), device=device)
    if device.type == "cuda":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(idx[:, :-1], idx[:, 1:])
    else:
        loss = model(idx[:, :-1], idx[:, 1:])
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def process_bytes(device_index=0):
    """What NVML says this process holds on the GPU (the CUDA context included), or 0."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if p.pid == os.getpid():
                return int(p.usedGpuMemory or 0)
    except Exception:  # no NVML (CPU runs) or no per-process accounting
        pass
    return 0


def main():
    path = sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else None
    cfg = json.load(open(path)) if path else {}
    batch = int(cfg.get("batch_size", 8))
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world)
    model, opt = build(cfg.get("size", "124m"), device, bool(cfg.get("compile", False)), world > 1)
    t0 = time.perf_counter()
    for step in range(int(cfg.get("steps", 20))):
        loss = train_step(model, opt, batch, device)
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    out = {"batch_size": batch, "seconds": round(time.perf_counter() - t0, 3)}
    if world > 1:
        out.update(rank=rank, world=world)
    if device.type == "cuda":
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        out["peak_process_bytes"] = process_bytes(device.index)
        out["total_bytes"] = torch.cuda.mem_get_info()[1]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
