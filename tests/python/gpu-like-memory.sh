# gpu-like-memory.sh - sourced by the tests and benchmarks that probe real PyTorch programs on
# the host: glibc hands each freed block over 64 KiB back at once, so resident memory follows
# the live tensors, as a GPU allocator's reserved memory does, the same for the probe and the
# plain runs it is checked against. Not transparent huge pages (glibc.malloc.hugetlb=1): they
# halved a step's system time, but a forked DataLoader worker then copies 2 MiB where it
# writes 4 KiB, and peaks moved by up to 1% from run to run (local CI run 23: a Trainer with
# two workers read 800 MiB at batch 4, 776 MiB at 3 without; an Accelerate loop's plain run
# 819 MiB where its trial read 818, 813 without).
export MALLOC_MMAP_THRESHOLD_=65536
