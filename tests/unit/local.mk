# tests/unit/local.mk - included by the top Makefile.am (one non-recursive make):
##-----------------------------------------------------------------------------
## tests/unit: cmocka unit tests of lib/, through automake's TAP driver
##-----------------------------------------------------------------------------
# cmocka is needed for `make check` only: without it `make` builds and `make check` says so
if HAVE_CMOCKA
UNIT_TESTS = \
	tests/unit/test_cache \
	tests/unit/test_config \
	tests/unit/test_corpus \
	tests/unit/test_exec \
	tests/unit/test_model \
	tests/unit/test_search \
	tests/unit/test_settings \
	tests/unit/test_subprocess \
	tests/unit/test_gpu_models \
	tests/unit/test_hold \
	tests/unit/test_device \
	tests/unit/test_report \
	# end of UNIT_TESTS
else
UNIT_TESTS =
check_DATA_CMOCKA = cmocka-missing
endif
cmocka-missing:
	@echo "make check: the unit tests need cmocka, which ./configure did not find:" \
		"install it (Debian: apt-get install libcmocka-dev) and run ./configure again" >&2
	@exit 1
.PHONY: cmocka-missing
check_PROGRAMS = $(UNIT_TESTS) $(EMU_TESTS) tests/helpers/trialprog tests/helpers/peakrun
check_DATA = $(man_MANS) $(check_DATA_CMOCKA)
# the minutes-long Python scripts first: under make -j2 the short ones then fill in beside
# them, where listed last one ran alone at the end
TESTS = $(PYTHON_HOOK_TESTS) $(UNIT_TESTS) $(EMU_TESTS) \
	tests/unit/probe-cli.t \
	tests/unit/probe-run.t \
	tests/unit/config-values.t \
	tests/unit/probe-task.t \
	tests/unit/probe-watch.t \
	tests/unit/probe-model.t \
	tests/unit/man-pages.t \
	tests/unit/messages.t \
	tests/unit/examples.t \
	tests/unit/python-helper.t \
	tests/unit/jax-steps.t \
	tests/unit/device-check.t \
	# end of TESTS
AM_TESTS_ENVIRONMENT = PACKAGE_VERSION='$(PACKAGE_VERSION)'; export PACKAGE_VERSION; \
	TRIALPROG='$(abs_top_builddir)/tests/helpers/trialprog'; export TRIALPROG; \
	PEAKRUN='$(abs_top_builddir)/tests/helpers/peakrun'; export PEAKRUN; \
	HOOK_DIR='$(abs_top_srcdir)/contrib/python'; export HOOK_DIR;
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' CMOCKA_MESSAGE_OUTPUT=TAP \
	$(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
UNIT_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(ENGINE_CPPFLAGS) -I$(top_srcdir)/tests/unit
UNIT_LDADD = lib/probe/libabprobe.la $(CMOCKA_LIBS)
# the core's tests link the core alone: it stands without the engine
UNIT_CORE_LDADD = lib/core/libabcore.la $(CMOCKA_LIBS)

CONFIG_CHECK = tests/unit/config_check.c tests/unit/config_check.h tests/unit/unit.h

tests_unit_test_config_SOURCES = tests/unit/test_config.c $(CONFIG_CHECK)
tests_unit_test_config_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_config_LDADD = $(UNIT_CORE_LDADD)

tests_unit_test_corpus_SOURCES = tests/unit/test_corpus.c $(CONFIG_CHECK)
tests_unit_test_corpus_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_corpus_LDADD = $(UNIT_CORE_LDADD)

tests_unit_test_cache_SOURCES = tests/unit/test_cache.c tests/unit/unit.h
tests_unit_test_cache_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_cache_LDADD = $(UNIT_CORE_LDADD)
tests_unit_test_exec_SOURCES = tests/unit/test_exec.c tests/unit/unit.h
tests_unit_test_exec_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_exec_LDADD = $(UNIT_LDADD)

tests_unit_test_model_SOURCES = tests/unit/test_model.c tests/unit/unit.h
tests_unit_test_model_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_model_LDADD = $(UNIT_LDADD)

tests_unit_test_search_SOURCES = tests/unit/test_search.c tests/unit/unit.h \
	tests/unit/search_check.c tests/unit/search_check.h
tests_unit_test_search_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_search_LDADD = $(UNIT_LDADD)

# The trial program stands for the user's, measured by its resident memory: no sanitizer
# shadow memory in it.
tests_helpers_trialprog_SOURCES = tests/helpers/trialprog.c
tests_helpers_trialprog_CFLAGS = $(STD_CFLAGS) $(WARN_CFLAGS)
tests_helpers_trialprog_LDFLAGS =

# A plain run measured as a host trial is (tests and bench/ check choices against it).
tests_helpers_peakrun_SOURCES = tests/helpers/peakrun.c
tests_helpers_peakrun_LDADD = lib/probe/libabprobe.la
tests_helpers_peakrun_CPPFLAGS = $(AM_CPPFLAGS) $(ENGINE_CPPFLAGS)

tests_unit_test_settings_SOURCES = tests/unit/test_settings.c
tests_unit_test_settings_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_settings_LDADD = $(UNIT_CORE_LDADD)

tests_unit_test_subprocess_SOURCES = tests/unit/test_subprocess.c tests/unit/unit.h
tests_unit_test_subprocess_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_subprocess_LDADD = $(UNIT_CORE_LDADD)

tests_unit_test_gpu_models_SOURCES = tests/unit/test_gpu_models.c tests/unit/unit.h
tests_unit_test_gpu_models_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_gpu_models_LDADD = $(UNIT_CORE_LDADD)
tests_unit_test_hold_SOURCES = tests/unit/test_hold.c tests/unit/unit.h
tests_unit_test_hold_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_hold_LDADD = $(UNIT_CORE_LDADD)

tests_unit_test_device_SOURCES = tests/unit/test_device.c tests/unit/unit.h
tests_unit_test_device_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_device_LDADD = $(UNIT_LDADD)

tests_unit_test_report_SOURCES = tests/unit/test_report.c tests/unit/unit.h
tests_unit_test_report_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_report_LDADD = $(UNIT_LDADD)
