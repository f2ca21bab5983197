# Clara - build, test and benchmark.
#
#   make              build lib/libclara.so (+ links), bin/clara-clips, bin/clara, run the header and symbol checks
#                     (the library is stripped: no symbol table, no DWARF)
#   make debug        the same with the library's symbols and DWARF kept (perf, gdb)
#   make CLIPS_SRC=DIR  the same with clara-clips built against CLIPS 6.4x sources (docs/clips.md)
#   make demo         build and run the CLIPS demo (examples_c/demo.clp)
#   make test         everything CI runs (see test-* below)
#   make bench        the performance table (docs/performance.md)
#   make wheel        the Python package as a wheel carrying the library (build/dist/),
#                     tagged manylinux_2_34 once tests/check-glibc.sh has checked the library
#   make install PREFIX=/usr/local   (then ldconfig when the dynamic linker searches PREFIX/lib,
#                     else the lines to build against it: tests/post-install.sh)
#   make help         this list
#
# `make demo` and `make test` install the Debian packages they need when
# missing (tests/setup-debian.sh); Go modules come through the module proxy.

SHELL := /bin/bash

# GO and GOEXPERIMENT are worked out once (not at every use), unless given.
ifeq ($(origin GO),undefined)
GO := $(shell bash tests/find-go.sh)
endif
# encoding/json as Go 1.26 has it: Go 1.27 runs it on json/v2 by default, and
# a chat (the model's JSON both ways) took 7-10% longer for it. The code and
# the tests hold under both (docs/development.md, "The Go toolchain"). Set
# only when this Go knows the experiment: a Go without it refuses to start.
ifeq ($(origin GOEXPERIMENT),undefined)
GOEXPERIMENT := $(shell GOEXPERIMENT=nojsonv2 $(GO) env GOVERSION >/dev/null 2>&1 && echo nojsonv2)
endif
export GOEXPERIMENT
GOFMT   ?= $(dir $(GO))gofmt
CC      ?= gcc
CXX     ?= g++
PYTHON  ?= python3
VALGRIND ?= valgrind
PREFIX  ?= /usr/local

# The version's one source is core/version.go (core's version test checks
# clara.h and the Python package against it).
VERSION := $(shell sed -n 's/^[[:space:]]*Version[[:space:]]*= "\(.*\)"/\1/p' core/version.go)
SOMAJOR := 0
LIBFILE := libclara.so.$(VERSION)
SONAME  := libclara.so.$(SOMAJOR)

