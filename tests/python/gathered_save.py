"""A PyTorch trainer that saves a checkpoint every save_every steps, whose model's state dict
is gathered from shards as FSDP's full state dict is (each shard's peers' copies made on
this process: `gather` MiB while the save runs), and knows nothing of autobatch. Its steps
need memory that grows with the batch (rows x 256 per sample, elementwise: cheap to run); its
save needs memory that does not, after the step's activations are gone. Config (argv[1], JSON): batch_size, steps, save_every, gather, rows."""
import json
import os
import sys

import torch


class Sharded(torch.nn.Module):
    def __init__(self, gather_mib):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(256))
        self.body = torch.nn.Linear(256, 256)
        self.shard = torch.nn.Parameter(torch.zeros(max(1, gather_mib) << 16))  # 1/4 of it
        self._register_state_dict_hook(Sharded.gathered)

    @staticmethod
    def gathered(module, state, prefix, local_metadata):
        # the full tensor, from this shard and its three peers' (copies here, as a gather)
        state[prefix + "shard"] = torch.cat([module.shard.detach()] * 4)
        return state

    def forward(self, x):
        kept = torch.relu(x * self.scale + 0.1) * self.scale  # held for the backward pass
        return kept.mean() + self.body(x[:, 0]).mean() + self.shard[0]


def main():
    config = json.load(open(sys.argv[1]))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Sharded(config.get("gather", 64))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(1, config.get("steps", 8) + 1):
        x = torch.randn(config["batch_size"], config.get("rows", 64), 256)
        model(x).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        del x
        if step % config.get("save_every", 4) == 0:
            with open(os.devnull, "wb") as sink:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                           sink)
    print("trained %d steps at batch %d" % (step, config["batch_size"]))


if __name__ == "__main__":
    main()
