# ebb — build, test, install.
#
#   make            build/libebb.so, build/libebb.a, build/libebb-prefixed.so and
#                   the tools (build/ebbrun)
#   make test       build and run the whole test suite (tests/tests.mk)
#   make bench      run the benchmark suite (bench/bench.mk)
#   make install    PREFIX=/usr/local DESTDIR= : libraries, header, ebb.pc
#   make clean

CC      ?= cc
PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
BINDIR  ?= $(PREFIX)/bin

SOVERSION := 0
VERSION   := 0.1.0

BUILD := build
OBJ   := $(BUILD)/obj

WARN     := -Wall -Wextra -Werror
# -fno-builtin-malloc etc.: ebb *is* malloc; the compiler must not assume libc
# semantics for our own definitions. -ftls-model: the thread heap pointer is
# initial-exec TLS (one fs-relative load on the fast path).
LIBCFLAGS := -std=c11 -O2 -g $(WARN) -fPIC -fvisibility=hidden \
             -fno-omit-frame-pointer -fno-builtin-malloc -fno-builtin-free \
             -fno-builtin-calloc -fno-builtin-realloc -ftls-model=initial-exec \
             -fno-semantic-interposition \
             -D_GNU_SOURCE -Iinclude -Isrc $(EXTRA_CFLAGS)

