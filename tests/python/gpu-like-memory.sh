# gpu-like-memory.sh - sourced by the tests and benchmarks that probe real PyTorch programs on
# the host: glibc hands each freed block over 64 KiB back at once, so resident memory follows
# the live tensors, as a GPU allocator's reserved memory does, the same for the probe and the
# plain runs it is checked against.
export MALLOC_MMAP_THRESHOLD_=65536

# huge_pages: what glibc maps for the programs run from here on gets transparent huge pages
# (glibc.malloc.hugetlb=1: madvise, which the kernel's default allows). Each block handed back
# and mapped again is otherwise faulted in 4 KiB at a time: on CI's 2-core VM most of a
# DDP step went to that (2 ranks of tests/python/ddp_train.py at batch 200, 4 steps: 133 s
# with 4 KiB pages, 28 s with huge ones; peaks 957 and 960 MiB). Only for the tests whose
# choices keep a margin (trials of several ranks keep 5% of the limit): a process's peak then
# moves by about 0.35% from run to run (plain_torch.py at batch 86: 427.4 to 429.0 MB in six
# runs, 426.3 to 426.4 MB with 4 KiB pages), which a choice made to the last sample of a
# 409 MiB limit does not absorb. Never where DataLoader workers fork: a worker then copies
# 2 MiB where it writes 4 KiB, and peaks moved by up to 1% from run to run (local CI run 23).
huge_pages() { export GLIBC_TUNABLES=glibc.malloc.hugetlb=1; }
