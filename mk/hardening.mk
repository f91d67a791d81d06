# mk/hardening.mk — sanitizers, fuzzing and valgrind, included by the Makefile.
#
#   make test SAN=1   every object (library, main, tests, libmingpt_mpi.so, the nvcc and emulated
#                     CUDA objects, build/san/emu/libmingpt_cuda.so, ddp_check, benches) built with
#                     AddressSanitizer + UBSan into build/san, then the whole suite. ./mingpt is then
#                     the sanitized binary; the next plain `make` relinks the normal one (the
#                     Makefile's flavour stamp). Every sanitizer exits 86, a code no test expects.
#                     ASan and LeakSanitizer reports go to files (build/san/san-logs/), so that a
#                     report from any process fails the suite, even from one whose exit code a
#                     test ignores; the runner prints them after the test that caused them. UBSan
#                     reports go to stderr (gcc's UBSan next to ASan ignores log_path).
#                     Open MPI, OpenBLAS and libgomp are not instrumented; their own allocations
#                     that live until exit are suppressed by library name in tests/lsan.supp.
#   make fuzz         every tests/fuzz/fuzz_<name>.c (a libFuzzer target: LLVMFuzzerTestOneInput)
#                     built with clang, -fsanitize=fuzzer,address,undefined, against the library
#                     compiled with clang into build/fuzz; each runs its regressions
#                     (tests/fuzz/regressions/<name>/), then fuzzes for FUZZ_SECONDS (30) from its
#                     seeds (tests/fuzz/corpus/<name>/) with its dictionary (tests/fuzz/<name>.dict);
#                     see tests/fuzz/run_fuzz.sh. `make fuzz-<name>` runs one; `make -j2 fuzz` two
#                     at a time. `make test` runs `make fuzz` (not again under SAN=1: the fuzz
#                     build is always sanitized).
#   make valgrind     a build without -march=native (valgrind stops on AVX-512) in build/vg: a
#                     3-iteration training run of a tiny model, its resumption for 2 more, and
#                     `mingpt sample` on its snapshot, each under memcheck; any error or definitely
#                     lost block fails (tests/valgrind.supp: library faults only). In `make test`.

