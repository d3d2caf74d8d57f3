# lib/kernels/local.mk - included by the top Makefile.am (one non-recursive make):
##-----------------------------------------------------------------------------
## lib/kernels: the CUDA kernel library (the proxy training step), built with nvcc when
## ./configure finds CUDA; only autobatch-probe, tests/gpu and bench/kernels link it
##-----------------------------------------------------------------------------
# The same kernels and tests on a CPU emulator of the CUDA programming model: `make check`
# runs what tests/gpu checks without a GPU (indexing, layouts, cuBLAS shapes; not speed).
# It needs no CUDA toolkit (its headers are its own), so every build runs it; not under the
# sanitizers: ASan does not follow its coroutines' stacks.
if !SANITIZERS
EMU_TESTS = tests/gpu/test_kernels_emu
# Real PyTorch programs probed through the step hook: minutes of Python, no more of our C
# than test_exec runs under the sanitizers.
PYTHON_HOOK_TESTS = tests/unit/python-hook.t tests/unit/probe-ranks.t tests/unit/padded-batches.t \
	tests/unit/multi-part-batches.t tests/unit/eval-in-training.t tests/unit/checkpoint-save.t tests/unit/start-ahead.t
endif
# The emulator's program: the kernel library's .cu files and tests/gpu/test_kernels.cu with
# CUDA's launch syntax rewritten (translate.py), compiled as C++ against the emulator's own
# headers, linked with the probe engine.
tests_gpu_test_kernels_emu_SOURCES = \
	tests/gpu/emu/cublas_v2.h \
	tests/gpu/emu/cuda_bf16.h \
	tests/gpu/emu/cuda_runtime.h \
	tests/gpu/emu/emu.cpp \
	# end of tests_gpu_test_kernels_emu_SOURCES
EMU_GENERATED = \
	tests/gpu/emu-src/activations.cpp \
	tests/gpu/emu-src/adamw.cpp \
	tests/gpu/emu-src/attention.cpp \
	tests/gpu/emu-src/column_sums.cpp \
	tests/gpu/emu-src/cuda_device.cpp \
	tests/gpu/emu-src/encoder.cpp \
	tests/gpu/emu-src/flash_attention.cpp \
	tests/gpu/emu-src/gpt.cpp \
	tests/gpu/emu-src/layernorm.cpp \
	tests/gpu/emu-src/loss.cpp \
	tests/gpu/emu-src/matmul.cpp \
	tests/gpu/emu-src/test_kernels.cpp \
	# end of EMU_GENERATED
nodist_tests_gpu_test_kernels_emu_SOURCES = $(EMU_GENERATED)
tests_gpu_test_kernels_emu_CPPFLAGS = $(AM_CPPFLAGS) -DAB_EMULATOR \
	-I$(top_srcdir)/tests/gpu/emu $(ENGINE_CPPFLAGS)
tests_gpu_test_kernels_emu_CXXFLAGS = -std=c++17 -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter
tests_gpu_test_kernels_emu_LDADD = lib/probe/libabprobe.la
CLEANFILES += $(EMU_GENERATED)
EMU_TRANSLATOR = $(top_srcdir)/tests/gpu/emu/translate.py
EMU_TRANSLATE = $(AM_V_GEN)$(MKDIR_P) tests/gpu/emu-src && $(PYTHON3) $(EMU_TRANSLATOR)
tests/gpu/emu-src/activations.cpp: $(top_srcdir)/lib/kernels/activations.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/activations.cu $@
tests/gpu/emu-src/adamw.cpp: $(top_srcdir)/lib/kernels/adamw.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/adamw.cu $@
tests/gpu/emu-src/attention.cpp: $(top_srcdir)/lib/kernels/attention.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/attention.cu $@
tests/gpu/emu-src/cuda_device.cpp: $(top_srcdir)/lib/kernels/cuda_device.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/cuda_device.cu $@
tests/gpu/emu-src/encoder.cpp: $(top_srcdir)/lib/kernels/encoder.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/encoder.cu $@
tests/gpu/emu-src/flash_attention.cpp: $(top_srcdir)/lib/kernels/flash_attention.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/flash_attention.cu $@
tests/gpu/emu-src/gpt.cpp: $(top_srcdir)/lib/kernels/gpt.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/gpt.cu $@
tests/gpu/emu-src/column_sums.cpp: $(top_srcdir)/lib/kernels/column_sums.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/column_sums.cu $@
tests/gpu/emu-src/layernorm.cpp: $(top_srcdir)/lib/kernels/layernorm.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/layernorm.cu $@
tests/gpu/emu-src/loss.cpp: $(top_srcdir)/lib/kernels/loss.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/loss.cu $@
tests/gpu/emu-src/matmul.cpp: $(top_srcdir)/lib/kernels/matmul.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/lib/kernels/matmul.cu $@
tests/gpu/emu-src/test_kernels.cpp: $(top_srcdir)/tests/gpu/test_kernels.cu $(EMU_TRANSLATOR)
	$(EMU_TRANSLATE) $(top_srcdir)/tests/gpu/test_kernels.cu $@
