"""ddp_train.py - a plain PyTorch DDP trainer (gloo, CPU), knowing nothing of autobatch.

Owns the distributed program the probe's rank trials are checked against: one process per
rank, as `srun -n N` or a launcher starts them (RANK or SLURM_PROCID, WORLD_SIZE or
SLURM_NTASKS, MASTER_ADDR/MASTER_PORT); an 8 M-parameter embedding table (cheap to compute,
heavy in state) and 8 elementwise layers over 1024 tokens a sample, whose saved activations
(about 3 MiB a sample) grow with the batch at little compute; DistributedDataParallel, whose
gradient buckets are a second copy of the 32 MiB of gradients that a one-process run never
holds; AdamW; random data; the batch from a JSON config ({"batch_size": N, "steps": K}).
Alone (a world of 1) it trains without DDP.

  python3 ddp_train.py CONFIG.json
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn


def env_int(*names, default):
    for n in names:
        if os.environ.get(n, "").isdigit():
            return int(os.environ[n])
    return default


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(64))
        self.b = nn.Parameter(torch.zeros(64))

    def forward(self, h):
        return torch.relu(h * self.w + self.b)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(125000, 64)
        self.layers = nn.Sequential(*[Scale() for _ in range(8)])
        self.out = nn.Linear(64, 10)

    def forward(self, idx):
        return self.out(self.layers(self.emb(idx)).mean(dim=1))


def main():
    cfg = json.load(open(sys.argv[1]))
    batch, steps = int(cfg["batch_size"]), int(cfg.get("steps", 6))
    rank = env_int("RANK", "SLURM_PROCID", default=0)
    world = env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = Model()
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x = torch.randint(125000, (batch, 1024))
        y = torch.randint(10, (batch,))
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    print(f"rank {rank} of {world}: batch {batch}, loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
