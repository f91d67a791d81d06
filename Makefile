# mingpt — one binary that trains character-level GPT models.
#
#   make          build ./mingpt
#   make deps     install the Debian packages the build needs (root: apt-get; else prints the command)
#   make mkl      opt-in: oneMKL from PyPI into build/mkl, a further GEMM candidate (docs/performance.md)
#   make onednn3  opt-in: oneDNN 3.x from PyPI into build/onednn3, a further GEMM candidate (the same)
#   make data     put tiny-shakespeare at data/input.txt
#   make run      deps + build + data + train the small CPU preset (char_cpu.yaml) + print a sample
#   make test     deps + build + every test (+ make fuzz and make valgrind)
#   make test SAN=1   the same, every object built with AddressSanitizer + UBSan (in build/san)
#   make fuzz     libFuzzer targets (tests/fuzz/), FUZZ_SECONDS each; make valgrind: see mk/hardening.mk
#   make install PREFIX=/usr/local [DESTDIR=...] / make uninstall   see mk/install.mk
#
# Layout: config/ process/ dist/ data/ kernels/ model/ checkpoint/ trainer/ report/ app/ are compiled into build/libmingpt.a
# (docs/architecture.md: the rooms and their floors);
# main.c links it into ./mingpt; each tests/test_*.c is a cmocka program linked with it.

CC      ?= gcc
OPT     ?= -O3 -march=native
CFLAGS  ?= $(OPT) -g
# OpenBLAS's OpenMP build shares our OpenMP thread pool; with the default pthread build, its
# threads and OpenMP's spin-wait against each other, and a training step takes 2-3x as long
# on 2 cores.
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp
OPENBLAS_LIB ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter -fopenmp -I. \
           -I$(OPENBLAS_INC)
LDLIBS  += -L$(OPENBLAS_LIB) -Wl,-rpath,$(OPENBLAS_LIB) -lopenblas -ldnnl -lyaml -ljansson -lz -lm -fopenmp
# SAN=1: AddressSanitizer + UBSan on every object, in their own build directory (mk/hardening.mk)
SAN     ?= 0
ifeq ($(SAN),1)
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# gcc's warnings that the sanitizers' null checks make misfire (the plain build keeps them)
CFLAGS  += $(SAN_FLAGS) -Wno-format-truncation
LDLIBS  += $(SAN_FLAGS)
B       ?= build/san
endif
B       ?= build
# the shell tests find helper programs and libraries under ${B:-build}
export B

# Debian packages `make deps` installs (README, "What a fresh machine needs"): the compilers and
# tools of the build, the libraries mingpt links, and what the tests run. A fresh machine needs
# nothing else but make and git (tests/fresh_machine.sh checks that).
DEB_PKGS := build-essential pkg-config \
            libyaml-dev libjansson-dev zlib1g-dev libopenblas-openmp-dev libdnnl-dev libopenmpi-dev openmpi-bin \
            curl ca-certificates \
            libcmocka-dev clang libclang-rt-14-dev libomp-14-dev valgrind python3 python3-venv bc procps man-db tmux

