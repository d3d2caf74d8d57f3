# lib/probe/local.mk - included by the top Makefile.am (one non-recursive make):
##-----------------------------------------------------------------------------
## lib/probe: the probe engine, for autobatch-probe only (the search, devices and the
## simulator, trials in exec and model mode, NVML, model sizes and the CPU reference step,
## reports and plots)
##-----------------------------------------------------------------------------
noinst_LTLIBRARIES += lib/probe/libabprobe.la
lib_probe_libabprobe_la_SOURCES = \
	lib/probe/device.c \
	lib/probe/device.h \
	lib/probe/group_memory.c \
	lib/probe/group_memory.h \
	lib/probe/model.c \
	lib/probe/model.h \
	lib/probe/nvml.c \
	lib/probe/nvml.h \
	lib/probe/reference.c \
	lib/probe/reference.h \
	lib/probe/report.c \
	lib/probe/report.h \
	lib/probe/report_svg.c \
	lib/probe/report_run.c \
	lib/probe/report_run.h \
	lib/probe/search.c \
	lib/probe/search_trials.c \
	lib/probe/search.h \
	lib/probe/search_aim.c \
	lib/probe/search_candidates.c \
	lib/probe/search_model.c \
	lib/probe/search_rounds.c \
	lib/probe/search_run.h \
	lib/probe/sim.c \
	lib/probe/sim.h \
	lib/probe/trial.h \
	lib/probe/trial_exec.c \
	lib/probe/trial_exec.h \
	lib/probe/trial_container.c \
	lib/probe/trial_container.h \
	lib/probe/trial_files.c \
	lib/probe/trial_round.c \
	lib/probe/trial_round.h \
	lib/probe/trial_files.h \
	lib/probe/trial_model.c \
	lib/probe/trial_model.h \
	lib/probe/trial_report.c \
	lib/probe/trial_report.h \
	# end of lib_probe_libabprobe_la_SOURCES
lib_probe_libabprobe_la_CPPFLAGS = $(AM_CPPFLAGS) $(ENGINE_CPPFLAGS)
lib_probe_libabprobe_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
lib_probe_libabprobe_la_LIBADD = lib/core/libabcore.la $(JSONC_LIBS) -lm
ENGINE_CPPFLAGS = -I$(top_srcdir)/lib/probe -I$(top_srcdir)/lib/kernels
