# gpu-like-memory.sh - sourced by the tests and benchmarks that probe real PyTorch programs on
# the host: resident memory then follows the live tensors, as a GPU allocator's reserved
# memory does, the same for the probe and the plain runs it is checked against.
# - glibc hands each freed block over 64 KiB back at once (MALLOC_MMAP_THRESHOLD_);
# - those blocks are backed by transparent huge pages where the kernel offers them
#   (glibc.malloc.hugetlb=1: madvise, as THP's default "madvise" mode asks): a step's tensors
#   fault in 2 MiB at a time, not 4 KiB, as a GPU allocator hands out 2 MiB blocks. Measured
#   (plain_torch.py, batch 64, 20 steps): 6.6 s of system time without, 3.0-3.9 s with it;
#   peak resident memory within 1%.
export MALLOC_MMAP_THRESHOLD_=65536
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
