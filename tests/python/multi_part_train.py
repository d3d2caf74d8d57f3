"""A plain PyTorch trainer whose samples have several sizes, padded per batch as collators
do: "kind" "seq2seq" (a source and a target, each padded to its own longest, as Hugging
Face's DataCollatorForSeq2Seq does; long articles with one-line summaries beside short
prompts with long answers: the longest source and the longest target are in different
samples, and the decoder's logits, batch x target x vocab, weigh most) or "audio" (80 mel
bins by a clip's frames, torchaudio's layout, padded along the frames; a fixed size first).
It knows nothing of autobatch; its batch comes from its JSON config (argv[1]). Keys:
batch_size, kind, samples, steps (0: the whole epoch), and "sampler": "shuffle" (default),
"endless" (a sampler without len, drawing at random for ever: the loop stops at steps),
"endless_batches" (a batch_sampler of its own, as endless) or "subset" (a train split
through SubsetRandomSampler: the samples whose target, or clip, is of at most half the
longest). Prints the longest batch it trained on."""
import json
import random
import sys

import torch

VOCAB, HIDDEN, MELS = 2000, 32, 80


def draw(kind, n, rng):
    """(source, target) lengths, or (frames,) per sample."""
    out = []
    for _ in range(n):
        k = rng.random()
        if kind == "audio":
            out.append((rng.randint(50, 449),))
        elif k < 0.4:
            out.append((480, 4))  # a long article, a one-line summary
        elif k < 0.5:
            out.append((60, 300))  # a short prompt, a long answer
        else:
            out.append((rng.randint(20, 80), rng.randint(10, 40)))
    return out


class Pairs(torch.utils.data.Dataset):
    def __init__(self, kind, sizes):
        self.kind, self.sizes = kind, sizes

    def __len__(self):
        return len(self.sizes)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        if self.kind == "audio":
            return torch.randn(MELS, self.sizes[i][0], generator=g), i % 10
        src, tgt = self.sizes[i]
        return {"input_ids": torch.randint(1, VOCAB, (src,), generator=g),
                "labels": torch.randint(1, VOCAB, (tgt,), generator=g)}


def collate_pairs(batch):
    src = max(len(b["input_ids"]) for b in batch)
    tgt = max(len(b["labels"]) for b in batch)
    ids = torch.zeros(len(batch), src, dtype=torch.long)
    labels = torch.full((len(batch), tgt), -100, dtype=torch.long)
    for row, b in enumerate(batch):
        ids[row, :len(b["input_ids"])] = b["input_ids"]
        labels[row, :len(b["labels"])] = b["labels"]
    return {"input_ids": ids, "labels": labels}


def collate_audio(batch):
    frames = max(x.shape[1] for x, _ in batch)
    out = torch.zeros(len(batch), MELS, frames)
    for row, (x, _) in enumerate(batch):
        out[row, :, :x.shape[1]] = x
    return out, torch.tensor([y for _, y in batch])


class Seq2Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.enc = torch.nn.Linear(HIDDEN, HIDDEN)
        self.dec = torch.nn.Linear(HIDDEN, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, VOCAB)

    def loss(self, b):
        context = torch.tanh(self.enc(self.embed(b["input_ids"]))).mean(1, keepdim=True)
        y = torch.tanh(self.dec(self.embed(b["labels"].clamp(min=0))) + context)
        logits = self.out(y)  # batch x target x vocab
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(),
                                                 ignore_index=-100)


class Audio(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(MELS, 2048, 3, padding=1)
        self.head = torch.nn.Linear(2048, 10)

    def loss(self, b):
        x, y = b
        h = torch.relu(self.conv(x))  # batch x 2048 x frames
        return torch.nn.functional.cross_entropy(self.head(h.mean(2)), y)


class Endless(torch.utils.data.Sampler):
    """Indices at random for ever, no len (a streaming-style sampler)."""

    def __init__(self, n, batch=None):
        self.n, self.batch = n, batch

    def __iter__(self):
        rng = random.Random(0)
        while True:
            if self.batch:
                yield [rng.randrange(self.n) for _ in range(self.batch)]
            else:
                yield rng.randrange(self.n)


def loader(config, data, batch, collate):
    how = config.get("sampler", "shuffle")
    if how == "endless":
        return torch.utils.data.DataLoader(data, batch_size=batch, sampler=Endless(len(data)),
                                           collate_fn=collate)
    if how == "endless_batches":
        return torch.utils.data.DataLoader(data, batch_sampler=Endless(len(data), batch),
                                           collate_fn=collate)
    if how == "subset":
        half = max(s[-1] for s in data.sizes) // 2
        train = [i for i, s in enumerate(data.sizes) if s[-1] <= half]
        return torch.utils.data.DataLoader(
            data, batch_size=batch, collate_fn=collate,
            sampler=torch.utils.data.SubsetRandomSampler(
                train, generator=torch.Generator().manual_seed(0)))
    return torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, collate_fn=collate,
                                       generator=torch.Generator().manual_seed(0))


def main():
    config = json.load(open(sys.argv[1]))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    kind, batch = config.get("kind", "seq2seq"), config["batch_size"]
    data = Pairs(kind, draw(kind, config.get("samples", 200), random.Random(1)))
    model = Audio() if kind == "audio" else Seq2Seq()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps, updates, longest = config.get("steps", 0), 0, ()
    for b in loader(config, data, batch, collate_audio if kind == "audio" else collate_pairs):
        model.loss(b).backward()
        optimizer.step()
        optimizer.zero_grad()
        updates += 1
        shape = tuple(b[0].shape[2:]) if kind == "audio" else \
            (b["input_ids"].shape[1], b["labels"].shape[1])
        longest = tuple(max(a, c) for a, c in zip(longest, shape)) if longest else shape
        if updates == steps:
            break
    print("trained %d updates at batch %d, longest batch %s" % (updates, batch, longest))


if __name__ == "__main__":
    main()