# CLIPS: Debian's 6.30 (libclips-dev) unless CLIPS_SRC names a folder of
# CLIPS sources (the core folder of an official 6.4x release, see
# docs/clips.md): then CLIPS is built from it into build/clips-src-*/ with
# clips_bridge/userfunctions.c, and clara-clips and the tests link it.
CLIPS_SRC ?=
ifeq ($(strip $(CLIPS_SRC)),)
CLIPS_CFLAGS := -isystem /usr/include/clips
CLIPS_LIBS   := -l:libclips.so.6 -lm
CLIPS_DEPS   :=
else
CLIPS_SRC_DIR := $(abspath $(CLIPS_SRC))
ifeq ($(wildcard $(CLIPS_SRC_DIR)/clips.h $(CLIPS_SRC_DIR)/setup.h),)
$(error CLIPS_SRC=$(CLIPS_SRC): no clips.h and setup.h there; give the core folder of the CLIPS sources)
endif
CLIPS_BUILD  := build/clips-src$(subst /,_,$(CLIPS_SRC_DIR))
CLIPS_OBJS   := $(patsubst $(CLIPS_SRC_DIR)/%.c,$(CLIPS_BUILD)/%.o, \
                  $(filter-out %/main.c %/userfunctions.c,$(wildcard $(CLIPS_SRC_DIR)/*.c))) \
                $(CLIPS_BUILD)/clara_userfunctions.o
CLIPS_DEFS   := -DLINUX=1
CLIPS_CFLAGS := -isystem $(CLIPS_SRC_DIR) $(CLIPS_DEFS)
CLIPS_LIBS   := $(CLIPS_BUILD)/libclips.a -lm
CLIPS_DEPS   := $(CLIPS_BUILD)/libclips.a
endif
# Which CLIPS the programs below were linked with: a change rebuilds them.
CLIPS_STAMP := build/clips-source
$(shell mkdir -p build && { echo '$(CLIPS_SRC_DIR)' | cmp -s - $(CLIPS_STAMP) || echo '$(CLIPS_SRC_DIR)' > $(CLIPS_STAMP); })
WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
ALL_CFLAGS := $(CFLAGS) $(WARN) -Iinclude -Iclips_bridge

# Programs linked against the library in the tree find it through their rpath.
LIB_LDFLAGS := -Llib -lclara -Wl,-rpath,'$$ORIGIN/../lib'

GO_SOURCES := go.mod go.sum $(shell find core capi rulelua -name '*.go' ! -name '*_test.go' 2>/dev/null) \
              $(shell find core -name '*.toml' 2>/dev/null) $(wildcard capi/*.c capi/*.h) capi/clara.map include/clara.h
BRIDGE := clips_bridge/clara_clips.c clips_bridge/clara_clips.h

.PHONY: print-version demo-agent all debug lib clips check-header check-symbols setup setup-bench demo test test-go test-c test-valgrind \
        test-python test-clips test-examples test-mcp test-pg rules-test bench install uninstall clean help wheel

all: lib clips bin/clara check-header check-symbols ## build the library, clara-clips and clara, check header and exports

print-version: ## print the version (core/version.go)
	@echo $(VERSION)

help: ## list the targets
	@grep -E '^[a-zA-Z0-9_./-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

setup: ## install missing Debian packages needed to build and test
	@bash tests/setup-debian.sh build

setup-bench: ## install missing Debian packages needed by the bench references
	@bash tests/setup-debian.sh bench

# ---- Library ----------------------------------------------------------------

lib: lib/libclara.so ## build lib/libclara.so with its soname links

# A release library is stripped (Go's -s -w: no symbol table, no DWARF);
# `make debug` builds it with both, for perf and gdb. Which kind lib/ holds,
# and the Go and GOEXPERIMENT it was built with, are kept in build/lib-kind,
# so that switching any of them rebuilds it.
STRIP_LDFLAGS ?= -s -w
LIB_KIND  := $(if $(strip $(STRIP_LDFLAGS)),release,debug) $(shell $(GO) env GOVERSION 2>/dev/null) GOEXPERIMENT=$(GOEXPERIMENT)
LIB_STAMP := build/lib-kind
$(shell mkdir -p build && { echo '$(LIB_KIND)' | cmp -s - $(LIB_STAMP) || echo '$(LIB_KIND)' > $(LIB_STAMP); })

debug: ## everything `make` builds, with the library's symbols and DWARF kept
	@$(MAKE) --no-print-directory all STRIP_LDFLAGS=

lib/$(LIBFILE): $(GO_SOURCES) $(LIB_STAMP)
	@mkdir -p lib build
	@# The first build is silent for minutes: say why.
	@test -e build/go-built || echo "make: building libclara.so with Go; the first build in a clone compiles Clara and every Go module it uses (SQLite, Lua, MCP, ...) and takes a few minutes, later builds seconds"
	$(GO) build -buildmode=c-shared -trimpath -o build/libclara.so \
	  -ldflags "$(STRIP_LDFLAGS) -extldflags '-Wl,-soname,$(SONAME) -Wl,--version-script=$(CURDIR)/capi/clara.map'" ./capi
	rm -f build/libclara.h   # cgo's own header; include/clara.h is the real one
	cp build/libclara.so $@.tmp && mv -f $@.tmp $@   # a new inode: running programs keep the old file
	@touch build/go-built

lib/$(SONAME): lib/$(LIBFILE)
	ln -sf $(LIBFILE) $@

lib/libclara.so: lib/$(SONAME)
	ln -sf $(SONAME) $@

# ---- CLIPS ------------------------------------------------------------------

clips: bin/clara-clips ## build bin/clara-clips

# Stripped as the library is (make debug keeps the symbols).
bin/clara: $(GO_SOURCES) $(wildcard cmd/clara/*.go) $(LIB_STAMP) ## the command line (cmd/clara): chat, call, tools, check, rules test, audit tail, mcp
	@mkdir -p bin
	$(GO) build -trimpath -ldflags "$(STRIP_LDFLAGS)" -o $@ ./cmd/clara

bin/clara-clips: clips_bridge/clara_clips_main.c clips_bridge/userfunctions.c $(BRIDGE) include/clara.h lib/libclara.so \
                 $(CLIPS_DEPS) $(CLIPS_STAMP)
	@mkdir -p bin build
	$(CC) $(ALL_CFLAGS) $(CLIPS_CFLAGS) -c clips_bridge/userfunctions.c -o build/userfunctions.o
	$(CC) $(ALL_CFLAGS) $(CLIPS_CFLAGS) clips_bridge/clara_clips.c clips_bridge/clara_clips_main.c \
	  -o $@ $(LIB_LDFLAGS) $(CLIPS_LIBS)

ifneq ($(strip $(CLIPS_SRC)),)
# CLIPS's own code, compiled as its makefile does; its warnings are not ours.
$(CLIPS_BUILD)/%.o: $(CLIPS_SRC_DIR)/%.c
	@mkdir -p $(CLIPS_BUILD)
	@$(CC) -std=c99 -O2 -g -fno-strict-aliasing -w $(CLIPS_DEFS) -c $< -o $@
$(CLIPS_BUILD)/clara_userfunctions.o: clips_bridge/userfunctions.c clips_bridge/clara_clips.h
	@mkdir -p $(CLIPS_BUILD)
	$(CC) $(ALL_CFLAGS) $(CLIPS_CFLAGS) -c $< -o $@
$(CLIPS_BUILD)/libclips.a: $(CLIPS_OBJS)
	@echo "ar $@ (CLIPS from $(CLIPS_SRC_DIR), $(words $(CLIPS_OBJS)) objects)"
	@rm -f $@ && ar rcs $@ $(CLIPS_OBJS)
endif

# ---- Checks -----------------------------------------------------------------

check-header: build/header-c99.o build/header-cxx.o ## clara.h compiles as C99 and C++ with -pedantic

build/header-c99.o: tests/c/header_check.c include/clara.h
	@mkdir -p build
	$(CC) -std=c99 -pedantic $(WARN) -Iinclude -c $< -o $@

build/header-cxx.o: tests/c/header_check.c include/clara.h
	@mkdir -p build
	$(CXX) -x c++ -std=c++11 -pedantic $(WARN) -Iinclude -c $< -o $@

check-symbols: lib/libclara.so ## the library exports exactly the functions of clara.h
	@bash tests/check_symbols.sh lib/libclara.so include/clara.h

# ---- Demo -------------------------------------------------------------------

demo-agent: all build/llmserver ## a CLIPS program asks a model (scripted, on loopback) that calls governed tools
	bash examples_c/agent/run.sh

demo: ## build everything and run the CLIPS demo on the embedded default config
	@bash tests/setup-debian.sh build
	@$(MAKE) --no-print-directory all
	env -u CLARA_CONFIG -u CLARA_LOG bin/clara-clips -f2 examples_c/demo.clp < /dev/null

# ---- Tests ------------------------------------------------------------------

test: ## everything CI runs
	@bash tests/setup-debian.sh build
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-go test-c test-valgrind test-python test-clips test-examples rules-test test-mcp test-pg
	@echo "make test: all passed"

test-go: ## gofmt, go vet, go test -race, the Lua attack corpus without -race
	@out=$$($(GOFMT) -l core capi rulelua cmd tests) || exit 1; test -z "$$out" || { echo "gofmt needed: $$out"; exit 1; }
	$(GO) vet ./...
	@# CLARA_REQUIRE_PG=1: the shared store's tests fail, rather than skip, when
	@# PostgreSQL is missing (make setup installs it; core/pgstore/pgtest starts it).
	CLARA_REQUIRE_PG=1 $(GO) test -race -count=1 $$($(GO) list ./... | grep -v '/tests/mcp$$')
	$(GO) test -count=1 -run 'TestAttackCorpus' ./rulelua

# tests/mcp builds bin/clara and a C host against lib/libclara.so, and
# installs the npm packages of tests/mcp/package-lock.json into build/npm
# when missing (the npm registry is all it needs of the network), the
# official conformance suite and the Node 22 it runs on among them.
test-mcp: lib ## MCP against code nobody here wrote: the TypeScript SDK and the official conformance suite drive bin/clara mcp and a C host; the engine consumes server-everything
	bash tests/mcp/npm-install.sh
	env -u CLARA_CONFIG -u CLARA_LOG -u CLARA_TEST_MODE -u CLARA_TEST_ALLOW $(GO) test -race -count=1 ./tests/mcp

# Several host processes sharing one PostgreSQL (issue 31): tests/pg/run.sh
# starts a throwaway server under build/ (tests/pg.sh) and stops it at the end.
test-pg: lib build/llmserver ## processes sharing one PostgreSQL: one rate limit, conversations, approvals, kill -9, a restart
	PYTHON=$(PYTHON) bash tests/pg/run.sh

C_TESTS := $(wildcard tests/c/test_*.c)

build/llmserver: $(GO_SOURCES) $(wildcard tests/llmserver/*.go core/llm/llmtest/*.go)
	@mkdir -p build
	$(GO) build -o $@ ./tests/llmserver

build/harness: tests/c/harness.c tests/c/harness.h $(C_TESTS) include/clara.h lib/libclara.so build/llmserver
	@mkdir -p build
	$(CC) $(ALL_CFLAGS) -std=c99 -D_POSIX_C_SOURCE=200809L -pthread tests/c/harness.c $(C_TESTS) -o $@ \
	  -Llib -lclara -Wl,-rpath,'$$ORIGIN/../lib'

test-c: build/harness build/stress_workers build/workers_tsan build/workers_asan ## the C harness, C tools called back to back from many threads, the worker pool under TSan and ASan (also on one processor)
	env -u CLARA_CONFIG -u CLARA_LOG build/harness
	env -u CLARA_CONFIG -u CLARA_LOG build/stress_workers 50000 4
	build/workers_tsan
	build/workers_asan
	@# Again with every thread on one processor, where callers and workers
	@# yield to each other rather than spin (capi/workers.c, "Sharing a processor").
	env -u CLARA_CONFIG -u CLARA_LOG bash tests/one-cpu.sh build/stress_workers 20000 4
	bash tests/one-cpu.sh build/workers_tsan

# The worker pool of capi/workers.c built alone with the sanitizers (the Go
# library cannot be): tests/c/workers_sanitized.c says what it checks.
WORKERS_SAN := tests/c/workers_sanitized.c capi/workers.c capi/report.c capi/shim.h include/clara.h tests/c/workers_stub/_cgo_export.h
build/workers_tsan: $(WORKERS_SAN)
	@mkdir -p build
	$(CC) -O1 -g $(WARN) -fsanitize=thread -pthread -Itests/c/workers_stub -Icapi -Iinclude \
	  tests/c/workers_sanitized.c capi/workers.c capi/report.c -o $@
build/workers_asan: $(WORKERS_SAN)
	@mkdir -p build
	$(CC) -O1 -g $(WARN) -fsanitize=address,undefined -fno-omit-frame-pointer -pthread -Itests/c/workers_stub -Icapi -Iinclude \
	  tests/c/workers_sanitized.c capi/workers.c capi/report.c -o $@

build/stress_workers: tests/c/stress_workers.c include/clara.h lib/libclara.so
	@mkdir -p build
	$(CC) $(ALL_CFLAGS) -pthread $< -o $@ -Llib -lclara -Wl,-rpath,'$$ORIGIN/../lib'

test-valgrind: build/harness ## the C harness under valgrind memcheck: no leaks from Clara
	bash tests/c/valgrind.sh build/harness

test-python: wheel build/llmserver bin/clara ## the Python package: the wheel in a fresh venv, its tests, mypy --strict
	bash tests/python/run.sh $(WHEEL)

build/clips_tool_driver: tests/clips/tool_driver.c $(BRIDGE) include/clara.h lib/libclara.so $(CLIPS_DEPS) $(CLIPS_STAMP)
	@mkdir -p build
	$(CC) $(ALL_CFLAGS) $(CLIPS_CFLAGS) tests/clips/tool_driver.c clips_bridge/clara_clips.c -o $@ \
	  -Llib -lclara -Wl,-rpath,'$$ORIGIN/../lib' $(CLIPS_LIBS)

build/clips_bridge_check: tests/clips/bridge_check.c $(BRIDGE) include/clara.h lib/libclara.so $(CLIPS_DEPS) $(CLIPS_STAMP)
	@mkdir -p build
	$(CC) $(ALL_CFLAGS) $(CLIPS_CFLAGS) tests/clips/bridge_check.c clips_bridge/clara_clips.c -o $@ \
	  -Llib -lclara -Wl,-rpath,'$$ORIGIN/../lib' $(CLIPS_LIBS)

test-clips: bin/clara-clips build/clips_tool_driver build/clips_bridge_check build/llmserver ## CLIPS programs against their expected output (CLIPS_SRC=DIR: CLIPS 6.4x from source)
	bash tests/clips/run.sh bin/clara-clips tests/clips build/clips_tool_driver build/clips_bridge_check

rules-test: lib/libclara.so ## the rule test files of the built-in rules and of rules/ (through rules_test)
	env -u CLARA_CONFIG -u CLARA_LOG CLARA_LIBRARY=$(CURDIR)/lib/libclara.so $(PYTHON) tests/rules_test.py $(RULE_TESTS)

test-examples: all build/llmserver ## the examples of examples_c/, README.md and docs/
	bash tests/examples.sh

# ---- Bench ------------------------------------------------------------------

bench: ## the performance table of docs/performance.md
	@bash tests/setup-debian.sh bench
	@$(MAKE) --no-print-directory all
	bash tests/bench/run.sh

# ---- Python package -----------------------------------------------------------

# Debian's interpreter, which sees Debian's setuptools, wheel, pip and venv
# (another python3 may come first on PATH).
SYSTEM_PYTHON ?= /usr/bin/python3
PY_VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' python/clara/_version.py)
# The wheel is tagged manylinux_2_34: the library needs only glibc, at
# most the symbol versions of glibc 2.34, which tests/check-glibc.sh checks
# before the wheel is built (a newer one fails the build).
WHEEL_GLIBC    := 2.34
WHEEL_PLATFORM := manylinux_$(subst .,_,$(WHEEL_GLIBC))_$(shell uname -m)
WHEEL := build/dist/clara-$(PY_VERSION)-py3-none-$(WHEEL_PLATFORM).whl

wheel: $(WHEEL) ## build/dist/clara-VERSION-py3-none-PLATFORM.whl, libclara.so inside

$(WHEEL): lib/libclara.so $(shell find python -type f ! -path 'python/build/*' ! -path '*.egg-info/*' ! -name '*.pyc' 2>/dev/null)
	@rm -rf build/wheel && mkdir -p build/wheel build/dist
	@# A copy of python/: setuptools writes its build/ and egg-info beside the sources.
	cp -r python build/wheel/src && rm -rf build/wheel/src/build build/wheel/src/*.egg-info
	rm -f build/dist/clara-*.whl
	bash tests/check-glibc.sh lib/$(LIBFILE) $(WHEEL_GLIBC)
	CLARA_WHEEL_LIBRARY=$(CURDIR)/lib/$(LIBFILE) CLARA_WHEEL_PLATFORM=$(WHEEL_PLATFORM) $(SYSTEM_PYTHON) -m pip wheel -q --no-index --no-build-isolation \
	  --no-deps -w build/dist build/wheel/src
	@test -f $@ || { echo "wheel: $@ was not built"; ls build/dist; exit 1; }

# ---- Install ----------------------------------------------------------------

# The CLIPS bridge is installed as source (share/clara/clips): an embedder
# compiles clara_clips.c against the CLIPS it uses (docs/clips.md).
install: all ## install library, links, headers, clara.pc, clara-clips and the CLIPS bridge's sources under PREFIX
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	  $(DESTDIR)$(PREFIX)/share/clara/clips
	install -m 0755 lib/$(LIBFILE) $(DESTDIR)$(PREFIX)/lib/$(LIBFILE)
	ln -sf $(LIBFILE) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libclara.so
	install -m 0644 include/clara.h $(DESTDIR)$(PREFIX)/include/clara.h
	install -m 0644 clips_bridge/clara_clips.h $(DESTDIR)$(PREFIX)/include/clara_clips.h
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: clara\nDescription: Embeddable tools-and-rules library (JSON requests in, JSON envelopes out)\nVersion: %s\nLibs: -L$${libdir} -lclara\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' '$(VERSION)' > $(DESTDIR)$(PREFIX)/lib/pkgconfig/clara.pc
	install -m 0755 bin/clara-clips $(DESTDIR)$(PREFIX)/bin/clara-clips
	install -m 0755 bin/clara $(DESTDIR)$(PREFIX)/bin/clara
	install -m 0644 clips_bridge/clara_clips.c clips_bridge/clara_clips.h clips_bridge/userfunctions.c \
	  $(DESTDIR)$(PREFIX)/share/clara/clips/
	@# ldconfig when the dynamic linker searches PREFIX/lib, else how to build against it.
	@bash tests/post-install.sh '$(PREFIX)' '$(DESTDIR)'

uninstall: ## remove what install put under PREFIX
	rm -f $(DESTDIR)$(PREFIX)/lib/$(LIBFILE) $(DESTDIR)$(PREFIX)/lib/$(SONAME) $(DESTDIR)$(PREFIX)/lib/libclara.so \
	  $(DESTDIR)$(PREFIX)/include/clara.h $(DESTDIR)$(PREFIX)/include/clara_clips.h \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/clara.pc $(DESTDIR)$(PREFIX)/bin/clara-clips $(DESTDIR)$(PREFIX)/bin/clara \
	  $(DESTDIR)$(PREFIX)/share/clara/clips/clara_clips.c $(DESTDIR)$(PREFIX)/share/clara/clips/clara_clips.h \
	  $(DESTDIR)$(PREFIX)/share/clara/clips/userfunctions.c
	rmdir $(DESTDIR)$(PREFIX)/share/clara/clips $(DESTDIR)$(PREFIX)/share/clara 2>/dev/null || true

clean: ## remove everything built
	rm -rf lib bin build
