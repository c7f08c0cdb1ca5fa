# tests/purge.mk — the memory-return tests (tests/test_purge.c), included by
# tests/tests.mk; tests/run_tests.sh runs them through tests/purge_tests.sh.
#
#   make purge-build   build the three programs into build/tests/
#   make purge-test    build them and run only them through tests/run_tests.sh
#
# Three programs from one source:
#   test_purge        -lebb: ebb is the process allocator (the RSS scenarios)
#   test_purge_hooks  build/obj/libebb-internal.a, -DPURGE_HOOKS: the cases that read ebb's
#                     internal counters (os_map_calls, purge_pass_count, ...) or
#                     run purge passes (purge_run), which only the archive exposes
#   test_purge_tsan   ebb's sources but override.c with the purge stress on the
#                     ebb_ names, under ThreadSanitizer (-DPURGE_TSAN_STRESS)
# A program that does not build leaves build/tests/<name>.fail (the runner reports
# it as failed); a missing optional tool (clang) leaves <name>.skip.

PURGE_TEST_DIR  := $(BUILD)/tests
PURGE_ABS_BUILD := $(abspath $(BUILD))
PURGE_CHECK_DIR ?= tests

# -fno-builtin-*: the compiler must not delete or merge the very
# malloc/memset/free sequences the tests measure.
PURGE_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
                -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
                -fno-builtin-realloc -Iinclude -I$(PURGE_CHECK_DIR)
PURGE_LINK_EBB := -L$(BUILD) -lebb -Wl,-rpath,$(PURGE_ABS_BUILD)
PURGE_HDRS := $(PURGE_CHECK_DIR)/check.h include/ebb.h

PURGE_SAN_CC     ?= clang
PURGE_SAN_SRCS   := $(filter-out src/override.c,$(wildcard src/*.c))
PURGE_SAN_CFLAGS := -std=c11 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -D_GNU_SOURCE \
                    -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
                    -fno-builtin-realloc -ftls-model=initial-exec -Iinclude -Isrc \
                    -I$(PURGE_CHECK_DIR) -DPURGE_TSAN_STRESS -fsanitize=thread
PURGE_SAN_HAVE := $(shell command -v $(PURGE_SAN_CC) >/dev/null 2>&1 && echo yes)

PURGE_PROGS := $(PURGE_TEST_DIR)/test_purge $(PURGE_TEST_DIR)/test_purge_hooks \
               $(PURGE_TEST_DIR)/test_purge_tsan $(PURGE_TEST_DIR)/libold_mremap.so

# Run a build command; on failure keep its output in $@.fail instead of failing.
define purge_soft_build
	@mkdir -p $(@D); rm -f $@ $@.fail $@.skip
	@echo "  TESTCC  $@"
	@if $(1) >$@.log 2>&1; then rm -f $@.log; \
	 else mv $@.log $@.fail; echo "  (build of $@ failed; the runner reports it)"; fi
endef

.PHONY: purge-build purge-test
purge-build: lib $(PURGE_PROGS)
test-build: purge-build

purge-test: purge-build
	@TEST_BUILD=$(PURGE_ABS_BUILD) TEST_ONLY=purge bash tests/run_tests.sh

$(PURGE_TEST_DIR)/test_purge: tests/test_purge.c $(PURGE_HDRS) $(BUILD)/libebb.so
	$(call purge_soft_build,$(CC) $(PURGE_CFLAGS) $< -o $@ $(PURGE_LINK_EBB) -lpthread)

# mremap as an older kernel runs it, preloaded by one test_purge case.
$(PURGE_TEST_DIR)/libold_mremap.so: tests/old_mremap.c
	$(call purge_soft_build,$(CC) $(PURGE_CFLAGS) -fPIC -shared $< -o $@)

# Static: the internal hooks are hidden symbols, reachable only from the archive.
$(PURGE_TEST_DIR)/test_purge_hooks: tests/test_purge.c $(PURGE_HDRS) $(OBJ)/libebb-internal.a
	$(call purge_soft_build,$(CC) $(PURGE_CFLAGS) -DPURGE_HOOKS $< -o $@ $(OBJ)/libebb-internal.a -lpthread)

$(PURGE_TEST_DIR)/test_purge_tsan: tests/test_purge.c $(PURGE_HDRS) $(PURGE_SAN_SRCS) $(wildcard src/*.h)
ifeq ($(PURGE_SAN_HAVE),yes)
	$(call purge_soft_build,$(PURGE_SAN_CC) $(PURGE_SAN_CFLAGS) tests/test_purge.c \
	    $(PURGE_SAN_SRCS) -o $@ -lpthread)
else
	@mkdir -p $(@D); echo "$(PURGE_SAN_CC) not installed: no sanitizer build" > $@.skip
endif
