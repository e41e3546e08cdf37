# shimbridge build. `make` builds everything; `make test` runs every test (see README).
VERSION    := 0.1.0
PREFIX     ?= /usr/local
DESTDIR    ?=
CC         ?= cc
MUSLCC     ?= musl-gcc
CLANG      ?= clang

WARN       := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
BASECFLAGS := -std=c11 -D_GNU_SOURCE -DSHIMBRIDGE_VERSION=\"$(VERSION)\" -Icommon -Ibridge -Ishim $(WARN)
CFLAGS     ?= -O2 -g
HARDEN     := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
LDHARDEN   := -pie -Wl,-z,relro,-z,now
LIBS       := -levent -levent_openssl -lssl -lcrypto -ljansson -lsodium
ADMIN_LIBS := -lcurl
SANFLAGS   := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

B          := build
.DEFAULT_GOAL := all
COMMON_SRC := $(wildcard common/*.c)
BRIDGE_SRC := $(filter-out bridge/main.c,$(wildcard bridge/*.c))
SHIM_SRC   := $(wildcard shim/*.c)
GIT_SRC    := $(wildcard gitserve/*.c)
ADMIN_SRC  := $(wildcard admin/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRC  := $(filter-out bench/noop.c,$(wildcard bench/*.c))
HDRS       := $(wildcard common/*.h bridge/*.h shim/*.h gitserve/*.h admin/*.h)
LIB_SRC    := $(COMMON_SRC) bridge/redact.c
DAEMON_SRC := $(filter-out bridge/redact.c,$(BRIDGE_SRC))
# The daemon's own modules: loop, peers, jobs, ops, renewals, the credential injector.
DAEMON_ONLY := bridge/server.c bridge/conn.c bridge/job.c bridge/ops.c bridge/renew.c \
	      bridge/inject.c bridge/ghinject.c bridge/pending.c bridge/zygote.c bridge/ghmint.c \
	      bridge/reload.c bridge/listen.c \
	      $(wildcard bridge/op-*.c)
ADMIN_BRIDGE := $(filter-out $(DAEMON_ONLY),$(DAEMON_SRC))

# Object sets: normal ($(B)/o), sanitized ($(B)/san), fuzzing ($(B)/fuzz).
obj   = $(patsubst %.c,$(B)/o/%.o,$(1))
sobj  = $(patsubst %.c,$(B)/san/obj/%.o,$(1))
fobj  = $(patsubst %.c,$(B)/fuzz/%.o,$(1))

# No jail's init on macOS (Darwin: see the shim's flags below).
UNAME_S    := $(shell uname -s)
JAILPROG   := $(if $(filter Darwin,$(UNAME_S)),,$(B)/shimbridge-jail)
PROGS      := $(B)/shimbridged $(B)/shimbridge $(B)/shimbridge-git $(B)/shim $(JAILPROG)
SANPROGS   := $(B)/san/shimbridged $(B)/san/shim $(B)/san/shimbridge-git $(B)/san/shimbridge \
	      $(if $(JAILPROG),$(B)/san/shimbridge-jail)
UNITS      := $(patsubst tests/unit/%.c,$(B)/unit/%,$(UNIT_SRC))
SANUNITS   := $(patsubst tests/unit/%.c,$(B)/unit-san/%,$(UNIT_SRC))
FUZZERS    := $(patsubst tests/fuzz/%.c,$(B)/fuzzers/%,$(FUZZ_SRC))
BENCHES    := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC)) $(B)/bench/noop

.PHONY: all test unit integration fuzz fuzz-build bench demo install uninstall clean san valgrind check-scripts portcheck \
	deps deps-shim deps-test deps-fuzz tools

# Dependencies, checked before anything is compiled, so a machine without them gets one
# line naming the Debian packages to install instead of a compiler error. Each entry is
# NAME:DEBIAN-PACKAGE, NAME a pkg-config module (DEP_*_PC) or a command (DEP_*_CMD).
# To add one, append it here (and to tests/deps.sh).
PKG_CONFIG      ?= pkg-config
DEP_BUILD_PC    := libevent:libevent-dev libevent_openssl:libevent-dev libssl:libssl-dev \
                   jansson:libjansson-dev libsodium:libsodium-dev libcurl:libcurl4-openssl-dev
DEP_BUILD_CMD   := $(CC):build-essential
DEP_SHIM_CMD    := $(MUSLCC):musl-tools
DEP_TEST_PC     := cmocka:libcmocka-dev
DEP_FUZZ_CMD    := $(CLANG):clang

# The shim and the jail's init: static and musl on Linux. macOS (Darwin) is built in
# principle, not tested here (README, "macOS"; `make portcheck` is what CI runs in its
# stead): no static libc there, so the shim is a small ordinary binary; no jail (its
# init is Linux-only and the daemon refuses to start without --no-jail); the libraries
# from pkg-config (Homebrew's), and the linker's own hardening (PIE by default, no RELRO).
SHIM_CC    := $(MUSLCC)
SHIM_LINK  := -static -ffunction-sections -fdata-sections -Wl,--gc-sections -s
SHIM_DEFS  := -DSHIMBRIDGE_SHIM_MALLOC
ifeq ($(UNAME_S),Darwin)
SHIM_CC    := $(CC)
SHIM_LINK  := -Wl,-dead_strip
SHIM_DEFS  :=
DEP_SHIM_CMD :=
LDHARDEN   :=
BASECFLAGS += $(shell $(PKG_CONFIG) --cflags libevent libevent_openssl libssl libcrypto jansson libsodium libcurl)
LIBS       := $(shell $(PKG_CONFIG) --libs libevent libevent_openssl libssl libcrypto jansson libsodium)
ADMIN_LIBS := $(shell $(PKG_CONFIG) --libs libcurl)
endif
# $(call dep_missing,PC-ENTRIES,CMD-ENTRIES): the Debian packages of the missing entries.
HASH := \#
dep_missing = $(strip $(shell { pc='$(PKG_CONFIG)'; \
	command -v "$$pc" >/dev/null 2>&1 || { echo pkg-config; pc=false; }; \
	for d in $(1); do "$$pc" --exists "$${d%%:*}" 2>/dev/null || echo "$${d$(HASH)*:}"; done; \
	for d in $(2); do command -v "$${d%%:*}" >/dev/null 2>&1 || echo "$${d$(HASH)*:}"; done; } | \
	awk '!seen[$$0]++'))
# $(call depcheck,PC-ENTRIES,CMD-ENTRIES): stop with one line if any entry is missing.
depcheck = $(if $(call dep_missing,$(1),$(2)),$(error missing build dependencies; install \
	them as root with: apt-get install $(call dep_missing,$(1),$(2))   (or: sh tests/deps.sh \
	for everything the tests need too)))
deps:
	@:$(call depcheck,$(DEP_BUILD_PC),$(DEP_BUILD_CMD))
deps-shim:
	@:$(call depcheck,,$(DEP_SHIM_CMD))
deps-test: deps
	@:$(call depcheck,$(DEP_TEST_PC),)
deps-fuzz: deps
	@:$(call depcheck,,$(DEP_FUZZ_CMD))
# Keep pattern-built objects: without this make deletes them as intermediates and
# every fuzzer or bench link recompiles the tree.
.SECONDARY:
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
all: $(PROGS)

$(B)/o/%.o: %.c $(HDRS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) $(CFLAGS) $(HARDEN) -c $< -o $@
$(B)/san/obj/%.o: %.c $(HDRS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) $(SANFLAGS) -c $< -o $@
# Unit test objects include cmocka.h: check for it before compiling them.
$(B)/o/tests/unit/%.o: tests/unit/%.c $(HDRS) | deps-test
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) $(CFLAGS) $(HARDEN) -c $< -o $@
$(B)/san/obj/tests/unit/%.o: tests/unit/%.c $(HDRS) | deps-test
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) $(SANFLAGS) -c $< -o $@
$(B)/fuzz/%.o: %.c $(HDRS) $(wildcard tests/fuzz/*.h) | deps-fuzz
	@mkdir -p $(dir $@)
	$(CLANG) $(BASECFLAGS) -Wno-unused-command-line-argument -O1 -g -fsanitize=fuzzer-no-link,address,undefined -DSHIMBRIDGE_FUZZ -c $< -o $@

# libshimbridge.a: common/ (protocol, JSON, hygiene, validators) and the redactor,
# linked by all three programs. The admin CLI links the bridge's config, secret and
# store code, never the daemon's loop, peers, jobs or ops.
$(B)/libshimbridge.a: $(call obj,$(LIB_SRC))
	$(AR) rcs $@ $^
$(B)/san/libshimbridge.a: $(call sobj,$(LIB_SRC))
	$(AR) rcs $@ $^

$(B)/shimbridged: $(call obj,bridge/main.c $(DAEMON_SRC)) $(B)/libshimbridge.a
	$(CC) $(LDHARDEN) -o $@ $^ $(LIBS)
$(B)/shimbridge: $(call obj,$(ADMIN_SRC) $(ADMIN_BRIDGE)) $(B)/libshimbridge.a
	$(CC) $(LDHARDEN) -o $@ $^ $(LIBS) $(ADMIN_LIBS)
$(B)/shimbridge-git: $(call obj,$(GIT_SRC)) $(B)/libshimbridge.a
	$(CC) $(LDHARDEN) -o $@ $^ $(LIBS)

# The shim: static, musl, small. Only common/ code that needs no third-party library.
SHIM_COMMON := common/frame.c common/jsonw.c common/proto.c common/util.c
$(B)/shim: $(SHIM_SRC) $(SHIM_COMMON) $(HDRS) | deps-shim
	@mkdir -p $(B)
	$(SHIM_CC) -std=c11 -D_GNU_SOURCE -DSHIMBRIDGE_VERSION=\"$(VERSION)\" -DSHIMBRIDGE_SHIM $(SHIM_DEFS) \
	  -Icommon $(WARN) \
	  -Ishim -Os $(SHIM_LINK) -o $@ $(SHIM_SRC) $(SHIM_COMMON)

# The jail's init (docs/JAIL.md): static, musl, small; exec'd by the daemon for every
# jail, so it must start fast and hold nothing of the daemon. The sanitized daemon
# finds it next to itself too.
JAIL_SRC := jail/main.c bridge/jail.c common/jailmsg.c common/hygiene.c common/util.c
$(B)/shimbridge-jail: $(JAIL_SRC) $(HDRS) | deps-shim
	@mkdir -p $(B)
	$(MUSLCC) -std=c11 -D_GNU_SOURCE -DSHIMBRIDGE_JAIL_INIT -Icommon -Ibridge $(WARN) \
	  -Os -static -ffunction-sections -fdata-sections -Wl,--gc-sections -s -o $@ $(JAIL_SRC)
$(B)/san/shimbridge-jail: $(B)/shimbridge-jail
	@mkdir -p $(dir $@)
	cp $< $@

$(B)/san/shimbridged: $(call sobj,bridge/main.c $(DAEMON_SRC)) $(B)/san/libshimbridge.a
	$(CC) $(SANFLAGS) -o $@ $^ $(LIBS)
$(B)/san/shimbridge: $(call sobj,$(ADMIN_SRC) $(ADMIN_BRIDGE)) $(B)/san/libshimbridge.a
	$(CC) $(SANFLAGS) -o $@ $^ $(LIBS) $(ADMIN_LIBS)
$(B)/san/shimbridge-git: $(call sobj,$(GIT_SRC)) $(B)/san/libshimbridge.a
	$(CC) $(SANFLAGS) -o $@ $^ $(LIBS)
$(B)/san/shim: $(call sobj,$(SHIM_SRC) $(SHIM_COMMON))
	$(CC) $(SANFLAGS) -o $@ $^
san: $(SANPROGS)

$(B)/unit/%: $(call obj,tests/unit/%.c) $(call obj,$(BRIDGE_SRC) $(COMMON_SRC)) | deps-test $(JAILPROG)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LIBS) -lcmocka
$(B)/unit-san/%: $(call sobj,tests/unit/%.c) $(call sobj,$(BRIDGE_SRC) $(COMMON_SRC)) | deps-test $(JAILPROG)
	@mkdir -p $(dir $@)
	$(CC) $(SANFLAGS) -o $@ $^ $(LIBS) -lcmocka
$(B)/fuzzers/%: $(call fobj,tests/fuzz/%.c) $(call fobj,$(BRIDGE_SRC) $(COMMON_SRC) $(filter-out gitserve/main.c,$(GIT_SRC)) admin/probehdr.c)
	@mkdir -p $(dir $@)
	$(CLANG) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LIBS)
$(B)/bench/%: $(call obj,bench/%.c) $(call obj,$(BRIDGE_SRC) $(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LIBS)
# The floor's no-op: static and musl with the shim's flags, so it starts as the shim does.
$(B)/bench/noop: bench/noop.c | deps-shim
	@mkdir -p $(dir $@)
	$(MUSLCC) -std=c11 $(WARN) -Os -static -s -o $@ $<

# The injector standalone, for tests and the bench (tests/tools/injectd.c).
$(B)/tools/injectd: $(call obj,tests/tools/injectd.c $(BRIDGE_SRC) $(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LIBS)
$(B)/tools/san/injectd: $(call sobj,tests/tools/injectd.c $(BRIDGE_SRC) $(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(SANFLAGS) -o $@ $^ $(LIBS)

unit: $(UNITS) $(SANUNITS)
tools: $(B)/tools/injectd $(B)/tools/san/injectd
fuzz-build: $(FUZZERS)

# The README's test command. Installs its own dependencies, then runs everything and
# ends with one summary line "N passed, N failed". tests/run-all builds the fuzz
# targets itself, in the background while the suites run.
test:
	sh tests/deps.sh
	$(MAKE) -j$(JOBS) all san unit tools
	bash tests/run-all

valgrind: all
	bash tests/valgrind.sh

FUZZ_SECONDS ?= 60
fuzz: fuzz-build
	bash tests/fuzz/run $(FUZZ_SECONDS)

bench: all tools $(BENCHES)
	bash bench/run

demo:
	sh tests/deps.sh
	$(MAKE) all
	bash demo/demo.sh

install: all
	sh installer/install.sh --prefix "$(PREFIX)" --destdir "$(DESTDIR)" --prebuilt $(B)
uninstall:
	sh installer/uninstall.sh --prefix "$(PREFIX)" --destdir "$(DESTDIR)"

clean:
	rm -rf $(B)

# macOS builds in principle: every source of the four programs compiled as a macOS build
# would see it, against tests/port/darwin.h (__linux__ undefined, __APPLE__ defined, the
# Linux-only calls and constants unusable, Darwin's own declared). Syntax and types
# only: nothing is linked or run. The jail's init (jail/) is Linux-only and not built
# there. tests/integration/build.bats runs it.
PORT_SRC   := $(COMMON_SRC) $(BRIDGE_SRC) bridge/main.c $(SHIM_SRC) $(GIT_SRC) $(ADMIN_SRC)
PORTFLAGS  := -std=c11 -D_DEFAULT_SOURCE -D_XOPEN_SOURCE=700 -U__linux__ -U__gnu_linux__ \
	      -Ulinux -D__APPLE__ -DSHIMBRIDGE_VERSION=\"$(VERSION)\" -Itests/port/include \
	      -include tests/port/darwin.h -Icommon -Ibridge -Ishim $(WARN)
portcheck: | deps
	@fail=0; for f in $(PORT_SRC) $(addprefix shim:,$(SHIM_SRC) $(SHIM_COMMON)); do \
		case $$f in shim:*) f=$${f#shim:}; d=-DSHIMBRIDGE_SHIM ;; *) d= ;; esac; \
		$(CC) $(PORTFLAGS) $$d -fsyntax-only $$f || \
			{ echo "portcheck: $$f $$d does not build for macOS" >&2; fail=1; }; \
	done; \
	[ $$fail = 0 ] && echo "portcheck: $(words $(PORT_SRC) $(SHIM_SRC) $(SHIM_COMMON)) compilations for macOS passed (tests/port/darwin.h)"

# The one place the version lives (debian/rules checks debian/changelog against it).
print-version:
	@echo $(VERSION)
