# bench/local.mk - included by the top Makefile.am (one non-recursive make):
##-----------------------------------------------------------------------------
## bench/: benchmarks that print figures (never pass/fail on time)
##-----------------------------------------------------------------------------
noinst_PROGRAMS = bench/search $(GPU_BINARIES)
bench_search_SOURCES = bench/search_figures.c
bench_search_LDADD = lib/probe/libabprobe.la
bench_search_CPPFLAGS = $(AM_CPPFLAGS) $(ENGINE_CPPFLAGS)
