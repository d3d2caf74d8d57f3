"""hf_train.py - GPT-2 124M trained by a Hugging Face Trainer, knowing nothing of autobatch.

Owns device-check's Trainer job: GPT2LMHeadModel from its config (no download), random
tokens of sequence 1024, bf16, AdamW, per_device_train_batch_size from a JSON config
({"batch_size": N, "size": "124m"|"tiny", "steps": K}); prints its peak at the end as
gpt2_train.py does.
"""

import json
import os
import sys
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_train  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __init__(self, seq, vocab):
        self.seq, self.vocab = seq, vocab

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        ids = torch.randint(self.vocab, (self.seq,))
        return {"input_ids": ids, "labels": ids}


def main():
    cfg = json.load(open(sys.argv[sys.argv.index("--config") + 1]))
    layers, hidden, heads, seq, vocab = gpt2_train.SHAPES[cfg.get("size", "124m")]
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads,
                                       n_positions=seq, vocab_size=vocab))
    gpu = torch.cuda.is_available()
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="hf-train-"),
                             per_device_train_batch_size=int(cfg["batch_size"]),
                             max_steps=int(cfg.get("steps", 20)), bf16=gpu, logging_steps=5,
                             save_strategy="no", report_to="none", dataloader_num_workers=2)
    Trainer(model=model, args=args, train_dataset=Tokens(seq, vocab)).train()
    out = {"batch_size": int(cfg["batch_size"])}
    if gpu:
        torch.cuda.synchronize()
        out.update(peak_reserved_bytes=torch.cuda.max_memory_reserved(),
                   peak_process_bytes=gpt2_train.process_bytes(),
                   total_bytes=torch.cuda.mem_get_info()[1])
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
