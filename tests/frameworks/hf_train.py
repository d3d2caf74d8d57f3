"""A Hugging Face Trainer job that knows nothing of autobatch: TrainingArguments from a YAML
or JSON file (argv[1]), a small GPT-2 shaped model built from its config (no download),
random tokens, the CPU; a held-out set of 64 samples where the arguments evaluate. argv[2] (optional): seconds of start-up, standing for a model load."""
import gc
import sys
import time

import torch
from transformers import (GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer,
                          TrainingArguments)



class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=100000):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        ids = torch.randint(0, 1024, (128,))
        return {"input_ids": ids, "labels": ids}


def main(path, startup=0.0, callbacks=None):
    time.sleep(startup)
    parser = HfArgumentParser(TrainingArguments)
    yaml = path.endswith((".yaml", ".yml"))
    (args,) = parser.parse_yaml_file(path) if yaml else parser.parse_json_file(path)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=128,
                                       vocab_size=1024, bos_token_id=0, eos_token_id=0))
    held_out = Tokens(64) if args.eval_strategy != "no" else None
    # Its DataLoader workers are forked from here. A full garbage collection in one writes
    # the header of every object it inherited (the imports' heap), copying those pages: one
    # plain run in 36 peaked 190 MiB over the other two at the same batch (local CI run 12),
    # past any margin for workers' noise. Frozen objects are left alone (Python's gc.freeze,
    # meant for fork), as a long-running trainer's workers would want too.
    gc.freeze()
    Trainer(model=model, args=args, train_dataset=Tokens(), eval_dataset=held_out,
            callbacks=callbacks).train()
    print(f"trained at batch {args.per_device_train_batch_size}, rank {args.process_index} of "
          f"{args.world_size}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
