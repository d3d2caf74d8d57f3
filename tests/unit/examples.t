#!/bin/sh
# examples.t - the example job scripts are valid shell and their configs are found by the
# presets autobatch will use (TAP).
. "$(dirname "$0")/tap.sh"
probe=${AUTOBATCH_PROBE:-probe/autobatch-probe}
ex=$(dirname "$0")/../../contrib/examples
echo "1..8"
for s in pytorch_ddp deepspeed hf_trainer maxtext; do
	check "$s.sbatch is valid bash" bash -n "$ex/$s.sbatch"
done
check "ds_config.json: deepspeed" sh -c "test \"\$('$probe' config detect '$ex/ds_config.json')\" = deepspeed"
check "hf_sft.yaml: huggingface" sh -c "test \"\$('$probe' config detect '$ex/hf_sft.yaml')\" = huggingface"
check "maxtext.yml: maxtext" sh -c "test \"\$('$probe' config detect '$ex/maxtext.yml')\" = maxtext"
check "train.yaml: the key named in the script exists" sh -c "test \"\$('$probe' config get '$ex/train.yaml' train.batch_size)\" = 32"
exit $failed
