"""truth.py - the largest batch of tests/gpu/gpt2_train.py whose plain run stays within a limit.

Owns the "true maximum" device-check holds the probe's choices against: for each limit, the
largest batch B measured to fit with B + 1 measured not to (an interpolation search inside a
bracket, so the answer is exact, not a fit of a curve). On CUDA the batches are run in one
process, emptying PyTorch's cache between them (peak = NVML's CUDA context + the caching
allocator's peak, as the probe counts it); on the CPU each batch is a fresh plain run under
tests/helpers/peakrun (the process group's resident peak, as the probe counts a host trial).

  truth.py --size 124m --limits L1,L2,... [--peakrun PATH --python PY] [--start B]
prints one JSON line per measurement ({"batch", "peak_bytes" or "oom"}) and one per limit
({"limit_bytes", "largest", "peak_bytes", "next_peak_bytes"}).
  truth.py --edge B1,B2,... --limits L1,L2,... [--program gpt2|hf|jax] [--compile]
walks each in-process answer in fresh plain runs (B + 1 up while it fits, else B down until it
fits) and prints {"limit_bytes", "largest_fresh", "fresh_runs"}: the truth the issue asks for.
  truth.py --verify B1,B2,... --limits L1,L2,... [--program gpt2|hf|jax] [--compile] [--ranks N]
runs each batch as a fresh plain run of the program (never beside a process of its own on the
GPU; with --ranks N, as N ranks of a DDP world started together, the largest rank's peak
deciding) and prints {"verify_batch", "limit_bytes", "peak_bytes", "fits"} for each.
With --program jax (tests/gpu/jax_train.py) a run fits when it ends within the pool its
caller gave XLA (the real run's, XLA_PYTHON_CLIENT_MEM_FRACTION) and its peak is JAX's own.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INF = float("inf")


class InProcess:
    """Batches measured in this process on the GPU: 3 full steps each, from an empty cache."""

    def __init__(self, size, steps):
        import torch
        sys.path.insert(0, HERE)
        import gpt2_train
        self.torch, self.g, self.steps = torch, gpt2_train, steps
        self.device = torch.device("cuda")
        self.model, self.opt = gpt2_train.build(size, self.device)
        gpt2_train.train_step(self.model, self.opt, 1, self.device)  # AdamW's state exists
        torch.cuda.synchronize()
        self.total = torch.cuda.mem_get_info()[1]

    def context_bytes(self):
        """What NVML sees this process hold beyond PyTorch's cache: the CUDA context."""
        held = self.g.process_bytes()
        return max(0, held - self.torch.cuda.memory_reserved()) if held else 0

    def peak(self, batch):
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            for _ in range(self.steps):
                self.g.train_step(self.model, self.opt, batch, self.device)
            torch.cuda.synchronize()
        except torch.cuda.OutOfMemoryError:
            self.opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            return INF
        return self.context_bytes() + torch.cuda.max_memory_reserved()


class FreshRuns:
    """Each batch a plain run of its own: on the host measured by tests/helpers/peakrun, on a
    GPU by the program's own last line (NVML's view of the process, or PyTorch's reserved).
    With ranks > 1 the run is that many processes of a world, as torchrun starts them on one
    node (each under its own peakrun on the host); its peak is the largest rank's, and
    rank_peaks holds each rank's (None: it failed)."""

    def __init__(self, size, steps, peakrun, python, program="gpt2", compile_model=False,
                 ranks=1):
        self.size, self.steps, self.peakrun, self.python = size, steps, peakrun, python
        self.script = os.path.join(HERE, {"hf": "hf_train.py", "jax": "jax_train.py"}.get(
            program, "gpt2_train.py"))
        self.program = program
        self.compile, self.ranks = compile_model, ranks
        self.total = None
        self.rank_peaks = []

    def launch(self, cmd):
        """[(returncode, stdout, stderr)] of the command's ranks, run together."""
        port, procs, outs = free_port(), [], []
        for r in range(self.ranks):
            env = dict(os.environ)
            if self.ranks > 1:
                env.update(WORLD_SIZE=str(self.ranks), RANK=str(r), LOCAL_RANK=str(r),
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            # files, not pipes: a rank blocked on a full pipe would hold the others in a collective
            o, e = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            procs.append((subprocess.Popen(([self.peakrun] if self.peakrun else []) + cmd,
                                           env=env, stdout=o, stderr=e, text=True), o, e))
        for p, o, e in procs:
            p.wait()
            o.seek(0)
            e.seek(0)
            outs.append((p.returncode, o.read(), e.read()))
            o.close()
            e.close()
        return outs

    def one_peak(self, rc, stdout, stderr):
        if self.peakrun:
            for line in stderr.splitlines():
                if line.startswith("peak_bytes ") and line.endswith(" status 0"):
                    return int(line.split()[1])
            return INF
        last = program_report(stdout)
        if self.program == "jax" and rc == 0 and "peak_reserved_bytes" in last:
            # ran within the pool its real run gets (XLA_PYTHON_CLIENT_MEM_FRACTION, set by
            # the caller): JAX's own peak in use, as NVML sees only the preallocated pool
            self.total = last.get("total_bytes")
            return last["peak_reserved_bytes"]
        if rc != 0 or "peak_reserved_bytes" not in last:
            sys.stderr.write(stderr[-2000:])
            return INF
        self.total = last.get("total_bytes")
        return max(last.get("peak_process_bytes") or 0, last["peak_reserved_bytes"])

    def peak(self, batch):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"batch_size": batch, "size": self.size, "steps": self.steps,
                       "compile": self.compile}, f)
        try:
            outs = self.launch([self.python, self.script, "--config", f.name])
        finally:
            os.unlink(f.name)
        peaks = [self.one_peak(*o) for o in outs]
        self.rank_peaks = [None if p == INF else p for p in peaks]
        return max(peaks)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def program_report(stdout):
    """The last JSON object the program printed. Its frameworks print other lines that start
    with a brace: a Hugging Face Trainer's metrics are Python dicts ({'loss': 2.3}), not JSON."""
    last = {}
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "batch_size" in rec:
            last = rec
    return last


