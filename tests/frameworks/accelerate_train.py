"""An Accelerate training loop that knows nothing of autobatch: its batch and gradient
accumulation come from a JSON config (argv[1]); argv[2] (optional): seconds of start-up."""
import json
import sys
import time

import torch
from accelerate import Accelerator

config = json.load(open(sys.argv[1]))
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)
torch.manual_seed(0)
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=config.get("accum", 1))
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                            torch.nn.GELU(), torch.nn.Linear(16, 16))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


class Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, index):
        return (torch.randn(4096, 16),)


data = torch.utils.data.DataLoader(Samples(), batch_size=config["batch_size"])
model, optimizer, data = accelerator.prepare(model, optimizer, data)
for step, (x,) in enumerate(data):
    with accelerator.accumulate(model):
        loss = model(x).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    if step == 8 * config.get("accum", 1):
        break
print("trained at batch", config["batch_size"])
