"""ddp_train.py - a plain PyTorch DDP trainer (gloo, CPU), knowing nothing of autobatch.

Owns the distributed program the probe's rank trials are checked against: one process per
rank, as `srun -n N` or a launcher starts them (RANK or SLURM_PROCID, WORLD_SIZE or
SLURM_NTASKS, MASTER_ADDR/MASTER_PORT); an 8 M-parameter embedding table (cheap to compute,
heavy in state) and 8 elementwise layers over 1024 tokens a sample, whose saved activations
(about 3 MiB a sample) grow with the batch at little compute; DistributedDataParallel, whose
gradient buckets are a second copy of the 32 MiB of gradients that a one-process run never
holds; AdamW; random data; the batch from a JSON config ({"batch_size": N, "steps": K}).
Alone (a world of 1) it trains without DDP.

Sharded ({"zero": true, "rows": R}): the table's R rows (40 M parameters at 625000) in 16
tables, each a sixteenth of a sample's tokens, Adam with amsgrad (three states a parameter,
12 bytes) sharded over the ranks by PyTorch's ZeroRedundancyOptimizer (ZeRO stage 1, which
gives each rank whole parameters: hence 16), one tensor at a time (no foreach temporaries of
the whole model), DDP's gradients as views of its buckets: 20 bytes a parameter alone, 8 +
12/N in a world of N, so that the model state alone can exceed a GPU that the step's shards
fit in.

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
    def __init__(self, rows, tables):
        super().__init__()
        self.emb = nn.ModuleList(nn.Embedding(rows // tables, 64) for _ in range(tables))
        self.layers = nn.Sequential(*[Scale() for _ in range(8)])
        self.out = nn.Linear(64, 10)

    def forward(self, idx):
        parts = idx.chunk(len(self.emb), dim=1)
        h = torch.cat([e(p) for e, p in zip(self.emb, parts)], dim=1)
        return self.out(self.layers(h).mean(dim=1))


def model_of(m):
    return m.module if isinstance(m, nn.parallel.DistributedDataParallel) else m


def main():
    cfg = json.load(open(sys.argv[1]))
    batch, steps = int(cfg["batch_size"]), int(cfg.get("steps", 6))
    rows, zero = int(cfg.get("rows", 125000)), bool(cfg.get("zero", False))
    rank = env_int("RANK", "SLURM_PROCID", default=0)
    world = env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = Model(rows, 16 if zero else 1)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=zero)
    if zero and world > 1:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                      lr=1e-3, amsgrad=True, foreach=False)
    elif zero:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True, foreach=False)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x = torch.randint(rows // len(model_of(model).emb), (batch, 1024))
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