# ---------------------------------------------------------------- SAN=1
# (the flags and build directory are set in the Makefile, before any object path is computed)
# Where the reports go, and the options every sanitized process of the suite runs with.
SAN_LOG_DIR := $(abspath $(B))/san-logs
ifeq ($(SAN),1)
$(shell mkdir -p $(SAN_LOG_DIR))
export ASAN_OPTIONS  := detect_leaks=1:halt_on_error=1:exitcode=86:log_path=$(SAN_LOG_DIR)/report:strict_init_order=1
export UBSAN_OPTIONS := halt_on_error=1:print_stacktrace=1:exitcode=86
export LSAN_OPTIONS  := suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0
# A shell command, run after each test: true while no new report appeared; else prints the
# reports, moves them to $(B)/san-failed/ and is false.
SAN_CLEAN = { [ -z "$$(ls -A $(SAN_LOG_DIR))" ] || { echo "sanitizer reports:"; \
  for r in $(SAN_LOG_DIR)/*; do echo "--- $$r"; head -60 "$$r"; done; \
  mkdir -p $(B)/san-failed && mv $(SAN_LOG_DIR)/* $(B)/san-failed/; \
  echo "(kept in $(B)/san-failed/)"; false; }; }
SAN_RESET = rm -rf $(SAN_LOG_DIR)/* $(B)/san-failed
else
SAN_CLEAN = true
SAN_RESET = true
endif

.PHONY: san-check
san-check:
	@$(SAN_CLEAN)

# ---------------------------------------------------------------- fuzz
FUZZ_CC      ?= clang
FUZZ_B       := build/fuzz
FUZZ_SECONDS ?= 30
# -march=native as in the normal build (the SIMD code needs AVX); no OpenMP: one thread per
# input, the OpenMP calls resolve to libgomp (which OpenBLAS loads anyway), omp.h is libomp's
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -g -O1 -march=native -D_GNU_SOURCE -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
                -I. -I$(OPENBLAS_INC) -Wall -Wextra -Werror -Wno-unused-parameter -Wno-unknown-pragmas \
                -Wno-source-uses-openmp $(FUZZ_SAN)
FUZZ_LDLIBS  := -L$(OPENBLAS_LIB) -Wl,-rpath,$(OPENBLAS_LIB) -lopenblas -ldnnl -lyaml -ljansson -lz -lm -lgomp
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES   := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_BIN     := $(FUZZ_NAMES:%=$(FUZZ_B)/fuzz_%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_B)/%.o)
FUZZ_RUNS    := $(FUZZ_NAMES:%=fuzz-%)

$(FUZZ_B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(FUZZ_B)/libmingpt.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_B)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_B)/libmingpt.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_B)/libmingpt.a $(FUZZ_LDLIBS)
-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BIN:=.d)

.PHONY: fuzz fuzz-build $(FUZZ_RUNS)
fuzz-build: $(FUZZ_BIN)
fuzz: $(FUZZ_RUNS)
	@echo "fuzz: $(words $(FUZZ_NAMES)) targets ($(FUZZ_NAMES)), $(FUZZ_SECONDS) s each: no crash"
$(FUZZ_RUNS): fuzz-%: $(FUZZ_B)/fuzz_%
	@sh tests/fuzz/run_fuzz.sh $* $< $(FUZZ_SECONDS) $(FUZZ_B)

# ---------------------------------------------------------------- valgrind
VG_B       := build/vg
VG_OPT     ?= -O2 -mavx2 -mfma
VALGRIND   ?= valgrind
VG_FLAGS   := --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
              --show-leak-kinds=definite --num-callers=30 --suppressions=tests/valgrind.supp
# the tiny model: one layer, 32 wide, 16 tokens of context, 1% of the corpus, 3 iterations
VG_RUN     := $(abspath $(VG_B))/run
VG_TRAIN   := --config-name char_cpu gpt_config.n_layer=1 gpt_config.n_embd=32 gpt_config.n_head=2 \
              data_config.block_size=16 data_config.truncate=0.01 trainer_config.max_iters=3 \
              trainer_config.batch_size=4 trainer_config.eval_iters=2 trainer_config.eval_every=2 \
              trainer_config.save_every_iters=2 trainer_config.log_every=1 \
              trainer_config.snapshot_path=$(VG_RUN)/vg.bin hydra.run.dir=$(VG_RUN)

# the same sources, its own objects (a sub-make with B=$(VG_B)); the binary stays inside it
$(VG_B)/mingpt: $(VG_B)/main.o $(VG_B)/libmingpt.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

.PHONY: valgrind valgrind-build
valgrind-build:
	@$(MAKE) --no-print-directory B=$(VG_B) OPT='$(VG_OPT)' SAN=0 $(VG_B)/mingpt
valgrind: valgrind-build data
	@rm -rf $(VG_RUN) && mkdir -p $(VG_RUN)
	@echo "== valgrind: training (3 iterations of a 1-layer model)"
	@OMP_NUM_THREADS=1 $(VALGRIND) $(VG_FLAGS) --log-file=$(VG_RUN)/train.vg $(VG_B)/mingpt $(VG_TRAIN) \
	    > $(VG_RUN)/train.log 2>&1 || { cat $(VG_RUN)/train.log $(VG_RUN)/train.vg; echo "FAILED: valgrind: training"; exit 1; }
	@grep -E "ERROR SUMMARY|definitely lost" $(VG_RUN)/train.vg | sed 's/^==[0-9]*== /  /'
	@echo "== valgrind: resuming from the snapshot (2 more iterations)"
	@OMP_NUM_THREADS=1 $(VALGRIND) $(VG_FLAGS) --log-file=$(VG_RUN)/resume.vg $(VG_B)/mingpt $(VG_TRAIN) \
	    trainer_config.max_iters=5 > $(VG_RUN)/resume.log 2>&1 || { cat $(VG_RUN)/resume.log $(VG_RUN)/resume.vg; echo "FAILED: valgrind: resume"; exit 1; }
	@grep -q "Resuming training from snapshot" $(VG_RUN)/resume.log || { cat $(VG_RUN)/resume.log; echo "FAILED: valgrind: did not resume"; exit 1; }
	@grep -E "ERROR SUMMARY|definitely lost" $(VG_RUN)/resume.vg | sed 's/^==[0-9]*== /  /'
	@echo "== valgrind: sample"
	@OMP_NUM_THREADS=1 $(VALGRIND) $(VG_FLAGS) --log-file=$(VG_RUN)/sample.vg $(VG_B)/mingpt sample \
	    --snapshot $(VG_RUN)/vg.bin --prompt 'O God' --max_new_tokens 20 --seed 1 \
	    > $(VG_RUN)/sample.log 2>&1 || { cat $(VG_RUN)/sample.log $(VG_RUN)/sample.vg; echo "FAILED: valgrind: sample"; exit 1; }
	@grep -E "ERROR SUMMARY|definitely lost" $(VG_RUN)/sample.vg | sed 's/^==[0-9]*== /  /'
	@echo "valgrind: no errors, no definitely lost blocks"

# ---------------------------------------------------------------- in make test
ifneq ($(SAN),1)
EXTRA_BUILD += fuzz-build valgrind-build
EXTRA_TESTS += fuzz valgrind
endif
