# AB_CHECK_SLURM_VERSION
# The Slurm release whose headers the plugin is built against (SLURM_VERSION_NUMBER from
# slurm/slurm_version.h), as AB_SLURM_VERSION in config.h and ab_slurm_version in the
# shell. Slurm loads a SPANK plugin only into the major release it was built for. Refuses
# releases older than 22.05; warns about releases newer than the newest CI runs (26.05).
AC_DEFUN([AB_CHECK_SLURM_VERSION], [
  AC_MSG_CHECKING([for the Slurm release of slurm/slurm_version.h])
  AC_COMPUTE_INT([ab_slurm_num], [SLURM_VERSION_NUMBER], [[#include <slurm/slurm_version.h>]],
    [AC_MSG_ERROR([slurm/slurm_version.h has no SLURM_VERSION_NUMBER: install Slurm's headers (Debian: apt-get install libslurm-dev)])])
  ab_slurm_version=`printf '%d.%02d.%d' $((ab_slurm_num >> 16)) $(((ab_slurm_num >> 8) & 255)) $((ab_slurm_num & 255))`
  AC_MSG_RESULT([$ab_slurm_version])
  AS_IF([test "$ab_slurm_num" -lt $((0x160500))],
    [AC_MSG_ERROR([Slurm $ab_slurm_version is older than 22.05, the oldest release autobatch is built and tested against (22.05, 24.11, 26.05)])])
  AS_IF([test "$ab_slurm_num" -ge $((0x1a0600))],
    [AC_MSG_WARN([Slurm $ab_slurm_version is newer than 26.05, the newest release autobatch's CI runs: run tests/run-all's Slurm suite before deploying])])
  AC_DEFINE_UNQUOTED([AB_SLURM_VERSION], ["$ab_slurm_version"],
    [the Slurm release the plugin is built against])
])

# AB_CHECK_SLURM_SIGNAL_STEP
# Which form the step calls take: slurm_get_job_steps and slurm_signal_job_step name a step by
# job id and step id up to 24.11, by a slurm_step_id_t pointer in 26.05. Defines
# HAVE_SLURM_SIGNAL_STEP_ID for the latter, whose slurm_load_job takes one by value too (the
# plugin lists and cancels the trial steps a cancelled probe left, and reads the job's GPU
# request).
AC_DEFUN([AB_CHECK_SLURM_SIGNAL_STEP], [
  AC_MSG_CHECKING([whether slurm_signal_job_step takes a slurm_step_id_t])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <slurm/slurm.h>]],
      [[slurm_step_id_t id = {0}; job_step_info_response_msg_t *r = NULL;
        return slurm_get_job_steps(&id, &r, SHOW_ALL) + slurm_signal_job_step(&id, 9);]])],
    [AC_MSG_RESULT([yes])
     AC_DEFINE([HAVE_SLURM_SIGNAL_STEP_ID], [1],
       [slurm_get_job_steps and slurm_signal_job_step take a slurm_step_id_t, as in Slurm 26.05])],
    [AC_MSG_RESULT([no])])
])

# AB_WITH_SLURM
# --with-slurm[=DIR] (default: yes) and --with-slurm-plugindir=DIR. Finds slurm/spank.h and
# the release (AB_CHECK_SLURM_VERSION), and the directory Slurm loads plugins from: Debian's
# multiarch slurm-wlm, /usr/lib64/slurm, /usr/lib/slurm, else LIBDIR/slurm. Sets
# SLURM_CPPFLAGS, SLURM_PLUGINDIR and the HAVE_SLURM conditional; --without-slurm builds the
# probe and its tests alone.
AC_DEFUN([AB_WITH_SLURM], [
  AC_ARG_WITH([slurm],
    [AS_HELP_STRING([--with-slurm=DIR], [Slurm installation prefix (default: /usr)])],
    [], [with_slurm=yes])
  AC_ARG_WITH([slurm-plugindir],
    [AS_HELP_STRING([--with-slurm-plugindir=DIR],
      [where Slurm loads plugins from (default: detected, else LIBDIR/slurm)])],
    [SLURM_PLUGINDIR="$withval"], [SLURM_PLUGINDIR=""])

  AS_IF([test "x$with_slurm" != xno], [
    AS_IF([test "x$with_slurm" != xyes], [SLURM_CPPFLAGS="-I$with_slurm/include"])
    ab_save_CPPFLAGS="$CPPFLAGS"
    CPPFLAGS="$CPPFLAGS $SLURM_CPPFLAGS"
    AC_CHECK_HEADER([slurm/spank.h], [],
      [AC_MSG_ERROR([slurm/spank.h not found: install Slurm's headers (Debian: apt-get install libslurm-dev), give --with-slurm=DIR, or build without the plugin with --without-slurm])])
    AB_CHECK_SLURM_VERSION
    AB_CHECK_SLURM_SIGNAL_STEP
    CPPFLAGS="$ab_save_CPPFLAGS"
    AS_IF([test -z "$SLURM_PLUGINDIR"], [
      AC_MSG_CHECKING([for the Slurm plugin directory])
      ab_multiarch=`$CC -print-multiarch 2>/dev/null`
      for ab_dir in ${ab_multiarch:+"/usr/lib/$ab_multiarch/slurm-wlm"} /usr/lib64/slurm /usr/lib/slurm; do
        AS_IF([test -d "$ab_dir"], [SLURM_PLUGINDIR="$ab_dir"; break])
      done
      AS_IF([test -z "$SLURM_PLUGINDIR"], [SLURM_PLUGINDIR='${libdir}/slurm'])
      AC_MSG_RESULT([$SLURM_PLUGINDIR])
    ])
  ])
  AM_CONDITIONAL([HAVE_SLURM], [test "x$with_slurm" != xno])
  AC_SUBST([SLURM_CPPFLAGS])
  AC_SUBST([SLURM_PLUGINDIR])
])
