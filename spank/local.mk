# spank/local.mk - included by the top Makefile.am (one non-recursive make):
##-----------------------------------------------------------------------------
## spank/: autobatch.so, loaded by srun, sbatch, salloc and slurmstepd
##-----------------------------------------------------------------------------
if HAVE_SLURM
slurmplugindir = $(SLURM_PLUGINDIR)
slurmplugin_LTLIBRARIES = spank/autobatch.la
spank_autobatch_la_SOURCES = \
	spank/alloc.c \
	spank/alloc.h \
	spank/context.h \
	spank/dispatch.c \
	spank/options.c \
	spank/options.h \
	spank/probe_args.c \
	spank/probe_args.h \
	spank/probe_step.c \
	spank/probe_step.h \
	spank/remote.c \
	spank/remote.h \
	spank/srun.c \
	spank/srun.h \
	spank/srun_apply.c \
	spank/srun_apply.h \
	spank/srun_cache.c \
	spank/srun_cache.h \
	spank/srun_comment.c \
	spank/srun_comment.h \
	spank/srun_gpus.c \
	spank/srun_gpus.h \
	spank/srun_hold.c \
	spank/srun_hold.h \
	spank/srun_policy.c \
	spank/srun_policy.h \
	# end of spank_autobatch_la_SOURCES
spank_autobatch_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
# Only the SPANK entry points leave the plugin: nothing of ours can clash with Slurm's
# symbols or another plugin's.
spank_autobatch_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-export-symbols-regex '^(plugin_|slurm_spank_)'
spank_autobatch_la_LIBADD = lib/core/libabcore.la

# Slurm loads autobatch.so; the libtool archive would only be clutter in its plugin directory
install-data-hook:
	rm -f $(DESTDIR)$(slurmplugindir)/autobatch.la
uninstall-hook-plugin:
	rm -f $(DESTDIR)$(slurmplugindir)/autobatch.so
UNINSTALL_HOOKS += uninstall-hook-plugin
endif
uninstall-hook: $(UNINSTALL_HOOKS)
