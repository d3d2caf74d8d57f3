# probe/local.mk - included by the top Makefile.am (one non-recursive make):
##-----------------------------------------------------------------------------
## probe/: autobatch-probe
##-----------------------------------------------------------------------------
pkglibexec_PROGRAMS = probe/autobatch-probe
probe_autobatch_probe_SOURCES = \
	probe/cmd_config.c \
	probe/cmd_presets.c \
	probe/cmd_ranks.c \
	probe/ranks.h \
	probe/ranks_step.c \
	probe/ranks_container.c \
	probe/cmd_run.c \
	probe/cmd_task.c \
	probe/cmd_watch.c \
	probe/commands.h \
	probe/cuda_module.c \
	probe/cuda_module.h \
	probe/main.c \
	probe/run.h \
	probe/run_config.c \
	probe/run_model.c \
	probe/run_opts.c \
	probe/run_output.c \
	# end of probe_autobatch_probe_SOURCES
probe_autobatch_probe_LDADD = lib/probe/libabprobe.la
probe_autobatch_probe_CPPFLAGS = $(AM_CPPFLAGS) $(ENGINE_CPPFLAGS)
