"""results.py - device-check's results: JSON lines in, the report out.

Owns RESULTS/results.jsonl (every line {"stage": S, ...}; a stage's last line says done,
skipped or failed) and what is read back from it: whether a stage is done, the probe's
choices, and the report (bench/results/gpu-KIND.json and .md) that compares them with the
true maximum and with Lightning.

  results.py FILE add STAGE KEY=VALUE...       results.py FILE add-json STAGE REPORT KEY=VALUE...
  results.py FILE add-lines STAGE KEY=VALUE... (JSON lines on stdin; other lines are skipped)
  results.py FILE add-tap|add-bench STAGE OUTPUT
  results.py FILE done STAGE (exit 0 when done)  results.py FILE last STAGE
  results.py FILE field NAME KEY                 results.py FILE largest FRACTION
  results.py FILE report DIR                     results.py FILE summary
"""

import json
import os
import re
import sys

GiB = 1 << 30


def load(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and "stage" in rec:
                    out.append(rec)
    except FileNotFoundError:
        pass
    return out


def value(text):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def pairs(args):
    return {k: value(v) for k, _, v in (a.partition("=") for a in args)}


def append(path, rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec, sort_keys=False) + "\n")


def parse_tap(text):
    ok = len(re.findall(r"^ok ", text, re.M))
    bad = len(re.findall(r"^not ok ", text, re.M))
    plan = re.search(r"^1\.\.(\d+)", text, re.M)
    return {"tap_ok": ok, "tap_not_ok": bad, "tap_planned": int(plan.group(1)) if plan else None,
            "tap_failed_names": re.findall(r"^not ok \d+ - (.*)$", text, re.M)[:20]}


def parse_bench(text):
    out = {"models": []}
    m = re.search(r"device: (.*), ([0-9.]+) GiB; measured bf16 GEMM .*: ([0-9.]+) TFLOP/s", text)
    if m:
        out.update(device=m.group(1), gib=float(m.group(2)), gemm_tflops=float(m.group(3)))
    row = re.compile(r"^(.{20}) +([0-9.]+)B +(\d+) +(\d+) +([0-9.]+)s +([0-9.]+)s +(\d+) +(\d+)%$")
    # a shape that does not fit at all: a decision too ("even batch 1 does not fit: ...")
    none = re.compile(r"^(.{20}) +([0-9.]+)B +- +(\d+) +([0-9.]+)s +(\S.*)$")
    # the line under a shape's row: where its step goes, by kind of launch
    where = re.compile(r"^ +(unfused attention: )?where a step goes \(([0-9.]+) ms\):(.*) "
                       r"other (-?[0-9.]+)%$")
    for line in text.splitlines():
        r, n, w = row.match(line), none.match(line), where.match(line)
        if r:
            out["models"].append({"model": r.group(1).strip(), "params_b": float(r.group(2)),
                                  "batch": int(r.group(3)), "trials": int(r.group(4)),
                                  "decision_s": float(r.group(5)), "step_s": float(r.group(6)),
                                  "tflops": int(r.group(7)), "of_gemm_pct": int(r.group(8))})
        elif n:
            out["models"].append({"model": n.group(1).strip(), "params_b": float(n.group(2)),
                                  "batch": None, "trials": int(n.group(3)),
                                  "decision_s": float(n.group(4)), "note": n.group(5).strip()})
        elif w and out["models"]:
            kinds = re.findall(r" (\S+) (-?[0-9.]+)% \(([0-9.]+) ms, (\d+)\),", w.group(3))
            # the same batch's step with the unfused (cuBLAS) attention, beside the fused one
            out["models"][-1]["profile_unfused" if w.group(1) else "profile"] = {
                "step_ms": float(w.group(2)), "other_pct": float(w.group(4)),
                "kinds": {k: {"pct": float(p), "ms": float(ms), "launches": int(c)}
                          for k, p, ms, c in kinds}}
    return out


def probe_report(recs, name):
    for r in reversed(recs):
        if r.get("name") == name and isinstance(r.get("report"), dict):
            return r["report"]
    return None


def by_fraction(rep):
    if not rep:
        return []
    rows = rep.get("by_fraction") or []
    if not rows and "batch_size" in rep:
        rows = [{"fraction": rep.get("fraction"), "limit_bytes": rep.get("limit_bytes"),
                 "batch_size": rep.get("batch_size")}]
    return rows


