# wanopt: WAN optimization proxy.  `make` builds bin/wanopt and bin/wanem,
# installing (as root) only missing build packages first.  `make check` runs
# every test and `make demo` runs the demo; both first install whatever the
# tests and the demo need (as root).  `make install` builds nothing it does not
# have to and installs no package.  V=1 shows commands.

CC      ?= cc
CFLAGS  ?= -O2 -g
BUILD   ?= build
BINDIR  ?= bin
SAN     ?=
WERROR  ?=

WARN     = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wvla -Wno-unused-parameter
REQ_CFLAGS = -std=gnu11 -pthread -MMD -MP -Iinclude $(WARN) $(if $(WERROR),-Werror) \
           $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all)
REQ_CPPFLAGS = -D_GNU_SOURCE
LIBS     = -levent_openssl -levent_pthreads -levent -lssl -lcrypto -lzstd -llz4 -lpthread -lm
LDSAN    = $(if $(SAN),-fsanitize=$(SAN))

ifeq ($(V),1)
Q =
else
Q = @
endif

# Library of everything but main: dre/ (codec, store), tfo/ (sockets), proxy/ (daemons).
LIB_SRC  = $(wildcard dre/*.c) $(wildcard tfo/*.c) $(wildcard proxy/tun/*.c) \
           $(filter-out proxy/main.c,$(wildcard proxy/*.c))
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      = $(BUILD)/libwanopt.a

# netem/ stands apart: its own library and binary, no project code.
WANEM_SRC = $(filter-out netem/wanem.c,$(wildcard netem/*.c))
WANEM_OBJ = $(WANEM_SRC:%.c=$(BUILD)/%.o)
WANEM_LIB = $(BUILD)/libwanem.a

TEST_SRC  = $(wildcard tests/test_*.c)
TEST_BIN  = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
NTEST_SRC = $(wildcard tests/netem/test_*.c)
NTEST_BIN = $(NTEST_SRC:tests/netem/%.c=$(BUILD)/tests/%)

.PHONY: all deps deps-quiet deps-build check tests soak asan ubsan fuzz demo bench bench-dre bench-proxy bench-bound bench-netem install clean
PROGS = $(BINDIR)/wanopt $(if $(wildcard netem/wanem.c),$(BINDIR)/wanem)
all: deps-build $(PROGS)

deps:
	@bash scripts/deps.sh
deps-quiet:
	@bash scripts/deps.sh
deps-build:
	@bash scripts/deps.sh build

# Order-only: under make -j the build packages are in place before any compile.
$(BUILD)/%.o: %.c | deps-build
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC  $<")
	$(Q)$(CC) $(REQ_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(REQ_CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(WANEM_LIB): $(WANEM_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^ $(if $(WANEM_OBJ),,&& true)

$(BINDIR)/wanopt: $(BUILD)/proxy/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) -pthread $(LDSAN) $(LDFLAGS) $^ $(LIBS) -o $@
# a build outside bin/ (build/asan/bin) still finds the profiles by name
$(BUILD)/netem/wanem.o: REQ_CPPFLAGS += -DWANEM_PROFILE_DIR='"$(CURDIR)/netem/profiles"'
$(BINDIR)/wanem: $(BUILD)/netem/wanem.o $(WANEM_LIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) -pthread $(LDSAN) $(LDFLAGS) $^ -levent -lm -o $@

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB)
	$(Q)$(CC) $(CFLAGS) -pthread $(LDSAN) $(LDFLAGS) $^ $(LIBS) -lcmocka -o $@
$(BUILD)/tests/%.o: tests/netem/%.c | deps-build
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(REQ_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(REQ_CFLAGS) -Inetem -c $< -o $@
$(NTEST_BIN): $(BUILD)/tests/%: $(BUILD)/tests/%.o $(WANEM_LIB)
	$(Q)$(CC) $(CFLAGS) -pthread $(LDSAN) $(LDFLAGS) $^ -levent -lm -lcmocka -o $@

$(TEST_SRC:%.c=$(BUILD)/%.o) $(NTEST_SRC:tests/netem/%.c=$(BUILD)/tests/%.o): | deps-quiet
tests: deps-quiet all $(TEST_BIN) $(NTEST_BIN)

# Every unit and integration test; ends with one summary line.
check: deps-quiet tests
	@BINDIR=$(BINDIR) BUILD=$(BUILD) bash tests/run.sh $(TEST_BIN) $(NTEST_BIN)

# A long run of mixed traffic, reloads and core kills through a pair
# (tests/soak.sh); SOAK_SECS (300), SOAK_LINK, SOAK_STORE, SAN=address|undefined for a sanitizer build.
soak: deps-quiet
	@if [ -n "$(SAN)" ]; then d=build/$(if $(filter address,$(SAN)),asan,ubsan); \
	  $(MAKE) -s BUILD=$$d BINDIR=$$d/bin SAN=$(SAN) CFLAGS="-O1 -g" all && \
	  BINDIR=$$d/bin SOAK_SECS=$(SOAK_SECS) bash tests/soak.sh; \
	else $(MAKE) -s all && SOAK_SECS=$(SOAK_SECS) bash tests/soak.sh; fi
SOAK_SECS ?= 300

asan:
	$(MAKE) BUILD=build/asan BINDIR=build/asan/bin SAN=address CFLAGS="-O1 -g" check
ubsan:
	$(MAKE) BUILD=build/ubsan BINDIR=build/ubsan/bin SAN=undefined CFLAGS="-O1 -g" check

# The five-scenario benchmark over an emulated link (netem/bench --help).
# PROFILE=t1|highlat|...; BENCH_ARGS e.g. "--files=ref --max-time=30".
PROFILE ?= t1
bench-netem: deps-quiet all
	@bash netem/bench $(PROFILE) $(BENCH_ARGS)

# libFuzzer harnesses (tests/fuzz/fuzz_*.c); FUZZ_TIME seconds each.
FUZZ_TIME ?= 60
FUZZ_SRC  = $(wildcard tests/fuzz/fuzz_*.c)
fuzz: deps-quiet
	@mkdir -p $(BUILD)/fuzz
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  echo "  FUZZ $$n ($(FUZZ_TIME)s)"; \
	  clang -O1 -g -std=gnu11 -D_GNU_SOURCE -Iinclude -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    $$f $(LIB_SRC) $(LIBS) -o $(BUILD)/fuzz/$$n || exit 1; \
	  mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	  $(BUILD)/fuzz/$$n -max_total_time=$(FUZZ_TIME) -print_final_stats=0 -artifact_prefix=$(BUILD)/fuzz/ \
	    $(BUILD)/fuzz/corpus-$$n $$( [ -d tests/fuzz/seeds/$$n ] && echo tests/fuzz/seeds/$$n ) \
	    > $(BUILD)/fuzz/$$n.log 2>&1; rc=$$?; tail -n 3 $(BUILD)/fuzz/$$n.log; \
	  if [ $$rc -ne 0 ]; then echo "  FUZZ $$n FAILED: see $(BUILD)/fuzz/$$n.log"; exit 1; fi; \
	done

demo: deps-quiet all
	@bash scripts/demo.sh

bench: bench-dre bench-proxy bench-netem
bench-dre: deps-quiet all
	@bash bench/dre.sh
bench-proxy: deps-quiet all $(BUILD)/bench/byterelay
	@BYTERELAY=$(BUILD)/bench/byterelay bash bench/proxy.sh
# What the pair's work on the bytes costs: the loopback benchmark against a
# measurement-only copy that skips it (bench/bound.sh; ROUNDS, TRIALS).
bench-bound: deps-quiet
	@bash bench/bound.sh

# The loopback benchmark's reference relay: it only copies bytes (no project code).
$(BUILD)/bench/byterelay: bench/byterelay.c | deps-build
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC  $<")
	$(Q)$(CC) $(REQ_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(REQ_CFLAGS) $< -o $@

# Installs the binary, the example configs (into $(SHAREDIR); into
# $(SYSCONFDIR) only where absent, never overwriting a site's config), the
# interception script and the systemd units.  DESTDIR for staging.
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc/wanopt
SHAREDIR   ?= $(PREFIX)/share/wanopt
UNITDIR    ?= $(PREFIX)/lib/systemd/system
install: $(PROGS)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SHAREDIR) $(DESTDIR)$(UNITDIR)
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)
	install -m 0755 $(BINDIR)/wanopt $(DESTDIR)$(PREFIX)/bin/wanopt
	install -m 0644 conf/edge.conf conf/core.conf $(DESTDIR)$(SHAREDIR)/
	install -m 0755 conf/intercept-nft.sh $(DESTDIR)$(SHAREDIR)/intercept-nft.sh
	@for r in edge core; do \
	  if [ -e $(DESTDIR)$(SYSCONFDIR)/$$r.conf ]; then \
	    echo "  keeping $(DESTDIR)$(SYSCONFDIR)/$$r.conf (example in $(SHAREDIR))"; \
	  else install -m 0640 conf/$$r.conf $(DESTDIR)$(SYSCONFDIR)/$$r.conf; fi; \
	  sed -e 's|@BINDIR@|$(PREFIX)/bin|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
	      -e 's|@SHAREDIR@|$(SHAREDIR)|g' conf/wanopt-$$r.service \
	    > $(DESTDIR)$(UNITDIR)/wanopt-$$r.service && \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/wanopt-$$r.service || exit 1; \
	done

clean:
	rm -rf build bin

-include $(LIB_OBJ:.o=.d) $(WANEM_OBJ:.o=.d) $(BUILD)/proxy/main.d $(BUILD)/netem/wanem.d \
         $(TEST_BIN:=.d) $(NTEST_BIN:=.d)