LIB_SRC  := $(sort $(wildcard config/*.c process/*.c data/*.c model/*.c kernels/*.c kernels/cpu/*.c checkpoint/*.c trainer/*.c report/*.c app/*.c) dist/comm.c dist/shard.c dist/kill_grace.c)
LIB_SRC  := $(filter-out report/plot_cairo.c,$(LIB_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(B)/tests/%)
TEST_SH  := $(sort $(wildcard tests/test_*.sh))

# Feature makefiles (mk/*.mk) add targets and append to these:
#   EXTRA_TESTS  targets `make test` runs after the unit and shell tests
#   EXTRA_BUILD  targets `make test` builds first
#   BENCH_TARGETS targets `make bench` runs (benchmarks are never part of `make test`)
EXTRA_TESTS :=
EXTRA_BUILD :=
BENCH_TARGETS :=

.PHONY: all deps data run test unit e2e bench clean FORCE
.DELETE_ON_ERROR:

all: mingpt

# ---------------------------------------------------------------- dependencies
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "deps: installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "deps: missing Debian packages; run: sudo apt-get update && sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# Intel oneMKL, an opt-in GEMM library (kernels/cpu/gemm_mkl.h): PyPI's wheel into build/mkl, where
# ./mingpt finds it. Not part of deps: on the machines measured it won no fp32 shape class, and with
# it loaded 2-rank fp32 evaluations on oneDNN varied in their last bits between runs (not yet
# understood; docs/performance.md). Without it everything builds, runs and tests.
.PHONY: mkl
mkl:
	@sh tests/tools/mkl.sh build/mkl

# oneDNN 3.x, an opt-in GEMM library (kernels/cpu/gemm_dnnl3.h): PyPI's onednn-cpu-gomp wheel into
# build/onednn3, where ./mingpt finds it (beside Debian's oneDNN 2.x, which stays linked in). A
# candidate of the fp32 and bf16 shape classes, chosen only where measured faster.
.PHONY: onednn3
onednn3:
	@sh tests/tools/onednn3.sh build/onednn3

# ---------------------------------------------------------------- build
$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The commit --version names (checkpoint/version.h). $(B)/.git-commit keeps the last one and changes
# only with it, so a new commit recompiles checkpoint/version.c alone.
MINGPT_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(B)/.git-commit: FORCE
	@mkdir -p $(dir $@)
	$(if $(call streq,$(file <$@),$(MINGPT_COMMIT)),@:,$(file >$@,$(MINGPT_COMMIT))@:)
$(B)/checkpoint/version.o: $(B)/.git-commit
$(B)/checkpoint/version.o: CFLAGS += -DMINGPT_GIT_COMMIT='"$(MINGPT_COMMIT)"'

$(B)/libmingpt.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ./mingpt is linked from whichever build directory and flags this make uses (SAN=1: build/san);
# build/.mingpt-flavour records them, so that switching flavours relinks it.
MINGPT_FLAVOUR = $(B) | $(CC) $(CFLAGS) | $(LDLIBS)
streq = $(and $(findstring x$(1)x,x$(2)x),$(findstring x$(2)x,x$(1)x))
build/.mingpt-flavour: FORCE
	@mkdir -p $(dir $@)
	$(if $(call streq,$(file <$@),$(MINGPT_FLAVOUR)),@:,$(file >$@,$(MINGPT_FLAVOUR))@echo "mingpt: linking from $(B)")
FORCE:

mingpt: $(B)/main.o $(B)/libmingpt.a build/.mingpt-flavour
	$(CC) $(CFLAGS) -o $@ $(B)/main.o $(B)/libmingpt.a $(LDLIBS)

$(B)/tests/%: tests/%.c $(B)/libmingpt.a tests/test_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(B)/libmingpt.a $(LDLIBS) -lcmocka

-include $(LIB_OBJ:.o=.d) $(B)/main.d $(TEST_BIN:=.d)

# ---------------------------------------------------------------- data
# A recipe of its own, so that an up-to-date corpus is silent: make's "Nothing to be done for
# 'data'" would read as a second "done:" line in `make run`'s output.
data: data/input.txt
	@:

data/input.txt:
	@if [ -f ../shared/data/tinyshakespeare.txt ]; then \
	  cp ../shared/data/tinyshakespeare.txt $@; \
	else \
	  curl -fsSL -o $@.tmp https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt && mv $@.tmp $@; \
	fi
	@echo "data: $@ ($$(wc -c < $@) bytes)"

# ---------------------------------------------------------------- run
run: deps
	@$(MAKE) --no-print-directory mingpt data
	./mingpt --config-name char_cpu   # in runs/char_cpu/; resumes (or just evaluates) when its snapshot exists
	./mingpt sample --snapshot runs/char_cpu/char_cpu_snapshot.bin --max_new_tokens 500 --seed 1337

# ---------------------------------------------------------------- tests
# SAN=1: sanitizer reports of any process fail the test that caused them (SAN_CLEAN), and any
# left at the end fail `make test` (san-check); both in mk/hardening.mk
# The tests' GEMM calibration cache (kernels/cpu/gemm.h) lives in the build, not in $HOME.
test: export MINGPT_CACHE_DIR = $(abspath $(B))/gemm-cache
# Every skip of the run goes to this log (tests/lib.sh's skip, cmocka's skip(), the CUDA targets);
# skip-check fails `make test` on one that tests/allowed_skips.txt does not allow here.
test: export MINGPT_SKIP_LOG = $(abspath $(B))/skips.log
test: deps
	$(MAKE) mingpt $(TEST_BIN) data $(EXTRA_BUILD)
	@$(SAN_RESET); rm -f $(B)/skips.log
	$(MAKE) unit e2e $(EXTRA_TESTS) san-check skip-check || { $(SAN_CLEAN) || true; exit 1; }

# cmocka programs; the closing line counts their test cases (a program that dies before its
# summary counts as one failure); each skipped case is logged as PROGRAM/TEST
unit: $(TEST_BIN)
	@pass=0; fail=0; skipped=0; for t in $(TEST_BIN); do \
	  echo "== $$t"; $$t > $$t.out 2>&1; rc=$$?; cat $$t.out; n=$$(basename $$t); \
	  p=$$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' $$t.out); pass=$$((pass + $${p:-0})); \
	  f=$$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' $$t.out); \
	  for k in $$(sed -n 's/^\[  SKIPPED \] \([A-Za-z_][A-Za-z0-9_]*\)$$/\1/p' $$t.out | sort -u); do \
	    skipped=$$((skipped+1)); [ -z "$${MINGPT_SKIP_LOG:-}" ] || printf '%s\t%s\t%s\n' "$$n/$$k" "$$n" "cmocka skip()" >> "$$MINGPT_SKIP_LOG"; \
	  done; \
	  if [ $$rc -eq 0 ] && $(SAN_CLEAN); then :; else fail=$$((fail + $${f:-1})); echo "FAILED: $$t"; fi; \
	done; echo "unit: $$pass passed, $$fail failed, $$skipped skipped"; [ $$fail -eq 0 ]

# shell tests; the closing line counts programs (each prints its own checks' counts) and the
# skips they logged
e2e: mingpt data
	@pass=0; fail=0; log=$${MINGPT_SKIP_LOG:-/dev/null}; s0=$$(cat $$log 2>/dev/null | wc -l); for t in $(TEST_SH); do \
	  echo "== $$t"; if bash $$t && $(SAN_CLEAN); then pass=$$((pass+1)); else fail=$$((fail+1)); echo "FAILED: $$t"; fi; \
	done; echo "e2e: $$pass passed, $$fail failed, $$(( $$(cat $$log 2>/dev/null | wc -l) - s0 )) skipped"; [ $$fail -eq 0 ]

.PHONY: skip-check
skip-check:
	@CUDA=$(CUDA) SAN=$(SAN) bash tests/skip_check.sh $${MINGPT_SKIP_LOG:-$(abspath $(B))/skips.log}

bench: deps
	$(MAKE) mingpt data
	$(MAKE) $(BENCH_TARGETS)

clean:
	rm -rf $(B) build mingpt

include $(sort $(wildcard mk/*.mk))
