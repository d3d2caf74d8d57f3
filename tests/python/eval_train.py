"""A plain PyTorch trainer that evaluates inside training, as Hugging Face's Trainer does with
eval_strategy "steps": every eval_steps optimizer updates, a no-grad pass over a held-out set
at per_device_eval_batch_size (by default 4x the train batch, a common choice: an eval batch
keeps no activations for a backward pass). The eval pass runs beside the optimizer's state and
the model's gradients (zero_grad(set_to_none=False), as some trainers keep them), so the run's
peak is the evaluation's, not the training step's. It knows nothing of autobatch; its
settings come from its JSON config (argv[1]), in Hugging Face's names:
per_device_train_batch_size, per_device_eval_batch_size (0 or absent: 4x the train batch),
eval_steps (0 or absent: no evaluation), max_steps, eval_samples (the held-out set), width,
depth, vocab; save_steps (0 or absent: no checkpoint) into output_dir/checkpoint-N after that
step's evaluation, and load_best_model_at_end, with which, as Hugging Face's TrainingArguments
does, a save interval that is not a multiple of the evaluation's is refused. Memory grows with the batch through the logits over the vocabulary: a training
step holds them, their log-softmax and its gradient; an eval batch, 4x larger, its logits,
their softmax and log-softmax (the accuracy and entropy it reports)."""
import json
import os
import sys

import torch


def model_of(width, depth, vocab):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, vocab))


def evaluate(model, batch, samples, width, vocab):
    model.eval()
    with torch.no_grad():
        for start in range(0, samples, batch):
            n = min(batch, samples - start)
            logits = model(torch.randn(n, width))
            probs = logits.softmax(-1)
            labels = torch.randint(0, vocab, (n,))
            accuracy = (probs.argmax(-1) == labels).float().mean()
            entropy = -(probs * logits.log_softmax(-1)).sum(-1).mean()
            (accuracy + entropy).item()
    model.train()


def main():
    config = json.load(open(sys.argv[1]))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    batch = config["per_device_train_batch_size"]
    eval_batch = config.get("per_device_eval_batch_size") or 4 * batch
    every, steps = config.get("eval_steps") or 0, config.get("max_steps", 20)
    width, depth = config.get("width", 256), config.get("depth", 2)
    vocab = config.get("vocab", 8192)
    save, out = config.get("save_steps") or 0, config.get("output_dir", "trainer_output")
    if config.get("load_best_model_at_end") and every and save % every:
        sys.exit("ValueError: --load_best_model_at_end requires the saving steps to be a round "
                 "multiple of the evaluation steps, but found %d, which is not a round multiple "
                 "of %d." % (save, every))
    model = model_of(width, depth, vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    evals = 0
    for step in range(1, steps + 1):
        logits = model(torch.randn(batch, width))
        labels = torch.randint(0, vocab, (batch,))
        torch.nn.functional.cross_entropy(logits, labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        if every and step % every == 0:
            evaluate(model, eval_batch, config.get("eval_samples", 2 * eval_batch), width, vocab)
            evals += 1
        if save and step % save == 0:
            os.makedirs("%s/checkpoint-%d" % (out, step))
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                       "%s/checkpoint-%d/state.pt" % (out, step))
    print("trained %d steps at batch %d, %d evaluations at batch %d" % (steps, batch, evals,
                                                                        eval_batch))


if __name__ == "__main__":
    main()
