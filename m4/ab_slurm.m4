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
