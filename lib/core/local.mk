# lib/core/local.mk - included by the top Makefile.am (one non-recursive make):
##-----------------------------------------------------------------------------
## lib/core: the plugin core, what srun, sbatch, salloc and slurmstepd need (settings and
## policy, configs, presets, the decision, the cache, spawning a process); the only library
## autobatch.so links. Its headers include nothing of lib/probe: spank/ is compiled with
## -I lib/core alone, so a slip is a compile error.
##-----------------------------------------------------------------------------
noinst_LTLIBRARIES = lib/core/libabcore.la
lib_core_libabcore_la_SOURCES = \
	lib/core/argv.c \
	lib/core/argv.h \
	lib/core/cache.c \
	lib/core/cache.h \
	lib/core/clock.h \
	lib/core/config_edit.h \
	lib/core/config_edits.c \
	lib/core/config_file.c \
	lib/core/config_json.c \
	lib/core/config_keys.c \
	lib/core/config_keys.h \
	lib/core/config_load.c \
	lib/core/config_lookup.c \
	lib/core/config_nodes.c \
	lib/core/config_nodes.h \
	lib/core/config_path.c \
	lib/core/config_path.h \
	lib/core/config_readers.h \
	lib/core/config_yaml.c \
	lib/core/decision.c \
	lib/core/decision.h \
	lib/core/job_comment.c \
	lib/core/launcher_config.c \
	lib/core/json_field.c \
	lib/core/json_field.h \
	lib/core/job_comment.h \
	lib/core/error.c \
	lib/core/error.h \
	lib/core/file_replace.c \
	lib/core/file_replace.h \
	lib/core/fingerprint.c \
	lib/core/fingerprint.h \
	lib/core/gpu_models.c \
	lib/core/gpu_models.h \
	lib/core/hold.c \
	lib/core/hold_client.c \
	lib/core/hold_server.c \
	lib/core/hold_wire.h \
	lib/core/hold.h \
	lib/core/hostlist.c \
	lib/core/hostlist.h \
	lib/core/input_limits.h \
	lib/core/number.c \
	lib/core/number.h \
	lib/core/presets.c \
	lib/core/presets.h \
	lib/core/protocol.c \
	lib/core/protocol.h \
	lib/core/request.c \
	lib/core/request.h \
	lib/core/settings.c \
	lib/core/settings.h \
	lib/core/siphash.c \
	lib/core/siphash.h \
	lib/core/site.c \
	lib/core/site.h \
	lib/core/size.c \
	lib/core/size.h \
	lib/core/srun_line.c \
	lib/core/srun_line.h \
	lib/core/step_gpus.c \
	lib/core/step_gpus.h \
	lib/core/subprocess.c \
	lib/core/subprocess.h \
	# end of lib_core_libabcore_la_SOURCES
lib_core_libabcore_la_CFLAGS = $(AM_CFLAGS) $(YAML_CFLAGS) $(JSONC_CFLAGS)
lib_core_libabcore_la_LIBADD = $(YAML_LIBS) $(JSONC_LIBS) -lm
