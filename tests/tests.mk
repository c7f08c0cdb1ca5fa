# tests/tests.mk — included by the top-level Makefile.
#
#   make test     build every test program into build/tests/, then run them all
#                 with tests/run_tests.sh (one PASS/FAIL/SKIP line each, then
#                 "N passed, N failed, N skipped"; exit status nonzero on failure)
#
# A test program that does not compile or link does not stop make: its compiler
# output is kept in build/tests/<name>.fail and the runner reports that test as
# failed. A program that needs an optional tool that is missing (clang for the
# sanitizer builds, libc.a for the fully static build) gets build/tests/<name>.skip
# with the reason, and the runner reports it as skipped.

TEST_DIR := $(BUILD)/tests
TEST_ABS_BUILD := $(abspath $(BUILD))

# -fno-builtin-*: the compiler must not delete or merge the very
# malloc/memset/free sequences the tests exercise.
TEST_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
               -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
               -fno-builtin-realloc -Iinclude -Itests
TEST_LINK_EBB := -L$(BUILD) -lebb -Wl,-rpath,$(TEST_ABS_BUILD)
# (Flags with commas live in variables: a literal comma would split $(call).)
TEST_LINK_CTOR := -L$(TEST_DIR) -lctor -Wl,-rpath,$(abspath $(TEST_DIR))
TEST_CTOR_SONAME := -Wl,-soname,libctor.so

