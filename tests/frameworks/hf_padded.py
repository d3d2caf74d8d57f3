"""A Hugging Face Trainer fine-tuning a causal LM on token sequences of varying length with
dynamic padding: DataCollatorForLanguageModeling pads each batch to its own longest sample
(as TRL's and most fine-tuning recipes' collators do without packing). TrainingArguments from
a JSON file (argv[1]; a whole epoch unless it says max_steps), a small GPT-2 shaped model
built from its config and a word-level tokenizer built in memory (no download), 400 samples
of log-normal lengths (median 48 tokens) cut at 256 (6 samples), the CPU. It knows
nothing of autobatch."""
import math
import random
import sys

import torch
from tokenizers import Tokenizer, models
from transformers import (DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel,
                          HfArgumentParser, PreTrainedTokenizerFast, Trainer,
                          TrainingArguments)

VOCAB, MAX_LEN = 256, 256


class Texts(torch.utils.data.Dataset):
    """Tokenized samples, as a tokenized dataset gives them: lists of ids of their own length."""

    def __init__(self, n, seed=0):
        # several at the cut: an epoch's last, partial batch cannot hold them all, so the
        # run has a full batch at the longest length whatever the batch size
        rng = random.Random(seed)
        lengths = [min(MAX_LEN, max(4, int(rng.lognormvariate(math.log(48), 0.8))))
                   for _ in range(n)]
        g = torch.Generator().manual_seed(seed)
        self.items = [torch.randint(2, VOCAB, (k,), generator=g).tolist() for k in lengths]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return {"input_ids": self.items[i]}


def tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, **{f"t{i}": i for i in range(2, VOCAB)}}
    words = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=words, pad_token="[PAD]", unk_token="[UNK]")


def main(path):
    (args,) = HfArgumentParser(TrainingArguments).parse_json_file(path)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=MAX_LEN,
                                       vocab_size=VOCAB, bos_token_id=0, eos_token_id=0))
    collator = DataCollatorForLanguageModeling(tokenizer(), mlm=False)
    Trainer(model=model, args=args, train_dataset=Texts(400), data_collator=collator).train()
    print(f"trained at batch {args.per_device_train_batch_size}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
