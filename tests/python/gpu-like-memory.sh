# gpu-like-memory.sh - sourced by the tests and benchmarks that probe real PyTorch programs on
# the host: glibc hands each freed block over 64 KiB back at once, so resident memory follows
# the live tensors, as a GPU allocator's reserved memory does, the same for the probe and the
# plain runs it is checked against.
export MALLOC_MMAP_THRESHOLD_=65536

# Each block handed back and mapped again is faulted in afresh: what glibc maps gets
# transparent huge pages (glibc.malloc.hugetlb=1: madvise, which the kernel's default
# allows), faulted in 2 MiB at a time, not 4 KiB. On CI's 2-core VMs a 4 KiB fault costs
# 13 us where freed pages go back to the host at once (page reporting; 2026-12-01: 1,280
# MiB mapped and touched in 4.37 s, 0.14 s with huge pages); plain_torch.py at batch 86,
# 8 steps: 28 s, 6.7 s with huge pages; python-hook.t 578 s, 205 s; a DDP step of 2 ranks
# 133 s, 28 s. Where each huge page falls depends on where the kernel places each mapping:
# with address randomization a process's peak moved by 0.46% from run to run (427.0 to
# 428.9 MB in five runs), more than a choice made to the last sample of a 409 MiB limit
# absorbs; without it by 0.04%, as 4 KiB pages did (fixed_layout below, the testbed's slurmd).
# Forked DataLoader workers copy a 2 MiB page where they write 4 KiB, so their share of a
# peak is larger and varies more: the frameworks stage's HF Trainer with two holds 766 MiB
# at batch 1 in 4 KiB pages, 786 in huge ones, and its test gives it the room (1.25 GiB).
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1

# fixed_layout SCRIPT [ARGS...]: runs the calling script again with address randomization
# off for it and all it starts (setarch -R; kept across exec), once; where setarch cannot,
# the script goes on as it is
fixed_layout() {
	[ -z "${AUTOBATCH_FIXED_LAYOUT:-}" ] || return 0
	AUTOBATCH_FIXED_LAYOUT=1
	export AUTOBATCH_FIXED_LAYOUT
	setarch "$(uname -m)" -R true 2>/dev/null || return 0
	exec setarch "$(uname -m)" -R "$@"
}
