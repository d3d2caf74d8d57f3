#!/bin/sh
# device-check.t - tests/gpu/device-check without a GPU (TAP): one line and exit 77 with no
# GPU, its arguments, the resume and deadline logic, the report on the results recorded on an
# H200 (bench/results/gpu-h200.jsonl), and a dry run of the exec stage on the host device
# (the real probe, Debian's PyTorch, the tiny GPT-2) labelled as a dry run.
src=$(cd "$(dirname "$0")/../.." && pwd)
dc=$src/tests/gpu/device-check
build=$(pwd)
dir=$(mktemp -d /tmp/autobatch-device-check.XXXXXX)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/tap.sh"
# PYTHON: another interpreter (one without PyTorch shows what distcheck does there)
py=${PYTHON:-/usr/bin/python3}
echo "1..14"

mkdir "$dir/bin"
if [ -e /usr/bin/nvidia-smi ] || [ -e /bin/nvidia-smi ]; then
	echo "ok 1 # SKIP this machine has nvidia-smi"
	n=1
else
	PATH=$dir/bin:/usr/bin:/bin "$dc" all >"$dir/nogpu.out" 2>&1
	echo $? >"$dir/nogpu.rc"
	check "no GPU: one line naming it, exit 77" \
		sh -c "test \$(cat '$dir/nogpu.rc') = 77 && test \$(wc -l <'$dir/nogpu.out') = 1 &&
		       grep -q '^device-check: no NVIDIA GPU here (nvidia-smi lists none)' '$dir/nogpu.out'"
fi

"$dc" --dry-run kernals >"$dir/bad.out" 2>&1
check "an unknown stage is named, with the ones there are, exit 2" \
	sh -c "test $? = 2 && grep -q \"unknown stage 'kernals': use build, kernels, exec\" '$dir/bad.out'"

"$dc" --dry-run --deadline soon exec >"$dir/dl.out" 2>&1
check "--deadline takes whole seconds, exit 2" \
	sh -c "test $? = 2 && grep -q \"deadline takes whole seconds, not 'soon'\" '$dir/dl.out'"

# resume: the H200's results say exec was done; a run resumes past it
mkdir "$dir/r"
cp "$src/bench/results/gpu-h200.jsonl" "$dir/r/results.jsonl"
BUILD=$build "$dc" --dry-run --results "$dir/r" --report-dir "$dir/r" exec >"$dir/resume.out" 2>&1
check "a stage done earlier is skipped, saying how to rerun it" \
	sh -c "grep -q 'exec: done earlier ($dir/r/results.jsonl), skipped; --again reruns it' '$dir/resume.out' &&
	       test \$(grep -c '\"stage\": \"exec\", \"event\"' '$dir/r/results.jsonl') = 1"

BUILD=$build "$dc" --dry-run --results "$dir/r" --deadline 1 --again exec >"$dir/late.out" 2>&1
check "a stage that cannot finish before the deadline is not started, and stays to do" \
	sh -c "grep -q 'exec: not started, [01] s of the deadline left and it needs up to 330 s; run it again to resume' '$dir/late.out' &&
	       test \$(grep -c '\"stage\": \"exec\", \"event\"' '$dir/r/results.jsonl') = 1"

# the report, on what the H200 recorded
"$py" "$src/tests/gpu/results.py" "$src/bench/results/gpu-h200.jsonl" report "$dir/rep" >/dev/null
check "report: kind h200, the kernel tests, the GEMM rate and the 7B decision" \
	sh -c "grep -q '^# autobatch on h200\$' '$dir/rep/gpu-h200.md' &&
	       grep -q '^tests/gpu/run: 55 ok, 0 not ok of 55' '$dir/rep/gpu-h200.md' &&
	       grep -q '^bf16 GEMM (cuBLAS 8192^3): 782 TFLOP/s' '$dir/rep/gpu-h200.md' &&
	       grep -q '^| 7B (Llama-2 shape) | 12 | 3 | 46.8 |' '$dir/rep/gpu-h200.md'"