# Sanitizer builds: all of src/ except override.c (the standard names must not
# replace the sanitizer's own malloc), with the stress test on the ebb_ names.
SAN_CC     ?= clang
# override_dlopen.c too: the sanitizers have their own dlopen interceptors.
SAN_SRCS   := $(filter-out src/override.c src/override_dlopen.c,$(wildcard src/*.c))
SAN_CFLAGS := -std=c11 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -D_GNU_SOURCE \
              -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
              -fno-builtin-realloc -ftls-model=initial-exec -Iinclude -Isrc -Itests \
              -DSTRESS_EBB_NAMES
SAN_ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all

TEST_HDRS := tests/check.h include/ebb.h

TEST_PROGS := $(addprefix $(TEST_DIR)/,test_api test_threads test_thread_churn test_fork \
                test_first_call test_oom libctor.so test_ctor test_ctor_preload test_static \
                test_static_full test_threads_asan test_threads_tsan test_stats test_stats_tsan \
                test_os test_classes test_dlopen test_deepbind test_prefixed \
                sandbox_no_vm_readv sandbox_refuse libos_shim.so)

# Run a build command; on failure keep its output in $@.fail instead of failing.
# $(1): the command.
define test_soft_build
	@mkdir -p $(@D); rm -f $@ $@.fail $@.skip
	@echo "  TESTCC  $@"
	@if $(1) >$@.log 2>&1; then rm -f $@.log; \
	 else mv $@.log $@.fail; echo "  (build of $@ failed; the runner reports it)"; fi
endef

.PHONY: test test-build
test: lib tools test-build
	@TEST_BUILD=$(TEST_ABS_BUILD) bash tests/run_tests.sh

test-build: lib $(TEST_PROGS)

$(TEST_DIR)/test_api: tests/test_api.c $(TEST_HDRS) $(BUILD)/libebb.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -ldl)

$(TEST_DIR)/test_threads: tests/test_threads.c $(TEST_HDRS) $(BUILD)/libebb.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -lpthread)

$(TEST_DIR)/test_thread_churn: tests/test_thread_churn.c $(TEST_HDRS) $(BUILD)/libebb.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -lpthread)

$(TEST_DIR)/test_fork: tests/test_fork.c $(TEST_HDRS) $(BUILD)/libebb.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -lpthread)

$(TEST_DIR)/sandbox_no_vm_readv: tests/sandbox_no_vm_readv.c tests/seccomp_filter.h
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@)

$(TEST_DIR)/sandbox_refuse: tests/sandbox_refuse.c tests/seccomp_filter.h
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@)

# Preloaded: it replaces syscall and pread (tests/os_shim.c says how).
$(TEST_DIR)/libos_shim.so: tests/os_shim.c
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@)

$(TEST_DIR)/test_first_call: tests/test_first_call.c $(TEST_HDRS) $(BUILD)/libebb.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -lpthread)

# Static: the OS layer's failure injector is reachable only from the archive.
$(TEST_DIR)/test_oom: tests/test_oom.c $(TEST_HDRS) $(OBJ)/libebb-internal.a
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(OBJ)/libebb-internal.a -lpthread)

# The constructor library is deliberately not linked with ebb: it takes
# whichever malloc the process has, before ebb's own initialization.
$(TEST_DIR)/libctor.so: tests/ctor_lib.c $(TEST_HDRS)
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) -fPIC -shared $(TEST_CTOR_SONAME) $< -o $@ -ldl)

# -lebb before -lctor: the loader then runs libctor's constructor before
# libebb's, so ebb is used before its own initialization could have run.
$(TEST_DIR)/test_ctor: tests/test_ctor.c $(TEST_HDRS) $(BUILD)/libebb.so $(TEST_DIR)/libctor.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) $(TEST_LINK_CTOR) -ldl)

# Not linked with ebb at all: run with LD_PRELOAD=libebb.so.
$(TEST_DIR)/test_ctor_preload: tests/test_ctor.c $(TEST_HDRS) $(TEST_DIR)/libctor.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) -DCTOR_PRELOAD $< -o $@ $(TEST_LINK_CTOR) -ldl)

$(TEST_DIR)/test_static: tests/test_static.c $(TEST_HDRS) $(BUILD)/libebb.a
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/libebb.a -lpthread -ldl)

LIBC_A := $(wildcard $(shell $(CC) -print-file-name=libc.a))
$(TEST_DIR)/test_static_full: tests/test_static.c $(TEST_HDRS) $(BUILD)/libebb.a
ifneq ($(LIBC_A),)
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) -static -DFULLY_STATIC $< -o $@ $(BUILD)/libebb.a -lpthread)
else
	@mkdir -p $(@D); echo "libc.a not found: install libc6-dev for the fully static build" > $@.skip
endif

SAN_HAVE := $(shell command -v $(SAN_CC) >/dev/null 2>&1 && echo yes)

$(TEST_DIR)/test_threads_asan: tests/test_threads.c $(TEST_HDRS) $(SAN_SRCS) $(wildcard src/*.h)
ifeq ($(SAN_HAVE),yes)
	$(call test_soft_build,$(SAN_CC) $(SAN_CFLAGS) $(SAN_ASAN_FLAGS) tests/test_threads.c $(SAN_SRCS) -o $@ -lpthread)
else
	@mkdir -p $(@D); echo "$(SAN_CC) not installed: no sanitizer build" > $@.skip
endif

$(TEST_DIR)/test_threads_tsan: tests/test_threads.c $(TEST_HDRS) $(SAN_SRCS) $(wildcard src/*.h)
ifeq ($(SAN_HAVE),yes)
	$(call test_soft_build,$(SAN_CC) $(SAN_CFLAGS) -fsanitize=thread \
	    tests/test_threads.c $(SAN_SRCS) -o $@ -lpthread)
else
	@mkdir -p $(@D); echo "$(SAN_CC) not installed: no sanitizer build" > $@.skip
endif

$(TEST_DIR)/test_stats: tests/test_stats.c $(TEST_HDRS) $(BUILD)/libebb.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -lpthread)

# Snapshots and walks racing a stress, on the ebb_ names, under TSan.
$(TEST_DIR)/test_stats_tsan: tests/test_stats.c $(TEST_HDRS) $(SAN_SRCS) $(wildcard src/*.h)
ifeq ($(SAN_HAVE),yes)
	$(call test_soft_build,$(SAN_CC) $(SAN_CFLAGS) -DSTATS_EBB_NAMES -fsanitize=thread \
	    tests/test_stats.c $(SAN_SRCS) -o $@ -lpthread)
else
	@mkdir -p $(@D); echo "$(SAN_CC) not installed: no sanitizer build" > $@.skip
endif

# Debug mode: one small program per fault class (tests/debug/), built with the
# compiler's misuse warnings off for these files only (they commit the misuse
# on purpose), and the behaviour cases (tests/test_debug.c).
FAULT_SRCS   := $(wildcard tests/debug/*.c)
FAULT_PROGS  := $(patsubst tests/debug/%.c,$(TEST_DIR)/debug/%,$(FAULT_SRCS))
FAULT_CFLAGS := $(TEST_CFLAGS) -O1 -Wno-free-nonheap-object -Wno-use-after-free \
                -Wno-array-bounds -Wno-stringop-overflow -Wno-mismatched-dealloc
test-build: $(FAULT_PROGS) $(TEST_DIR)/debug/cxx_names $(TEST_DIR)/test_debug $(TEST_DIR)/test_unwind \
            $(TEST_DIR)/libunwind_plugin_big.so $(TEST_DIR)/libunwind_plugin_small.so \
            $(TEST_DIR)/libreport_plugin_a.so $(TEST_DIR)/libreport_plugin_b.so \
            $(TEST_DIR)/libsepdebug_plugin.so $(TEST_DIR)/libswap_plugin_first.so \
            $(TEST_DIR)/libswap_plugin_second.so $(TEST_DIR)/libswap_plugin_first_rsp.so

$(TEST_DIR)/debug/%: tests/debug/%.c tests/debug/fault.h tests/debug/coroutine.h tests/seccomp_filter.h $(TEST_HDRS) $(BUILD)/libebb.so
	$(call test_soft_build,$(CC) $(FAULT_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -lpthread)

# C++ names in reports (tests/debug/cxx_names.cc): built with g++, which
# build-essential brings; without it the driver says which checks it skipped.
CXX_HAVE := $(shell command -v $(CXX) >/dev/null 2>&1 && echo yes)
FAULT_CXXFLAGS := -std=c++17 -O1 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
                  -fno-builtin-malloc -fno-builtin-free -Iinclude -Itests
$(TEST_DIR)/debug/cxx_names: tests/debug/cxx_names.cc tests/seccomp_filter.h $(BUILD)/libebb.so
ifeq ($(CXX_HAVE),yes)
	$(call test_soft_build,$(CXX) $(FAULT_CXXFLAGS) $< -o $@ $(TEST_LINK_EBB))
else
	@mkdir -p $(@D); echo "$(CXX) not installed: no C++ test program" > $@.skip
endif

$(TEST_DIR)/test_debug: tests/test_debug.c $(TEST_HDRS) $(BUILD)/libebb.so | $(TEST_DIR)/libreport_plugin_a.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_EBB) -lpthread)

# Two builds of one plugin, swapped at one address by test_unwind.
$(TEST_DIR)/libunwind_plugin_big.so: tests/unwind_plugin.c
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) -shared -fPIC -DBIG_FRAME $< -o $@)

$(TEST_DIR)/libunwind_plugin_small.so: tests/unwind_plugin.c
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) -shared -fPIC $< -o $@)

# Hand-written plugins swapped at one address, in a forked child
# (tests/debug/capture_cache_in_forked_child.c) and in one process
# (tests/debug/capture_cache_after_library_swap.c): x86-64 assembly.
$(TEST_DIR)/libswap_plugin_%.so: tests/swap_plugin_%.s
	$(call test_soft_build,$(CC) -shared $< -o $@)

# Two plugins loaded one after the other at one address (tests/debug/report_after_library_swap.c).
$(TEST_DIR)/libreport_plugin_a.so: tests/report_plugin.c
	$(call test_soft_build,$(CC) $(FAULT_CFLAGS) -shared -fPIC $< -o $@)

$(TEST_DIR)/libreport_plugin_b.so: tests/report_plugin.c
	$(call test_soft_build,$(CC) $(FAULT_CFLAGS) -shared -fPIC -DSECOND $< -o $@)

# A plugin with its debug info in a separate file and no symbol table
# (tests/debug/plugin_by_relative_path.c): built with -g, the debug info
# copied out, everything stripped, and a .gnu_debuglink to the copy.
$(TEST_DIR)/libsepdebug_plugin.so: tests/sepdebug_plugin.c
	$(call test_soft_build,$(CC) $(FAULT_CFLAGS) -shared -fPIC $< -o $@ && \
	    objcopy --only-keep-debug $@ $@.debug && strip --strip-all $@ && \
	    objcopy --add-gnu-debuglink=$@.debug $@)

# Static: the readers it checks are internal to the library.
$(TEST_DIR)/test_os: tests/test_os.c $(TEST_HDRS) $(OBJ)/libebb-internal.a
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(OBJ)/libebb-internal.a -lpthread)

# Linked with the ebb_ names alone; glibc's malloc stays the process's.
TEST_LINK_PREFIXED := -L$(BUILD) -lebb-prefixed -Wl,-rpath,$(TEST_ABS_BUILD)
$(TEST_DIR)/test_prefixed: tests/test_prefixed.c $(TEST_HDRS) $(BUILD)/libebb-prefixed.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_PREFIXED) -ldl)

# Not linked with ebb: it loads libebb.so with dlopen, beside glibc's malloc.
$(TEST_DIR)/test_dlopen: tests/test_dlopen.c $(TEST_HDRS)
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ -ldl -lpthread)

# Not linked with ebb: run preloaded. It opens its plugin by bare name, found
# through its RUNPATH ($$ORIGIN), which ebb's dlopen must leave to the caller.
TEST_LINK_ORIGIN := -Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN'
$(TEST_DIR)/test_deepbind: tests/test_deepbind.c $(TEST_HDRS) $(TEST_DIR)/libdeepbind_plugin.so
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK_ORIGIN) -ldl)

$(TEST_DIR)/libdeepbind_plugin.so: tests/deepbind_plugin.c
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) -shared -fPIC $< -o $@)

# Static: the size-class tables and helpers are internal to the library.
$(TEST_DIR)/test_classes: tests/test_classes.c $(TEST_HDRS) $(OBJ)/libebb-internal.a
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(OBJ)/libebb-internal.a -lpthread)

# Static: trace_crosscheck is internal to the library.
$(TEST_DIR)/test_unwind: tests/test_unwind.c $(TEST_HDRS) $(OBJ)/libebb-internal.a
	$(call test_soft_build,$(CC) $(TEST_CFLAGS) $< -o $@ $(OBJ)/libebb-internal.a -lpthread -ldl)

# The memory-return tests: their own rules, in the same style.
-include tests/purge.mk