def largest_within(peak, limit, known, start):
    """Largest batch measured within limit with the next one measured over it."""
    lo, hi = 0, None
    for b, p in sorted(known.items()):  # what earlier limits measured brackets this one
        if p <= limit:
            lo = max(lo, b)
        elif hi is None or b < hi:
            hi = b
    b = max(start, 1) if lo == 0 else lo * 2
    while hi is None:  # doubling until a batch does not fit
        if b not in known:
            known[b] = peak(b)
        if known[b] <= limit:
            lo, b = b, b * 2
        else:
            hi = b
    while hi - lo > 1:
        plo = known.get(lo, 0)
        phi = known[hi]
        if phi != INF and lo and phi > plo:  # peaks grow about linearly: aim, then bracket
            mid = lo + int((limit - plo) * (hi - lo) / (phi - plo))
        else:
            mid = (lo + hi) // 2
        mid = min(max(mid, lo + 1), hi - 1)
        if mid not in known:
            known[mid] = peak(mid)
        if known[mid] <= limit:
            lo = mid
        else:
            hi = mid
    return lo, hi


def verify(a):
    runs = FreshRuns(a.size, 6, a.peakrun, a.python, a.program, a.compile, a.ranks)
    batches = [int(b) for b in a.verify.split(",") if b]
    limits = a.limits.split(",")
    for i, b in enumerate(batches):
        p = runs.peak(b)
        text = limits[min(i, len(limits) - 1)]
        total = runs.total or 0
        limit = int(float(text[2:]) * total) if text.startswith("F:") else int(text)
        rec = {"verify_batch": b, "limit_bytes": limit, "peak_bytes": None if p == INF else p,
               "fits": p != INF and (limit == 0 or p <= limit)}
        if a.ranks > 1:
            rec.update(ranks=a.ranks, rank_peaks=runs.rank_peaks)
        print(json.dumps(rec), flush=True)


def edge(a):
    runs = FreshRuns(a.size, 6, a.peakrun, a.python, a.program, a.compile)
    for b, text in zip([int(x) for x in a.edge.split(",") if x], a.limits.split(",")):
        limit, seen = int(text), {}

        def fits(n):
            seen[n] = runs.peak(n)
            return seen[n] <= limit
        if fits(b + 1):
            b += 1
            while len(seen) < 4 and fits(b + 1):
                b += 1
        else:
            while b > 1 and len(seen) < 4 and not fits(b):
                b -= 1
        # a walk down that used its runs before one fit found no truth, only a bound
        found = b in seen and seen[b] <= limit
        print(json.dumps({"limit_bytes": limit, "largest_fresh": b if found else None,
                          "fresh_over_from": None if found else min(k for k, v in seen.items() if v > limit),
                          "fresh_runs": {str(k): (None if v == INF else v) for k, v in sorted(seen.items())}}),
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="124m")
    ap.add_argument("--limits", required=True, help="bytes, or F:frac of the GPU's memory")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--start", type=int, default=8)
    ap.add_argument("--peakrun")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--verify")
    ap.add_argument("--edge")
    ap.add_argument("--program", default="gpt2", choices=["gpt2", "hf", "jax"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--ranks", type=int, default=1, help="--verify: each run that many ranks")
    a = ap.parse_args()
    if a.verify:
        return verify(a)
    if a.edge:
        return edge(a)
    m = FreshRuns(a.size, a.steps, a.peakrun, a.python) if a.peakrun else InProcess(a.size, a.steps)
    known = {}

    def peak(b):
        p = m.peak(b)
        print(json.dumps({"batch": b, "oom": True} if p == INF else {"batch": b, "peak_bytes": p}),
              flush=True)
        return p

    for text in a.limits.split(","):
        limit = int(float(text[2:]) * m.total) if text.startswith("F:") else int(text)
        lo, hi = largest_within(peak, limit, known, a.start)
        out = {"limit_bytes": limit, "largest": lo, "peak_bytes": known.get(lo),
               "next_peak_bytes": None if known[hi] == INF else known[hi], "next_oom": known[hi] == INF}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
