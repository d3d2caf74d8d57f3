"""A real PyTorch training loop on the CPU whose memory grows with the batch: every sample
carries a 256x256 activation through four layers, all kept for the backward pass."""
import sys

import torch

sys.path.insert(0, sys.argv[1])  # contrib/python
import autobatch  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
batch = autobatch.batch_size(default=4)
weights = [torch.randn(256, requires_grad=True) for _ in range(4)]
opt = torch.optim.SGD(weights, lr=1e-3)
with autobatch.trial() as t:
    for step in range(3):
        x = torch.randn(batch, 256, 256)
        for w in weights:
            x = torch.relu(x * w + 0.1)
        loss = x.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("step %d batch %d loss %.4f" % (step, batch, loss.item()))
        if t.step(samples=batch):
            break
