# mk/bench.mk — `make bench` (speed and memory against PyTorch), `make bench-quality`
# (2000-iteration test loss against PyTorch), `make bench-ddp` (data-parallel training) and
# `make bench-eval` (the cost of a full evaluation by eval_stride).
# Benchmarks are never part of `make test`.
#
#   make bench            all of the below (about 11 minutes on 2 cores)
#   make bench-speed      S/M/T training speed, MFU, peak RSS, sgemm peak, sampling chars/s, then
#                         the same models in PyTorch; ratios. BENCH_ARGS="--configs S --quick"
#                         narrows it.
#   make bench-quality    char_cpu.yaml for 2000 iterations in mingpt and in PyTorch
#   make bench-ddp        the M model (6/6/384, block 256, global batch 16) as 1 rank x 2 threads
#                         and as 2 ranks x 1 thread (mpirun, --bind-to core and none), interleaved:
#                         tokens/s, all-reduce ms per step, % hidden behind the backward, ratio.
#                         DDP_REPS (3), DDP_ITERS (10), DDP_WARMUP (2), DDP_BINDS ("core none").
#   make bench-eval       a full evaluation of char_cpu.yaml's test split after 2000 iterations
#                         (trained once into build/bench-eval, or EVAL_SNAPSHOT=path): the default
#                         eval_stride against eval_stride=1, times, losses, speed-up.
#
# The PyTorch side uses Debian's python3-torch through /usr/bin/python3 (TORCH_PY).

TORCH_PY    ?= /usr/bin/python3
BENCH_ARGS  ?=
BENCH_BIN   := $(B)/bench/bench_train

.PHONY: bench-speed bench-quality bench-ddp bench-eval bench-build

$(BENCH_BIN): bench/bench_train.c $(B)/libmingpt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(B)/libmingpt.a $(LDLIBS)

-include $(BENCH_BIN:=.d)

bench-build: $(BENCH_BIN)

bench-speed: $(BENCH_BIN)
	$(TORCH_PY) bench/run_bench.py --bin $(BENCH_BIN) $(BENCH_ARGS)

bench-quality: mingpt data $(BENCH_BIN)
	$(TORCH_PY) bench/bench_quality.py --mingpt ./mingpt --bench $(BENCH_BIN) --config char_cpu.yaml

bench-ddp: mingpt data
	bash bench/bench_ddp.sh ./mingpt

EVAL_SNAPSHOT ?=
bench-eval: mingpt data
	bash bench/bench_eval.sh ./mingpt $(EVAL_SNAPSHOT)

BENCH_TARGETS += bench-speed bench-quality bench-ddp bench-eval