EMU_FILES = $(EMU_TRANSLATOR)

CUDA_KERNEL_FILES = \
	lib/kernels/activations.cu \
	lib/kernels/adamw.cu \
	lib/kernels/attention.cu \
	lib/kernels/column_sums.cu \
	lib/kernels/cuda-module.map \
	lib/kernels/cuda_common.cuh \
	lib/kernels/cuda_device.cu \
	lib/kernels/encoder.cu \
	lib/kernels/flash_attention.cu \
	lib/kernels/gpt.cu \
	lib/kernels/gpt.h \
	lib/kernels/layernorm.cu \
	lib/kernels/layers.cuh \
	lib/kernels/loss.cu \
	lib/kernels/matmul.cu \
	lib/kernels/nccl_measure.cu \
	# end of CUDA_KERNEL_FILES
if HAVE_CUDA
noinst_LIBRARIES = lib/kernels/libabkernels.a
lib_kernels_libabkernels_a_SOURCES = \
	lib/kernels/activations.cu \
	lib/kernels/adamw.cu \
	lib/kernels/attention.cu \
	lib/kernels/column_sums.cu \
	lib/kernels/cuda_device.cu \
	lib/kernels/encoder.cu \
	lib/kernels/flash_attention.cu \
	lib/kernels/gpt.cu \
	lib/kernels/layernorm.cu \
	lib/kernels/loss.cu \
	lib/kernels/matmul.cu \
	# end of lib_kernels_libabkernels_a_SOURCES
if HAVE_NCCL
lib_kernels_libabkernels_a_SOURCES += lib/kernels/nccl_measure.cu
endif
KERNEL_LIBS = lib/kernels/libabkernels.a $(CUDA_LIBS) $(NCCL_LIBS)

# The probe dlopens this next to itself only when a GPU is asked for, so it starts fast and
# runs where CUDA is not installed. A libtool module of the kernels and its own copy of the
# engine they need. Nothing in it calls the entry points the probe looks up, so -u pulls
# them from the archive; the map keeps everything else local.
cudamoduleexecdir = $(pkglibexecdir)
cudamoduleexec_LTLIBRARIES = probe/autobatch-cuda.la
probe_autobatch_cuda_la_SOURCES =
CUDA_ENTRY_POINTS = -Wl,-u,ab_cuda_runtime_ops -Wl,-u,ab_model_cuda_trial
if HAVE_NCCL
CUDA_ENTRY_POINTS += -Wl,-u,ab_nccl_measure
endif
probe_autobatch_cuda_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	$(CUDA_ENTRY_POINTS) -Wl,-z,defs \
	-Wl,--version-script=$(top_srcdir)/lib/kernels/cuda-module.map
# the kernels before the CUDA libraries, which the linker keeps only as needed
probe_autobatch_cuda_la_LIBADD = lib/kernels/libabkernels.a lib/probe/libabprobe.la \
	$(CUDA_LIBS) $(NCCL_LIBS)
EXTRA_probe_autobatch_cuda_la_DEPENDENCIES = lib/kernels/cuda-module.map
# the build tree's probe finds the module beside itself, as the installed probe does
all-local: probe/autobatch-cuda.so
probe/autobatch-cuda.so: probe/autobatch-cuda.la
	$(AM_V_GEN)rm -f $@ && $(LN_S) .libs/autobatch-cuda.so $@
CLEANFILES += probe/autobatch-cuda.so
# the probe dlopens the .so; the libtool archive would only be clutter beside it
install-exec-hook:
	rm -f $(DESTDIR)$(pkglibexecdir)/autobatch-cuda.la
uninstall-hook-cuda:
	rm -f $(DESTDIR)$(pkglibexecdir)/autobatch-cuda.so
UNINSTALL_HOOKS += uninstall-hook-cuda

# built by `make` (CI compiles them without a GPU); tests/gpu/run runs the test on one
GPU_BINARIES = tests/gpu/test_kernels bench/kernels
tests_gpu_test_kernels_SOURCES = tests/gpu/test_kernels.cu
tests_gpu_test_kernels_LDADD = $(KERNEL_LIBS) lib/probe/libabprobe.la
bench_kernels_SOURCES = bench/kernels.cu
bench_kernels_LDADD = $(KERNEL_LIBS) lib/probe/libabprobe.la
endif
SUFFIXES = .cu
NVCC_COMPILE = $(NVCC) $(NVCCFLAGS) -include $(top_builddir)/config.h -I$(top_srcdir)/lib/core \
	$(ENGINE_CPPFLAGS)
.cu.o:
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC_COMPILE) -c -o $@ $<
