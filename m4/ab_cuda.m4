# AB_WITH_CUDA
# --with-cuda[=DIR] (default: detect). Finds nvcc on PATH, DIR/bin or /usr/local/cuda/bin,
# the toolkit it belongs to, cuda_runtime.h and cublas_v2.h; then NCCL (nccl.h). Sets
# HAVE_CUDA and HAVE_NCCL (config.h and conditionals), NVCC, NVCCFLAGS (for NVCC_ARCH, or sm_80
# and sm_90 machine code), CUDA_CPPFLAGS, CUDA_LIBS and NCCL_LIBS. Without CUDA the probe
# has the host and sim devices; --with-cuda=DIR that finds no toolkit is an error.
AC_DEFUN([AB_WITH_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit prefix (default: detect)])],
    [], [with_cuda=check])
  AC_ARG_VAR([NVCC_ARCH], [nvcc code generation (default: sm_80 and sm_90 machine code)])
  have_cuda=no
  AS_IF([test "x$with_cuda" != xno], [
    ab_cuda_path="$PATH:/usr/local/cuda/bin"
    AS_IF([test "x$with_cuda" != xcheck -a "x$with_cuda" != xyes],
          [ab_cuda_path="$with_cuda/bin:$ab_cuda_path"])
    AC_PATH_PROG([NVCC], [nvcc], [], [$ab_cuda_path])
    AS_IF([test -n "$NVCC"], [
      # nvcc's parent is not always the toolkit (/usr/local/bin/nvcc may be a script that
      # execs the real one): nvcc names its own toolkit as TOP in a dry run.
      AC_MSG_CHECKING([for the CUDA toolkit nvcc belongs to])
      ab_top=`"$NVCC" --dryrun -E -x cu /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1`
      AS_IF([test -n "$ab_top" && test -d "$ab_top"], [CUDA_HOME=`cd "$ab_top" && pwd -P`],
            [CUDA_HOME=`dirname "$NVCC"`; CUDA_HOME=`dirname "$CUDA_HOME"`])
      AC_MSG_RESULT([$CUDA_HOME])
      CUDA_CPPFLAGS="-I$CUDA_HOME/include"
      CUDA_LIBS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcublas -lcudart -lstdc++"
      ab_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
      AC_CHECK_HEADER([cuda_runtime.h],
        [AC_CHECK_HEADER([cublas_v2.h], [have_cuda=yes])])
      CPPFLAGS="$ab_save_CPPFLAGS"
    ])
    AS_IF([test "x$have_cuda" = xno -a "x$with_cuda" != xcheck],
          [AC_MSG_ERROR([CUDA requested but nvcc, cuda_runtime.h or cublas_v2.h not found under $with_cuda])])
  ])
  AS_IF([test "x$have_cuda" = xyes], [
    AC_DEFINE([HAVE_CUDA], [1], [the CUDA kernel library and the cuda:N device are built])
    : ${NVCC_ARCH="--generate-code arch=compute_80,code=sm_80 --generate-code arch=compute_90,code=sm_90"}
    NVCCFLAGS="-O3 -std=c++17 $NVCC_ARCH -Xcompiler -Wall,-Wextra,-fPIC -Werror all-warnings"
    AS_IF([test "x$enable_werror" = xyes], [NVCCFLAGS="$NVCCFLAGS -Xcompiler -Werror"])
  ])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCCFLAGS])

  have_nccl=no
  AS_IF([test "x$have_cuda" = xyes], [
    ab_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
    AC_CHECK_HEADER([nccl.h], [have_nccl=yes])
    CPPFLAGS="$ab_save_CPPFLAGS"
  ])
  AS_IF([test "x$have_nccl" = xyes], [
    AC_DEFINE([HAVE_NCCL], [1], [all-reduce is measured across the probe's GPUs])
    NCCL_LIBS="-lnccl"
  ])
  AC_SUBST([NCCL_LIBS])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$have_nccl" = xyes])
])