def truths(recs, stage="exec"):
    return {r["limit_bytes"]: r for r in recs
            if r["stage"] == stage and "largest" in r and "limit_bytes" in r}


def fresh_edges(recs, stage="exec"):
    return {r["limit_bytes"]: r for r in recs
            if r["stage"] == stage and "largest_fresh" in r and "limit_bytes" in r}


def fresh_truth(f):
    """The fresh runs' largest fit, or None where the walk never saw that batch fit (the H100's
    edge at 1.0 recorded 81 after 82-85 failed and 81 was never run: a bound, not a truth),
    with the smallest batch seen over the limit."""
    runs = f.get("fresh_runs") or {}
    b = f.get("largest_fresh")
    if b is not None and (not runs or (runs.get(str(b)) is not None and runs[str(b)] <= f["limit_bytes"])):
        return b, None  # measured to fit, or a record that kept no runs
    over = [int(k) for k, v in runs.items() if v is None or v > f["limit_bytes"]]
    return None, min(over) if over else None


def verified(recs, stage):
    return {(r["verify_batch"], r["limit_bytes"]): r for r in recs
            if r["stage"] == stage and "verify_batch" in r}


def cmd_field(recs, name, key):
    if name == "truth":  # the in-process answers, in the order of the exec report's fractions
        tr = truths(recs)
        vals = [tr.get(row.get("limit_bytes"), {}).get(key)
                for row in by_fraction(probe_report(recs, "exec"))]
    elif name == "lightning":
        vals = [r[key] for r in recs if r["stage"] == "lightning" and "mode" in r and key in r]
    else:
        vals = [row.get(key) for row in by_fraction(probe_report(recs, name))]
    print(",".join(str(v) for v in vals if v is not None))


def cmd_largest(recs, fraction):
    for row in by_fraction(probe_report(recs, "exec")):
        if abs((row.get("fraction") or 0) - fraction) < 1e-6:
            t = truths(recs).get(row.get("limit_bytes"))
            if t:
                print(t["largest"])
            return
    print("")


def trials_and_seconds(rep):
    trials = rep.get("trials") or []
    return sum(t.get("runs", 1) for t in trials), rep.get("elapsed_s")


def startup(rep):
    """The trials' start-up (to each warm-up step's end, from a trial's release when it was
    started ahead), summed, and how many were started ahead."""
    trials = rep.get("trials") or []
    return (round(sum(t.get("startup_s") or 0 for t in trials), 1),
            sum(1 for t in trials if t.get("started_ahead")))


def exec_rows(recs, name="exec", stage="exec"):
    rep = probe_report(recs, name)
    if not rep:
        return []
    t_all, secs = trials_and_seconds(rep)
    start_s, ahead = startup(rep)
    rows, tr, ver, fresh = [], truths(recs, stage), verified(recs, stage), fresh_edges(recs, stage)
    for row in by_fraction(rep):
        limit, chosen = row.get("limit_bytes"), row.get("batch_size")
        t, v, f = tr.get(limit), ver.get((chosen, limit)), fresh.get(limit)
        # the truth: fresh plain runs where walked, else the in-process bisection
        fb, over = fresh_truth(f) if f else (None, None)
        true = fb if f else (t["largest"] if t else None)
        src = ("fresh runs" if fb is not None else f"not found: fresh runs from {over} up failed, "
               f"below not run (in one process: {t['largest'] if t else '-'})") if f else ("in-process" if t else None)
        rows.append({"fraction": row.get("fraction"), "limit_bytes": limit, "chosen": chosen,
                     "true_max": true, "true_max_from": src,
                     "in_process_max": t["largest"] if t else None,
                     "ratio": round(chosen / true, 4) if true and chosen else None,
                     "plain_run_fits": v["fits"] if v else None,
                     "plain_peak_bytes": v.get("peak_bytes") if v else None,
                     "trials": t_all, "seconds": secs, "startup_s": start_s,
                     "started_ahead": ahead})
    return rows


def lightning_rows(recs):
    out, ver = [], verified(recs, "lightning")
    for r in recs:
        if r["stage"] == "lightning" and "mode" in r:
            v = next((x for (b, _), x in ver.items() if b == r.get("batch")), None)
            out.append({"mode": r["mode"], "chosen": r.get("batch"), "trials": r.get("trials"),
                        "seconds": r.get("seconds"), "plain_run_fits": v["fits"] if v else None,
                        "plain_peak_bytes": v.get("peak_bytes") if v else None})
    return out


