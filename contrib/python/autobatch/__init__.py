"""autobatch: use the batch size `srun --autobatch` chose, and speak its trial protocol.

Two lines to adopt (plain PyTorch):

    import autobatch
    batch = autobatch.batch_size(default=32)         # the decision, or your own default
    with autobatch.trial() as t:                      # does nothing outside a probe trial
        for data in loader:
            train_step(data)
            if t.step(samples=len(data)):             # True once the trial has its steps
                break

In a trial (AUTOBATCH_TRIAL=1) the steps' times and the peak memory go to the file
$AUTOBATCH_TRIAL_REPORT as JSON lines, an out-of-memory error is reported as such, and the
process ends after AUTOBATCH_TRIAL_STEPS measured steps. Nothing here needs more than the
standard library; PyTorch, Lightning and Hugging Face are used when they are installed.
"""

import os
import sys

from . import _hook
from ._hook import in_trial, peak_bytes

__all__ = ["batch_size", "in_trial", "phase", "config_path", "trial", "Trial",
           "apply_memory_fraction", "peak_bytes"]


def batch_size(default):
    """The per-GPU batch autobatch chose (in a trial: the candidate), else default."""
    chosen = _hook.positive_int("AUTOBATCH_BATCH_SIZE")
    return chosen if chosen is not None else default


def phase():
    """'train' or 'eval': which loop a trial should run."""
    return "eval" if os.environ.get("AUTOBATCH_TRIAL_PHASE") == "eval" else "train"


def config_path(default):
    """In a trial, the copy of your config that holds the candidate batch."""
    return os.environ.get("AUTOBATCH_CONFIG") if in_trial() and os.environ.get("AUTOBATCH_CONFIG") else default


def apply_memory_fraction():
    """Caps PyTorch's CUDA allocator at $AUTOBATCH_MEM_FRACTION (enforce=on); returns it."""
    try:
        fraction = float(os.environ.get("AUTOBATCH_MEM_FRACTION", ""))
    except ValueError:
        return None
    if not 0 < fraction <= 1:
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    for device in range(torch.cuda.device_count()):
        torch.cuda.set_per_process_memory_fraction(fraction, device)
    return fraction


class Trial:
    """Times steps and reports them in a probe trial; outside one, step() only counts.
    A program that uses it speaks the protocol itself, so the probe's step hook stands aside."""

    def __init__(self):
        self.active = in_trial()
        self.steps = _hook.positive_int("AUTOBATCH_TRIAL_STEPS") or 3
        self.count = 0
        self._recorder = _hook.recorder() if self.active else None

    def __enter__(self):
        if self.active:
            _hook.claim()
            self._recorder.start()
        return self

    def step(self, samples=None):
        """Marks the end of a step; True when a trial has run its warm-up and steps."""
        self.count += 1
        if self.active:
            return self._recorder.step(samples)  # the recorder defaults to the trial's batch
        return False

    def __exit__(self, kind, error, tb):
        if not self.active:
            return False
        if error is not None and _hook.is_oom(error):
            self._recorder.oom()
            sys.stderr.write("autobatch: out of memory at batch %d\n" % batch_size(0))
            sys.exit(1)
        self._recorder.finish()
        if error is None:
            sys.exit(0)  # a trial has measured what it needed: do not train on
        return False


def trial():
    return Trial()


def _lightning_callback():
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl

    class LightningCallback(pl.Callback):
        """Ends a probe trial after its steps: Trainer(callbacks=[autobatch.LightningCallback()])."""

        def on_train_start(self, trainer, pl_module):
            self.trial = Trial().__enter__()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if self.trial.step():
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module):
            self.trial.__exit__(None, None, None)

    return LightningCallback


def _hf_callback():
    from transformers import TrainerCallback

    class HFCallback(TrainerCallback):
        """Ends a probe trial after its steps: Trainer(callbacks=[autobatch.HFCallback()])."""

        def on_train_begin(self, args, state, control, **kwargs):
            self.trial = Trial().__enter__()

        def on_step_end(self, args, state, control, **kwargs):
            if self.trial.step():
                control.should_training_stop = True

        def on_train_end(self, args, state, control, **kwargs):
            self.trial.__exit__(None, None, None)

    return HFCallback


def __getattr__(name):
    # The callbacks import their framework only when asked for.
    if name == "LightningCallback":
        return _lightning_callback()
    if name == "HFCallback":
        return _hf_callback()
    raise AttributeError(name)
