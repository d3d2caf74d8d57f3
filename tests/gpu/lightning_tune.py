"""lightning_tune.py - the GPT-2 of gpt2_train.py as a LightningModule, for device-check.

Owns the Lightning side of the comparison: `--tune power|binsearch` runs Lightning's own
Tuner.scale_batch_size (steps_per_trial 3, init_val 2, as a user would) and prints one JSON
line: its batch, its trials (calls of Lightning's trial loop) and its seconds. `--train`
trains at the config's batch_size with autobatch's LightningCallback, as a user of the
callback writes it: a probe trial of that program ends after its steps.

  lightning_tune.py --tune power --size 124m
  lightning_tune.py --train --config cfg.json
"""

import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

try:
    import lightning.pytorch as pl
    from lightning.pytorch.tuner import Tuner
    import lightning.pytorch.tuner.batch_size_scaling as scaling
except ImportError:  # the older package name
    import pytorch_lightning as pl
    from pytorch_lightning.tuner import Tuner
    import pytorch_lightning.tuner.batch_size_scaling as scaling

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_train  # noqa: E402


class Tokens(Dataset):
    def __init__(self, seq, vocab):
        self.seq, self.vocab = seq, vocab

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        return torch.randint(self.vocab, (self.seq + 1,))


class LitGPT(pl.LightningModule):
    def __init__(self, size, batch_size):
        super().__init__()
        self.batch_size = batch_size
        self.model = gpt2_train.GPT(size)

    def training_step(self, idx, i):
        return self.model(idx[:, :-1], idx[:, 1:])

    def configure_optimizers(self):
        fused = {"fused": True} if torch.cuda.is_available() else {}
        return torch.optim.AdamW(self.parameters(), lr=6e-4, weight_decay=0.1, **fused)

    def train_dataloader(self):
        return DataLoader(Tokens(self.model.seq, self.model.vocab), batch_size=self.batch_size)


def trainer(steps, callbacks=()):
    gpu = torch.cuda.is_available()
    return pl.Trainer(accelerator="gpu" if gpu else "cpu", devices=1,
                      precision="bf16-mixed" if gpu else "32-true", max_steps=steps,
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=list(callbacks))


def tune(mode, size):
    trials = []
    run = scaling._try_loop_run

    def counted(t, *args, **kwargs):  # each call is one trial of Lightning's search
        trials.append(t.lightning_module.batch_size)
        return run(t, *args, **kwargs)

    scaling._try_loop_run = counted
    lit = LitGPT(size, 2)
    t0 = time.perf_counter()
    found = Tuner(trainer(1000)).scale_batch_size(lit, mode=mode, steps_per_trial=3, init_val=2)
    print(json.dumps({"mode": mode, "batch": found, "trials": len(trials),
                      "batches": trials, "seconds": round(time.perf_counter() - t0, 2)}))


def train(path):
    import autobatch  # the probe puts it on PYTHONPATH
    cfg = json.load(open(path))
    lit = LitGPT(cfg.get("size", "124m"), int(cfg["batch_size"]))
    trainer(int(cfg.get("steps", 20)), [autobatch.LightningCallback()]).fit(lit)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tune", choices=["power", "binsearch"])
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--size", default="124m")
    ap.add_argument("--config")
    a = ap.parse_args()
    if a.tune:
        tune(a.tune, a.size)
    else:
        train(a.config)


if __name__ == "__main__":
    main()