def kind_of(recs):
    env = next((r for r in recs if r["stage"] == "env"), {})
    if env.get("dry_run") == 1:
        return "host-dry-run", env
    name = str(env.get("gpu", "unknown")).split(",")[0]
    m = re.search(r"(H100|H200|A100|B200|GH200|L40S|[A-Z]\d{2,3})", name)
    return (m.group(1).lower() if m else re.sub(r"\W+", "-", name).strip("-").lower()), env


def gib(b):
    return "-" if b is None else f"{b / GiB:.1f}"


def markdown(rep):
    env = rep["env"]
    lines = [f"# autobatch on {rep['kind']}" + (" (DRY RUN on the host device: no GPU)" if rep["dry_run"] else ""), "",
             f"GPU: {env.get('gpu', '-')}; driver and compute capability as listed; "
             f"PyTorch (CUDA): {env.get('torch', '-')}; nvcc: {env.get('nvcc', '-')}; date: {env.get('date', '-')}", ""]
    k = rep.get("kernels") or {}
    if k:
        lines += [f"tests/gpu/run: {k.get('tap_ok')} ok, {k.get('tap_not_ok')} not ok of {k.get('tap_planned')}"
                  + (f" (failed: {'; '.join(k['tap_failed_names'])})" if k.get("tap_failed_names") else ""), ""]
        if k.get("gemm_tflops"):
            lines += [f"bf16 GEMM (cuBLAS 8192^3): {k['gemm_tflops']:.0f} TFLOP/s", "",
                      "| model | batch | trials | decision s | step s | TFLOP/s | of GEMM |",
                      "|---|---|---|---|---|---|---|"]
            lines += [f"| {m['model']} | {m['batch']} | {m['trials']} | {m['decision_s']} | {m['step_s']} | "
                      f"{m['tflops']} | {m['of_gemm_pct']}% |" if m.get("batch") else
                      f"| {m['model']} | none: {m.get('note', '')} | {m['trials']} | {m['decision_s']} | - | - | - |"
                      for m in k["models"]]
            lines.append("")
            prof = [m for m in k["models"] if m.get("profile")]
            if prof:
                kinds = list(prof[0]["profile"]["kinds"])
                lines += ["where a step goes, % of its GPU time by kind of launch (bench/kernels):", "",
                          "| model | step ms | " + " | ".join(kinds) + " | other |",
                          "|---|---|" + "---|" * (len(kinds) + 1)]
                lines += [f"| {name} | {p['step_ms']} | "
                          + " | ".join(f"{p['kinds'].get(c, {}).get('pct', '-')}" for c in kinds)
                          + f" | {p['other_pct']} |"
                          for m in prof
                          for name, p in ((m["model"], m["profile"]),
                                          (m["model"] + ", unfused attention", m.get("profile_unfused")))
                          if p]
                lines.append("")
    for title, key in (("exec mode, GPT-2 124M (seq 1024, bf16 autocast, AdamW)", "exec"),
                       ("exec mode with torch.compile", "compile"), ("Hugging Face Trainer", "hf"),
                       ("JAX: a transformer in plain JAX (GPT-2 124M shape, its own AdamW); its "
                        "truth within the XLA pool of its real run", "jax"),
                       ("Lightning with autobatch's LightningCallback", "lightning_callback")):
        rows = rep.get(key) or []
        if not rows:
            continue
        lines += [f"## {title}", "", "| fraction | limit GiB | chosen | its plain run GiB | fits | true max | from | chosen/true | trials | probe s | start-up s | started ahead |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['fraction']} | {gib(r['limit_bytes'])} | {r['chosen']} | {gib(r['plain_peak_bytes'])} | "
                  f"{r['plain_run_fits']} | {r['true_max'] or '-'} | {r['true_max_from'] or '-'} | {r['ratio'] or '-'} | "
                  f"{r['trials']} | {r['seconds'] and round(r['seconds'], 1)} | {r.get('startup_s', '-')} | "
                  f"{r.get('started_ahead', '-')} |" for r in rows]
        lines.append("")
    if rep.get("lightning"):
        lines += ["## Lightning's Tuner.scale_batch_size (whole GPU, no fraction)", "",
                  "| mode | chosen | trials | seconds | plain run fits | plain peak GiB |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['mode']} | {r['chosen']} | {r['trials']} | {r['seconds']} | {r['plain_run_fits']} | "
                  f"{gib(r['plain_peak_bytes'])} |" for r in rep["lightning"]]
        lines.append("")
    d = rep.get("ddp") or {}
    if d.get("alone") or d.get("runs"):
        a = d.get("alone") or {}
        lines += ["## the script as 2 DDP ranks sharing the GPU (gloo), against the probe's choice for it alone", "",
                  f"The probe, the script alone at {a.get('fraction')}: batch {a.get('chosen')} "
                  f"(limit {gib(a.get('limit_bytes'))} GiB), {a.get('trials')} trials.", "",
                  "| batch | whose | each rank's peak GiB | largest GiB | within the limit |", "|---|---|---|---|---|"]
        rk = d.get("ranks") or {}
        whose = {a.get("chosen"): "the script alone's choice"}
        if rk.get("status") == "ok":
            whose[rk.get("batch_size")] = "--ranks 2's choice"
        lines += [f"| {r['verify_batch']} | {whose.get(r['verify_batch'], '-')} | "
                  f"{', '.join(gib(p) for p in r.get('rank_peaks') or [])} | "
                  f"{gib(r.get('peak_bytes'))} | {r.get('fits')} |" for r in d.get("runs") or []]
        t, s = trials_and_seconds(rk) if rk.get("status") == "ok" else (None, None)
        lines += ["", "The probe with --ranks 2: " + (f"batch {rk.get('batch_size')} in {t} trials, {s and round(s, 1)} s"
                                                      if rk.get("status") == "ok"
                                                      else f"no decision: {rk.get('error') or rk.get('unreadable') or '-'}"), ""]
    e = rep.get("epoch")
    if e:
        lines += ["## a trainer with dynamic padding: its trial against its whole epoch (issue 41)", "",
                  "| chosen | limit GiB | trial peak GiB | epoch, watched (NVML) GiB | over the trial | "
                  "within the limit | epoch reserved GiB | allocated GiB | inactive split GiB | alloc retries | updates |",
                  "|---|---|---|---|---|---|---|---|---|---|---|",
                  f"| {e['chosen']} | {gib(e['limit_bytes'])} | {gib(e['trial_peak_bytes'])} | "
                  f"{gib(e['epoch_watch_bytes'])} | {e['over_trial']} | {e['within_limit']} | "
                  f"{gib(e['epoch_reserved_bytes'])} | {gib(e['epoch_allocated_bytes'])} | "
                  f"{gib(e['inactive_split_bytes'])} | {e['alloc_retries']} | {e['updates']} |", ""]
        x = e.get("expandable")
        if x:
            lines += ["The same epoch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: "
                      f"reserved {gib(x.get('peak_reserved_bytes'))} GiB, allocated "
                      f"{gib(x.get('peak_allocated_bytes'))} GiB, inactive split "
                      f"{gib(x.get('peak_inactive_split_bytes'))} GiB, {x.get('alloc_retries')} "
                      f"alloc retries; reserved against the default allocator's epoch {x.get('vs_default')}, "
                      f"status {x.get('status')}", ""]
    h = rep.get("held")
    if h:
        lines += ["## growth under 1 MiB a step, on the GPU (CUDA's live bytes, exact)", "",
                  f"plain_torch.py keeping 256 KiB a sample a step, batches 1-3, sized for {h.get('run_steps')} "
                  f"steps: chose {h.get('chosen')} (2 expected: 3 passes the limit by the last step); each trial's "
                  f"growth a step: {h.get('growth')}", ""]
    if rep.get("task"):
        lines += ["## one task of a whole-step trial (autobatch-probe task --gpu), against a plain run", "",
                  "| command | batch | task's peak GiB | plain run's peak GiB |", "|---|---|---|---|"]
        lines += [f"| {r['name']} | {r['batch']} | {gib(r['task_peak_bytes'])} | {gib(r['plain_peak_bytes'])} |"
                  for r in rep["task"]]
        lines.append("")
    if rep.get("model"):
        lines += ["## model mode, GPT-2 124M shape, against exec mode's true maximum", "",
                  "| fraction | model-mode batch | exec true max |", "|---|---|---|"]
        lines += [f"| {r['fraction']} | {r['batch']} | {r['true_max'] or '-'} |" for r in rep["model"]]
        lines.append("")
    if rep.get("oom"):
        o = rep["oom"]
        lines += ["## a real CUDA out-of-memory error", "",
                  f"batch {o.get('batch')}, a plain run: PyTorch's message implies at least {gib(o.get('message_floor_bytes'))} GiB "
                  f"(allocated by PyTorch + the request); NVML saw the process hold {gib(o.get('process_bytes_at_failure'))} GiB "
                  f"of {gib(o.get('total_bytes'))} GiB.", "",
                  f"The probe's trial at the same batch: its floor {gib(o.get('probe_peak_bytes'))} GiB; "
                  + ("that trial's own message was not kept (run before the oom stage kept trials)" if o.get("parser_ok") is None
                     else f"that trial's own message implies {gib(o.get('trial_message_floor_bytes'))} GiB: "
                     f"the parser {'reached' if o['parser_ok'] else 'MISSED'} it"), ""]
    stages = rep["stages"]
    lines += ["stages: " + ", ".join(f"{s} {e}" for s, e in stages.items()), ""]
    return "\n".join(lines)


