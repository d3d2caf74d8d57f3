#!/bin/sh
# probe-model.t - `autobatch-probe run --mode model` without a GPU: the proxy model's
# dimensions from --model and from framework configs, the CPU reference step measured on the
# host device through the same search, and every refusal (TAP).
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
dir=$(mktemp -d /tmp/autobatch-probe-model.XXXXXX)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/tap.sh"
num() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" "$1" | head -n1; }

echo "1..8"

tiny=layers=1,hidden=32,heads=2,seq=8,vocab=50
"$probe" run --mode model --device host:capacity=256MiB --model $tiny --steps 1 \
	--json "$dir/host.json" 2>"$dir/host.err"
check "model mode on the host: status ok, mode model, the proxy named in the report" \
	sh -c "grep -q '\"status\":\"ok\"' '$dir/host.json' && grep -q '\"mode\":\"model\"' '$dir/host.json' &&
	       grep -q '\"model\":\"1 layers, hidden 32, 2 heads, ffn 128, seq 8, vocab 50, bf16' '$dir/host.json'"
# the chosen batch was measured and fits: its trial is in the list with fits true and a peak
# under the limit
b=$(num "$dir/host.json" batch_size) limit=$(num "$dir/host.json" limit_bytes)
check "the chosen batch ($b) was measured to fit under the limit" \
	sh -c "test -n '$b' && test '$b' -gt 16 &&
	       grep -Eq '\\{\"batch\":$b,\"fits\":true,\"peak_bytes\":[0-9]+' '$dir/host.json' &&
	       p=\$(grep -Eo '\\{\"batch\":$b,\"fits\":true,\"peak_bytes\":[0-9]+' '$dir/host.json' | grep -Eo '[0-9]+\$') &&
	       test \"\$p\" -le '$limit'"
check "memory grows with the batch: the peak of the largest fitting trial is above batch 1's" \
	sh -c "grep -Eq '\\{\"batch\":1,\"fits\":true,\"peak_bytes\":[0-9]+' '$dir/host.json' &&
	       p1=\$(grep -Eo '\\{\"batch\":1,\"fits\":true,\"peak_bytes\":[0-9]+' '$dir/host.json' | grep -Eo '[0-9]+\$') &&
	       pb=\$(grep -Eo '\\{\"batch\":$b,\"fits\":true,\"peak_bytes\":[0-9]+' '$dir/host.json' | grep -Eo '[0-9]+\$') &&
	       test \"\$pb\" -gt \$((p1 + 20000000))"

# a Hugging Face config.json: no batch keys, dimensions only
cat >"$dir/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
 "num_attention_heads": 4, "num_hidden_layers": 1, "max_position_embeddings": 32,
 "vocab_size": 2000, "torch_dtype": "float32"}
JSON
"$probe" run --mode model --device host:capacity=256MiB --config "$dir/config.json" --steps 1 \
	--max 64 --json "$dir/hf.json" 2>"$dir/hf.err"
check "dimensions from a Hugging Face config.json (detected by its model keys)" \
	sh -c "grep -q '\"model\":\"1 layers, hidden 32, 4 heads, ffn 64, seq 32, vocab 2000, fp32' '$dir/hf.json' &&
	       grep -q '\"batch_size\":64' '$dir/hf.json' && grep -q '^autobatch: proxy model: 1 layers' '$dir/hf.err'"

printf 'model:\n  micro_batch_size: 4\n  hidden_size: 32\n  num_layers: 1\n  num_attention_heads: 2\n  encoder_seq_length: 32\n' >"$dir/nemo.yaml"
"$probe" run --mode model --device host --config "$dir/nemo.yaml" --json "$dir/nemo.json" 2>/dev/null
check "a dimension the config lacks is named with the --model field that gives it" \
	sh -c "test $? -eq 1 && grep -q 'preset nemo names no key for the model.s vocab: give it with --model vocab=N' '$dir/nemo.json'"
"$probe" run --mode model --device host:capacity=256MiB --config "$dir/nemo.yaml" --model vocab=2000 \
	--steps 1 --max 32 --json "$dir/nemo2.json" 2>"$dir/nemo2.err"
check "--model fills what the config lacks; the config's batch (4) is where the search starts" \
	sh -c "grep -q '\"status\":\"ok\"' '$dir/nemo2.json' && grep -q 'trial 1: batch 4 ' '$dir/nemo2.err'"

check "refusals: no dimensions, a simulated device, a bad field" \
	sh -c "'$probe' run --mode model --device host 2>&1 | grep -q 'needs the model.s dimensions: --config FILE' &&
	       '$probe' run --mode model --device sim:total=1GiB --model $tiny 2>&1 | grep -q 'runs the proxy step for real' &&
	       '$probe' run --mode model --device host --model layers=2,hidden=30,heads=4,seq=8,vocab=9 2>&1 | grep -q 'hidden size 30 is not a multiple of its 4 heads'"
# a trial whose CPU steps outlast --trial-seconds: the batch named, and what bounds it
"$probe" run --mode model --device host:capacity=8GiB --model layers=2,hidden=64,heads=4,seq=64,vocab=1000 \
	--start 1024 --min 1024 --trial-seconds 1 --json "$dir/slow.json" 2>"$dir/slow.err"
check "a trial slower than --trial-seconds names its batch and the ways round it" \
	grep -q "batch 1024: the CPU reference steps (its warm-up and --steps) did not finish in 1 s (--trial-seconds): on the host, model mode trains the proxy on the CPU, slower the larger the batch; bound it with --max" "$dir/slow.err"
exit $failed
