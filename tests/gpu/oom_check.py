"""oom_check.py - what a real CUDA out-of-memory error says, for device-check's oom stage.

Owns the plain side of the check: runs gpt2_train.py's step at a batch that cannot fit and
prints one JSON line with PyTorch's message, what it had allocated and reserved, what NVML
saw the process hold at that moment, and the floor the message itself implies (allocated by
PyTorch + tried to allocate), which the probe's parser (ab_text_oom_floor) must reach.

  oom_check.py --batch B [--size 124m]
"""

import argparse
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_train  # noqa: E402

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def size(text, pattern):
    m = re.search(pattern, text)
    return int(float(m.group(1)) * UNITS[m.group(2)]) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--size", default="124m")
    a = ap.parse_args()
    device = torch.device("cuda")
    model, opt = gpt2_train.build(a.size, device)
    try:
        gpt2_train.train_step(model, opt, a.batch, device)
        print(json.dumps({"batch": a.batch, "oom": False}))
        return
    except torch.cuda.OutOfMemoryError as e:
        msg = str(e)
        held = gpt2_train.process_bytes()
        out = {"batch": a.batch, "oom": True, "message": msg[:600],
               "allocated_bytes": torch.cuda.memory_allocated(),
               "reserved_bytes": torch.cuda.memory_reserved(),
               "max_reserved_bytes": torch.cuda.max_memory_reserved(),
               "process_bytes_at_failure": held,
               "total_bytes": torch.cuda.mem_get_info()[1],
               "tried_bytes": size(msg, r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)"),
               "allocated_by_pytorch_bytes": size(msg, r"([0-9.]+) (B|KiB|MiB|GiB|TiB) is allocated by PyTorch")}
        if out["tried_bytes"] and out["allocated_by_pytorch_bytes"]:
            out["message_floor_bytes"] = out["tried_bytes"] + out["allocated_by_pytorch_bytes"]
        print(json.dumps(out))


if __name__ == "__main__":
    main()