def task_rows(recs):
    """The task stage: each task's peak beside a plain run's at its batch (ranks alike)."""
    plain = {r.get("ranks", 1): r.get("peak_bytes") for r in recs
             if r["stage"] == "task" and "verify_batch" in r}
    return [{"name": r["name"], "batch": r.get("batch_size"), "task_peak_bytes": r.get("task_peak_bytes"),
             "plain_peak_bytes": plain.get(r.get("ranks", 1))}
            for r in recs if r["stage"] == "task" and "task_peak_bytes" in r]


def epoch_row(recs):
    """The epoch stage: the choice's trial peak, its whole epoch's (the program's allocator,
    the watch's NVML figure) and what the epoch added: the margin many steps need."""
    probe = probe_report(recs, "epoch")
    run = next((r for r in reversed(recs) if r.get("name") == "epoch-run"), None)
    watch = next((r for r in reversed(recs) if r.get("name") == "epoch-watch"), None)
    if not probe or not run:
        return None
    chosen = probe.get("batch_size")
    trial = max((t.get("peak_bytes") or 0 for t in probe.get("trials", [])
                 if t.get("batch") == chosen and t.get("fits")), default=None)
    seen = (watch or {}).get("peak_bytes")
    exp = next((dict(r) for r in reversed(recs) if r.get("name") == "epoch-expandable"), None)
    if exp and run.get("peak_reserved_bytes") and exp.get("peak_reserved_bytes"):
        # reserved against reserved: the trial's and the watch's figures hold the context too
        exp["vs_default"] = round(exp["peak_reserved_bytes"] / run["peak_reserved_bytes"] - 1, 4)
    return {"chosen": chosen, "limit_bytes": run.get("limit_bytes"), "trial_peak_bytes": trial,
            "epoch_watch_bytes": seen, "epoch_reserved_bytes": run.get("peak_reserved_bytes"),
            "epoch_allocated_bytes": run.get("peak_allocated_bytes"),
            "alloc_retries": run.get("alloc_retries"), "updates": run.get("updates"),
            "inactive_split_bytes": run.get("peak_inactive_split_bytes"), "expandable": exp,
            "over_trial": round(seen / trial - 1, 4) if seen and trial else None,
            "within_limit": seen <= run["limit_bytes"] if seen and run.get("limit_bytes") else None}