check "report: exec mode's choice at 0.8 against its plain run and the truth (its trials' start-up, none started ahead then), Lightning's two modes" \
	sh -c "grep -q '^| 0.8 | 111.8 | 110 | 111.1 | True | 109 | in-process | 1.0092 | 7 | 64.7 | 58.6 | 0 |\$' '$dir/rep/gpu-h200.md' &&
	       grep -q '^| power | 128 | 8 | 11.91 | True |' '$dir/rep/gpu-h200.md' &&
	       grep -q '^| binsearch | 133 | 15 | 20.19 | True |' '$dir/rep/gpu-h200.md' &&
	       $py -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"kind\"]==\"h200\" and not r[\"dry_run\"] and r[\"exec\"][1][\"chosen\"]==110' '$dir/rep/gpu-h200.json'"

# the H100's run: a shape that does not fit at all is a decision too, and the Trainer job
"$py" "$src/tests/gpu/results.py" "$src/bench/results/gpu-h100.jsonl" report "$dir/rep" >/dev/null
check "report: the H100's 7B shape that does not fit is a row, the Trainer job's choice at 0.8, no truth at 1.0 where no fresh run fit" \
	sh -c "grep -q '^| 7B (Llama-2 shape) | none: even batch 1 does not fit: it ran out of memory (limit 71.3 GiB) | 1 | 0.2 |' '$dir/rep/gpu-h100.md' &&
	       grep -q '^| 1.0 | 79.2 | 77 | 78.2 | True | - | not found: fresh runs from 82 up failed, below not run (in one process: 84) | - |' '$dir/rep/gpu-h100.md' &&
	       grep -q '^| 0.9 | 71.3 | 69 | 70.3 | True | 70 | fresh runs | 0.9857 |' '$dir/rep/gpu-h100.md' &&
	       grep -A4 '^## Hugging Face Trainer' '$dir/rep/gpu-h100.md' | grep -q '^| 0.8 | 63.3 | 42 |'"

# a Trainer prints its metrics as Python dicts ({'loss': ...}) on stdout: the program's report
# is its last JSON object with a batch size (the H100's run stopped at the first such line)
printf '%s\n' "{'loss': 10.9, 'grad_norm': 1.5}" '{"batch_size": 42, "peak_reserved_bytes": 7}' \
	"{'train_runtime': 3.2, 'epoch': 1.0}" '{"not": "ours"}' >"$dir/hf.out"
check "truth: the program's report is its last JSON line with a batch size, past a Trainer's dicts" \
	"$py" -c "import sys; sys.path.insert(0, sys.argv[1]); import truth
r = truth.program_report(open(sys.argv[2]).read())
assert r == {'batch_size': 42, 'peak_reserved_bytes': 7}, r" "$src/tests/gpu" "$dir/hf.out"

# bench/kernels' profile line under a shape's row, as its printf writes it (the figures are
# made up, not a measurement: no GPU has run the profile yet), into the report's table
{
	echo 'device: NVIDIA H100 80GB HBM3, 79.2 GiB; measured bf16 GEMM (cuBLAS, 8192^3): 785 TFLOP/s'
	echo 'GPT-2 124M              0.12B     98       3      4.1s   0.793s       108        14%'
	printf '%-20s where a step goes (%.1f ms): matmul 45.1%% (357.6 ms, 98), attention 30.2%% (239.5 ms, 24), loss 8.0%% (63.4 ms, 1), other 16.7%%\n' '' 793
	printf '%-20s unfused attention: where a step goes (%.1f ms): matmul 40.1%% (357.6 ms, 98), attention 40.2%% (358.5 ms, 24), loss 7.1%% (63.4 ms, 1), other 12.6%%\n' '' 891.6
	echo '7B (Llama-2 shape)      5.18B      -       1      0.2s  even batch 1 does not fit: it ran out of memory (limit 71.3 GiB)'
} >"$dir/bench.txt"
printf 'ok 1 - x\n1..1\n' >"$dir/tap.txt"
rm -f "$dir/p.jsonl"
"$py" "$src/tests/gpu/results.py" "$dir/p.jsonl" add env "gpu=NVIDIA H100 80GB HBM3, 81559" dry_run=0 &&
	"$py" "$src/tests/gpu/results.py" "$dir/p.jsonl" add-tap kernels "$dir/tap.txt" &&
	"$py" "$src/tests/gpu/results.py" "$dir/p.jsonl" add-bench kernels "$dir/bench.txt" &&
	"$py" "$src/tests/gpu/results.py" "$dir/p.jsonl" report "$dir/prep" >/dev/null
