"""A PyTorch training loop that knows nothing of autobatch: its batch comes from its own JSON
config (argv[1]), as any program's would. Keys of the config shape the cases the tests
need: startup_s (a slow model load), step_sleep (slow steps), accum (gradient
accumulation), workers (DataLoader worker processes), steps (optimizer updates to run),
keep_outputs (keep every step's output, as a program that collects its predictions does:
memory that grows with the steps, past what a trial's few steps hold), device (where it
trains: "cpu", the default, or "cuda"). Hugging Face's names
of the batch and of the steps (per_device_train_batch_size, max_steps) stand for batch_size
and steps, so that a config can follow its preset.
Every sample carries a 256x256 activation through four layers, kept for the backward pass."""
import json
import sys
import time

import torch

class Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, index):
        return torch.randn(256, 256)


def main():
    config = json.load(open(sys.argv[1]))
    time.sleep(config.get("startup_s", 0))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    batch = config.get("batch_size", config.get("per_device_train_batch_size"))
    accum = config.get("accum", 1)

    loader = torch.utils.data.DataLoader(Samples(), batch_size=batch,
                                         num_workers=config.get("workers", 0))
    device = torch.device(config.get("device", "cpu"))
    weights = [torch.randn(256, device=device, requires_grad=True) for _ in range(4)]
    optimizer = torch.optim.AdamW(weights, lr=1e-3)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    updates, kept = 0, []
    for index, x in enumerate(loader):
        x = x.to(device)
        for w in weights:
            x = torch.relu(x * w + 0.1)
        (x.mean() / accum).backward()
        if config.get("keep_outputs"):
            kept.append(x.detach())
        time.sleep(config.get("step_sleep", 0))
        if (index + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            schedule.step()
            updates += 1
            if updates == config.get("steps", config.get("max_steps", 8)):
                break
    print("trained %d updates at batch %d" % (updates, batch))


if __name__ == "__main__":  # DataLoader workers may import this file (forkserver, spawn)
    main()