def held_row(recs):
    """The held stage: the choice for a run whose growth a step is under the resident set's
    floor at every batch tried, and each trial's growth as the probe counted it."""
    probe = probe_report(recs, "held")
    expect = next((r for r in reversed(recs) if r.get("name") == "held-expect"), None)
    if not probe or not expect:
        return None
    growth = ", ".join(f"batch {t.get('batch')}: {t.get('held_growth_bytes', 0)}"
                       for t in probe.get("trials", []))
    return {"chosen": probe.get("batch_size"), "run_steps": expect.get("run_steps"), "growth": growth}


def cmd_report(recs, out_dir):
    kind, env = kind_of(recs)
    rep = {"kind": kind, "dry_run": env.get("dry_run") == 1, "env": env,
           "stages": {r["stage"]: r["event"] for r in recs if "event" in r}}
    tap = next((r for r in reversed(recs) if r["stage"] == "kernels" and "tap_ok" in r), None)
    bench = next((r for r in reversed(recs) if r["stage"] == "kernels" and "models" in r), None)
    rep["kernels"] = {**(tap or {}), **(bench or {})}
    rep["kernels"].pop("stage", None)
    rep["exec"] = exec_rows(recs)
    rep["compile"] = exec_rows(recs, "compile", "compile")
    rep["hf"] = exec_rows(recs, "hf", "hf")
    rep["jax"] = exec_rows(recs, "jax", "jax")
    rep["epoch"] = epoch_row(recs)
    rep["held"] = held_row(recs)
    rep["lightning_callback"] = exec_rows(recs, "lightning-callback", "lightning")
    rep["lightning"] = lightning_rows(recs)
    alone_rep = probe_report(recs, "ddp-alone")
    alone = by_fraction(alone_rep)
    t_all, secs = trials_and_seconds(alone_rep or {})
    rep["ddp"] = {"alone": {"fraction": alone[0].get("fraction"), "chosen": alone[0].get("batch_size"),
                            "limit_bytes": alone[0].get("limit_bytes"), "trials": t_all, "seconds": secs}
                  if alone else None,
                  "runs": [r for r in recs if r["stage"] == "ddp" and "verify_batch" in r],
                  "ranks": probe_report(recs, "ddp-ranks")}
    rep["task"] = task_rows(recs)
    truth = {r["limit_bytes"]: r["true_max"] for r in rep["exec"]}
    rep["model"] = [{"fraction": row.get("fraction"), "batch": row.get("batch_size"),
                     "true_max": truth.get(row.get("limit_bytes"))}
                    for row in by_fraction(probe_report(recs, "model"))]
    plain = next((r for r in recs if r["stage"] == "oom" and r.get("oom") is True and "message" in r), None)
    own = next((r for r in recs if r["stage"] == "oom" and r.get("source") == "probe_trial"), None)
    orep = probe_report(recs, "oom")
    if plain:
        # what the probe made of the trial (its floor), against that same trial's message
        pk = max(((t.get("peak_bytes") or t.get("peak_at_least_bytes") or 0)
                  for t in (orep or {}).get("trials") or []), default=None)
        floor = (own or {}).get("message_floor_bytes")
        rep["oom"] = {**plain, "probe_peak_bytes": pk, "trial_message_floor_bytes": floor,
                      "parser_ok": None if floor is None else bool(pk and pk >= floor)}
    rep["records"] = recs
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"gpu-{kind}")
    with open(base + ".json", "w") as f:
        json.dump(rep, f, indent=1)
        f.write("\n")
    with open(base + ".md", "w") as f:
        f.write(markdown(rep))
    print(f"{base}.json and {base}.md")


