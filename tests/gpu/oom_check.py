"""oom_check.py - what a real CUDA out-of-memory error says, for device-check's oom stage.

Owns the plain side of the check: runs gpt2_train.py's step at a batch that cannot fit and
prints one JSON line with PyTorch's message, what it had allocated and reserved, what NVML
saw the process hold at that moment, and the floor the message itself implies (allocated by
PyTorch + tried to allocate), which the probe's parser (ab_text_oom_floor) must reach.

  oom_check.py --batch B [--size 124m]
  oom_check.py --log OUTPUT   (a kept trial's output: the floor its own message implies)
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def size(text, pattern):
    m = re.search(pattern, text)
    return int(float(m.group(1)) * UNITS[m.group(2)]) if m else None


def floor_of(msg):
    out = {"tried_bytes": size(msg, r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)"),
           "allocated_by_pytorch_bytes": size(msg, r"([0-9.]+) (B|KiB|MiB|GiB|TiB) is allocated by PyTorch")}
    if out["tried_bytes"] and out["allocated_by_pytorch_bytes"]:
        out["message_floor_bytes"] = out["tried_bytes"] + out["allocated_by_pytorch_bytes"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int)
    ap.add_argument("--size", default="124m")
    ap.add_argument("--log")
    a = ap.parse_args()
    if a.log:
        text = open(a.log, errors="replace").read()
        at = text.rfind("CUDA out of memory")
        msg = text[at:at + 600] if at >= 0 else ""
        print(json.dumps({"log": a.log, "message": msg, **floor_of(msg)}))
        return
    import torch
    import gpt2_train
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
               "total_bytes": torch.cuda.mem_get_info()[1], **floor_of(msg)}
        print(json.dumps(out))


if __name__ == "__main__":
    main()