check "report: where a shape's step goes, by kind of launch, fused and unfused attention, from bench/kernels' lines under its row" \
	sh -c "grep -q '^| model | step ms | matmul | attention | loss | other |' '$dir/prep/gpu-h100.md' &&
	       grep -q '^| GPT-2 124M | 793.0 | 45.1 | 30.2 | 8.0 | 16.7 |' '$dir/prep/gpu-h100.md' &&
	       grep -q '^| GPT-2 124M, unfused attention | 891.6 | 40.1 | 40.2 | 7.1 | 12.6 |' '$dir/prep/gpu-h100.md' &&
	       grep -q '^| 7B (Llama-2 shape) | none: even batch 1' '$dir/prep/gpu-h100.md'"

# the ddp stage's report, on what its dry run recorded on the host (bench/results/
# host-dry-run-ddp.jsonl: device-check --dry-run build ddp report, 2 min on two cores, too long
# to run here): the script alone's choice goes over as 2 ranks, the --ranks 2 choice fits
"$py" "$src/tests/gpu/results.py" "$src/bench/results/host-dry-run-ddp.jsonl" report "$dir/ddp" >/dev/null
check "report: the ddp stage, today's way against --ranks 2, each rank's peak" \
	sh -c "grep -q '^# autobatch on host-dry-run (DRY RUN' '$dir/ddp/gpu-host-dry-run.md' &&
	       grep -q '^| 32 | the script alone.s choice | 0.3, 0.3 | 0.3 | False |' '$dir/ddp/gpu-host-dry-run.md' &&
	       grep -q '^| 19 | --ranks 2.s choice | 0.3, 0.3 | 0.3 | True |' '$dir/ddp/gpu-host-dry-run.md' &&
	       grep -q '^The probe with --ranks 2: batch 19 in 6 trials' '$dir/ddp/gpu-host-dry-run.md'"

# a dry run of the exec stage: the real probe on the host device, the tiny GPT-2, the truth
# (not again in distcheck's second pass of the same tests: tests/slurm-release-inside sets
# AUTOBATCH_QUICK_CHECK there)
python_or_skip "$py" 'import torch' PyTorch 12 14
BUILD=$build "$dc" --dry-run --results "$dir/d" --report-dir "$dir/d" \
	build exec report >"$dir/dry.out" 2>&1
check "dry run: the probe chose a batch for the tiny GPT-2 on the host, exec done" \
	sh -c "grep -q '^device-check: exec: done in' '$dir/dry.out' &&
	       grep -q '\"name\": \"exec\", \"status\": 0, .*\"status\": \"ok\"' '$dir/d/results.jsonl'" ||
	tail -n 20 "$dir/d/device-check.log"
check "dry run: a true maximum by bisection on plain runs, and the choice run plain" \
	sh -c "grep -q '\"stage\": \"exec\", \"dry_run\": 1, \"limit_bytes\": [0-9]*, \"largest\": [1-9]' '$dir/d/results.jsonl' &&
	       grep -q '\"stage\": \"exec\", \"dry_run\": 1, \"verify_batch\": [1-9]' '$dir/d/results.jsonl'"
check "dry run: the report says it is one, and names no GPU" \
	sh -c "grep -q '^# autobatch on host-dry-run (DRY RUN on the host device: no GPU)' '$dir/d/gpu-host-dry-run.md' &&
	       grep -q '^| 0.5 | 0\\.[0-9] | [1-9]' '$dir/d/gpu-host-dry-run.md'"
exit $failed
