"""A plain PyTorch trainer over token sequences of varying length, as fine-tuning jobs are:
a shuffled DataLoader whose collate_fn pads each batch to its own longest sample (dynamic
padding, the default of Hugging Face's DataCollatorWithPadding), or to the maximum length
("padding": "max"). It knows nothing of autobatch; its batch comes from its JSON config
(argv[1]). Keys: batch_size, lengths ("narrow", "lognormal" or "longtail"), padding
("dynamic" or "max"), samples (the dataset's size), stream (read as an IterableDataset),
max_len, steps (optimizer updates; 0: the whole epoch), seed (the shuffle's), and for a GPU
(tests/gpu/device-check's epoch stage) device ("cuda"), hidden and heads (64 and 4 by
default), where it prints its allocator's figures as a JSON line at its end; Hugging Face's
per_device_train_batch_size and max_length stand for batch_size and max_len. Memory
grows with batch x padded length (an attention's scores with its square)."""
import json
import math
import random
import sys

import torch

VOCAB, HIDDEN, HEADS = 256, 64, 4


def draw_lengths(kind, n, max_len, rng):
    """narrow: 60-100% of max_len; lognormal: median max_len/10; longtail: most short, one
    in a hundred near max_len."""
    out = []
    for _ in range(n):
        if kind == "narrow":
            x = rng.uniform(0.6, 1.0) * max_len
        elif kind == "lognormal":
            x = rng.lognormvariate(math.log(max_len / 10), 0.8)
        else:
            x = rng.uniform(0.9, 1.0) * max_len if rng.random() < 0.01 else rng.uniform(8, 48)
        out.append(max(4, min(max_len, int(x))))
    return out


class Tokens(torch.utils.data.Dataset):
    def __init__(self, lengths, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = [torch.randint(1, VOCAB, (n,), generator=g).tolist() for n in lengths]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return {"input_ids": self.items[i], "labels": self.items[i]}


class Stream(torch.utils.data.IterableDataset):
    """The samples as a streaming dataset yields them (a shuffle buffer's order): one pass,
    nothing to index or count ahead."""

    def __init__(self, tokens, seed):
        self.tokens, self.seed = tokens, seed

    def __iter__(self):
        order = list(range(len(self.tokens)))
        random.Random(self.seed).shuffle(order)
        return (self.tokens[i] for i in order)


class Model(torch.nn.Module):
    def __init__(self, hidden=HIDDEN, heads=HEADS):
        super().__init__()
        self.hidden, self.heads = hidden, heads
        self.embed = torch.nn.Embedding(VOCAB, hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
                                       torch.nn.Linear(4 * hidden, hidden))
        self.out = torch.nn.Linear(hidden, VOCAB)

    def forward(self, ids, mask):
        x = self.embed(ids)
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        scores = q @ k.transpose(2, 3) / math.sqrt(self.hidden / self.heads)  # b x heads x n x n
        scores = scores.masked_fill(~mask[:, None, None, :], -1e4)
        x = x + (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, n, self.hidden)
        x = x + self.mlp(x)
        return self.out(x)


def collate(max_len, padding):
    def pad(batch):
        width = max_len if padding == "max" else max(len(b["input_ids"]) for b in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        for row, b in enumerate(batch):
            ids[row, :len(b["input_ids"])] = torch.tensor(b["input_ids"])
        return {"input_ids": ids, "labels": ids.clone(), "mask": ids != 0}
    return pad


def main():
    config = json.load(open(sys.argv[1]))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    # a Hugging Face config's names too (its preset gives the probe max_length)
    batch = config.get("batch_size", config.get("per_device_train_batch_size"))
    max_len = config.get("max_len", config.get("max_length", 512))
    lengths = draw_lengths(config.get("lengths", "lognormal"), config.get("samples", 800),
                           max_len, random.Random(1))
    data, pad = Tokens(lengths, 2), collate(max_len, config.get("padding", "dynamic"))
    if config.get("stream"):  # read as a stream (an IterableDataset): no length, no index
        loader = torch.utils.data.DataLoader(Stream(data, config.get("seed", 0)),
                                             batch_size=batch, collate_fn=pad)
    else:
        loader = torch.utils.data.DataLoader(
            data, batch_size=batch, shuffle=True,
            generator=torch.Generator().manual_seed(config.get("seed", 0)), collate_fn=pad)
    device = torch.device(config.get("device", "cpu"))
    model = Model(config.get("hidden", HIDDEN), config.get("heads", HEADS)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    updates, longest, rows = 0, 0, 0
    for b in loader:
        b = {k: v.to(device) for k, v in b.items()}
        logits = model(b["input_ids"], b["mask"])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), b["labels"].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        updates += 1
        # the longest batch and its samples: the last batch of an epoch holds fewer
        shape = tuple(b["input_ids"].shape)
        if shape[1] > longest or shape[1] == longest and shape[0] > rows:
            rows, longest = shape
        if updates == config.get("steps", 0):
            break
    print("trained %d updates at batch %d, longest batch %d (%d samples)"
          % (updates, batch, longest, rows))
    if device.type == "cuda":  # what the caching allocator did over the whole run
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
        print(json.dumps({"batch_size": batch, "updates": updates, "longest": longest,
                          "longest_rows": rows,
                          "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
                          "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                          "alloc_retries": stats.get("num_alloc_retries", 0),
                          "peak_inactive_split_bytes": stats.get("inactive_split_bytes.all.peak", 0),
                          "total_bytes": torch.cuda.mem_get_info()[1]}), flush=True)


if __name__ == "__main__":
    main()