def main():
    path, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    recs = load(path)
    if cmd == "add":
        append(path, {"stage": args[0], **pairs(args[1:])})
    elif cmd == "add-json":
        try:
            with open(args[1]) as f:
                rep = json.load(f)
        except (OSError, ValueError) as e:
            rep = {"unreadable": str(e)}
        append(path, {"stage": args[0], **pairs(args[2:]), "report": rep})
    elif cmd == "add-lines":
        extra = pairs(args[1:])
        for line in sys.stdin:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                append(path, {"stage": args[0], **extra, **rec})
    elif cmd in ("add-tap", "add-bench"):
        text = open(args[1]).read() if os.path.exists(args[1]) else ""
        append(path, {"stage": args[0], **(parse_tap(text) if cmd == "add-tap" else parse_bench(text))})
    elif cmd == "done":
        return 0 if any(r["stage"] == args[0] and r.get("event") == "done" for r in recs) else 1
    elif cmd == "last":
        r = next((r for r in reversed(recs) if r["stage"] == args[0] and "event" in r), {})
        print(r.get("event", "?") + (f" in {r['seconds']} s" if "seconds" in r else "")
              + (f": {r['why']}" if r.get("why") else ""))
    elif cmd == "field":
        cmd_field(recs, args[0], args[1])
    elif cmd == "largest":
        cmd_largest(recs, float(args[0]))
    elif cmd == "report":
        cmd_report(recs, args[0])
    elif cmd == "summary":
        ev = {}
        for r in recs:
            if "event" in r:
                ev[r["stage"]] = r["event"]
        print("device-check: " + (", ".join(f"{s} {e}" for s, e in ev.items()) or "nothing run"))
    else:
        print(f"results.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