SRCS := $(wildcard src/*.c)
OBJS := $(patsubst src/%.c,$(OBJ)/%.o,$(SRCS))
HDRS := $(wildcard src/*.h) include/ebb.h

.PHONY: all lib test bench install uninstall clean
all: lib tools

lib: $(BUILD)/libebb.so $(BUILD)/libebb.a $(BUILD)/libebb-prefixed.so

$(OBJ)/%.o: src/%.c $(HDRS) | $(OBJ)
	$(CC) $(LIBCFLAGS) -c $< -o $@

$(OBJ):
	mkdir -p $@

# Only the names listed in src/exports.map are exported; the soname carries the
# ABI version so programs linked with -lebb find libebb.so.0.
# -static-libgcc: debug mode's stack traces use libgcc's unwinder (trace.c);
# linking its code in (hidden, like everything not in exports.map) spares
# every process that preloads ebb loading libgcc_s.so.1, about 90 KiB of
# resident memory, whether or not debug mode is on.
# -z nodelete: dlclose must not unmap the library while its background thread
# runs and threads that used it have its exit handler still to run
# (tests/test_dlopen.c).
$(BUILD)/libebb.so: $(OBJS) src/exports.map
	$(CC) -shared -static-libgcc -Wl,-soname,libebb.so.$(SOVERSION) \
	      -Wl,--version-script=src/exports.map \
	      -Wl,-z,now -Wl,-z,nodelete -Wl,-Bsymbolic-functions -o $@ $(OBJS) -lpthread -ldl
	ln -sf libebb.so $(BUILD)/libebb.so.$(SOVERSION)

# The ebb_ names only, for a program that calls them beside another allocator
# (src/exports-prefixed.map says why): everything but override.c.
PREFIXED_OBJS := $(filter-out $(OBJ)/override.o $(OBJ)/override_dlopen.o,$(OBJS))
$(BUILD)/libebb-prefixed.so: $(PREFIXED_OBJS) src/exports-prefixed.map
	$(CC) -shared -static-libgcc -Wl,-soname,libebb-prefixed.so.$(SOVERSION) \
	      -Wl,--version-script=src/exports-prefixed.map \
	      -Wl,-z,now -Wl,-z,nodelete -Wl,-Bsymbolic-functions -o $@ $(PREFIXED_OBJS) -lpthread
	ln -sf libebb-prefixed.so $(BUILD)/libebb-prefixed.so.$(SOVERSION)

# Without override_dlopen.o: a static program has no next dlopen to call.
# One relocatable object whose hidden symbols are made local, as the shared
# library's are: an archive of the objects themselves gave every internal
# name (lock_acquire, stats_init, the TLS block `tls`...) to the program's
# link, and a program with a function of the same name did not link
# (review finding). White-box tests link the objects as they are
# ($(OBJ)/libebb-internal.a). OBJCOPY: the one of the compiler's target
# (`$(CC) -dumpmachine`: aarch64-linux-gnu-gcc-12 -> aarch64-linux-gnu-objcopy),
# else llvm-objcopy, which reads every target, else objcopy.
STATIC_OBJS := $(filter-out $(OBJ)/override_dlopen.o,$(OBJS))
OBJCOPY ?= $(shell m=$$($(CC) -dumpmachine 2>/dev/null); \
             for t in $$m-objcopy llvm-objcopy objcopy; do \
                 command -v $$t >/dev/null 2>&1 && { echo $$t; break; }; done)
$(BUILD)/libebb.a: $(STATIC_OBJS) Makefile
	rm -f $@ $(OBJ)/libebb-static.o
	$(CC) -r -nostdlib -o $(OBJ)/libebb-static.o $(STATIC_OBJS)
	$(OBJCOPY) --localize-hidden $(OBJ)/libebb-static.o
	ar rcs $@ $(OBJ)/libebb-static.o

$(OBJ)/libebb-internal.a: $(STATIC_OBJS)
	rm -f $@
	ar rcs $@ $(STATIC_OBJS)

EBB_PC = printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: ebb\nDescription: ebb memory allocator\nVersion: %s\nLibs: -L$${libdir} -Wl,--no-as-needed -lebb\nLibs.private: -lpthread\nCflags: -I$${includedir}\n' \
	       '$(PREFIX)' '$(LIBDIR)' '$(INCDIR)' '$(VERSION)' > $@
$(BUILD)/ebb.pc: Makefile
	mkdir -p $(BUILD)
	$(EBB_PC)

# ebbrun shares the option table with the library (src/option_table.c), so its
# --help and its checks are the library's own.
tools: $(BUILD)/ebbrun

EBBRUN_BUILD = $(CC) -std=c11 -O2 -g $(WARN) -Isrc -DEBB_LIBDIR='"$(LIBDIR)"' $(EXTRA_CFLAGS) \
	       tools/ebbrun.c src/option_table.c -o $@
$(BUILD)/ebbrun: tools/ebbrun.c src/option_table.c src/options.h
	mkdir -p $(BUILD)
	$(EBBRUN_BUILD)

# What `make install` installs is made for the PREFIX and LIBDIR it is given,
# whatever `make` built before (an ebbrun built for /usr/local/lib, installed
# with LIBDIR=.../lib64, looked for the library where it was not).
.PHONY: $(BUILD)/install-ebbrun $(BUILD)/install-ebb.pc
$(BUILD)/install-ebbrun:
	mkdir -p $(BUILD)
	$(EBBRUN_BUILD)
$(BUILD)/install-ebb.pc:
	mkdir -p $(BUILD)
	$(EBB_PC)

-include tests/tests.mk
-include bench/bench.mk

install: lib tools $(BUILD)/install-ebbrun $(BUILD)/install-ebb.pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) $(DESTDIR)$(BINDIR)
	install -m 755 $(BUILD)/install-ebbrun $(DESTDIR)$(BINDIR)/ebbrun
	install -m 755 $(BUILD)/libebb.so $(DESTDIR)$(LIBDIR)/libebb.so.$(VERSION)
	ln -sf libebb.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libebb.so.$(SOVERSION)
	ln -sf libebb.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libebb.so
	install -m 755 $(BUILD)/libebb-prefixed.so $(DESTDIR)$(LIBDIR)/libebb-prefixed.so.$(VERSION)
	ln -sf libebb-prefixed.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libebb-prefixed.so.$(SOVERSION)
	ln -sf libebb-prefixed.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libebb-prefixed.so
	install -m 644 $(BUILD)/libebb.a $(DESTDIR)$(LIBDIR)/libebb.a
	install -m 644 include/ebb.h $(DESTDIR)$(INCDIR)/ebb.h
	install -m 644 $(BUILD)/install-ebb.pc $(DESTDIR)$(LIBDIR)/pkgconfig/ebb.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libebb.so* $(DESTDIR)$(LIBDIR)/libebb-prefixed.so* \
	      $(DESTDIR)$(LIBDIR)/libebb.a $(DESTDIR)$(BINDIR)/ebbrun \
	      $(DESTDIR)$(INCDIR)/ebb.h $(DESTDIR)$(LIBDIR)/pkgconfig/ebb.pc

clean:
	rm -rf $(BUILD)
