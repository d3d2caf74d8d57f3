# AB_CHECK_CFLAG(FLAGS, VARIABLE)
# Appends FLAGS to VARIABLE when the C compiler accepts them (with -Werror, so a flag that
# is merely warned about as unknown, as clang does, is not added).
AC_DEFUN([AB_CHECK_CFLAG], [
  AC_MSG_CHECKING([whether $CC accepts $1])
  ab_save_CFLAGS="$CFLAGS"
  CFLAGS="$CFLAGS -Werror $1"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes]); $2="$$2 $1"], [AC_MSG_RESULT([no])])
  CFLAGS="$ab_save_CFLAGS"
])

# AB_CHECK_LDFLAG(FLAGS, VARIABLE)
# Appends FLAGS to VARIABLE when the linker accepts them.
AC_DEFUN([AB_CHECK_LDFLAG], [
  AC_MSG_CHECKING([whether the linker accepts $1])
  ab_save_LDFLAGS="$LDFLAGS"
  LDFLAGS="$LDFLAGS $1"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes]); $2="$$2 $1"], [AC_MSG_RESULT([no])])
  LDFLAGS="$ab_save_LDFLAGS"
])
