# mk/bench.mk — `make bench` (speed and memory against PyTorch), `make bench-quality`
# (2000-iteration test loss against PyTorch), `make bench-ddp` (data-parallel training),
# `make bench-zero` (its sharded stages) and
# `make bench-eval` (the cost of a full evaluation by eval_stride), `make bench-profile` (a training
# step's time op by op, mingpt's next to PyTorch's).
# Benchmarks are never part of `make test`.
#
#   make bench            all of the below
#   make bench-speed      the machine's environment and GEMM; sgemm GFLOP/s of every implementation;
#                         S/M/T fp32 training speed, MFU, peak RSS and the GEMM chosen per shape class;
#                         the same models in PyTorch (eager, SDPA, torch.compile where the torch has
#                         them), ratios, and paired rounds of mingpt and PyTorch's best mode back
#                         to back (the goals' ratios); bf16 (S, M) against fp32 and PyTorch autocast; activation
#                         recomputation on the tutorial config; sampling chars/s; the goals. mingpt's
#                         runs are repeated, labelled, with OPENBLAS_CORETYPE unset (when it is set)
#                         or =Prescott (when it is not). BENCH_ARGS narrows it, e.g.
#                         BENCH_ARGS="--configs S --quick --no-recompute" (python3 bench/run_bench.py
#                         --help lists the options).
#   make bench-profile    S and M, fp32 and bf16: `bench_train train --profile 1` (every Backend op's
#                         time in the step, matmuls by role) next to the same step under
#                         torch.profiler (bench/torch_profile.py, eager and SDPA where the torch has
#                         it), per category, side by side (bench/profile_compare.py). PROFILE_ARGS
#                         narrows it, e.g. PROFILE_ARGS="--configs S --quick" (a minute or two);
#                         docs/performance.md explains the table.
#   make bench-quality    char_cpu.yaml for 2000 iterations in mingpt and in PyTorch
#   make bench-ddp        the M model (6/6/384, block 256, global batch 16) as 1 rank x 2 threads
#                         and as 2 ranks x 1 thread (mpirun, --bind-to core and none), interleaved:
#                         tokens/s, all-reduce ms per step, % hidden behind the backward, ratio.
#                         DDP_REPS (3), DDP_ITERS (10), DDP_WARMUP (2), DDP_BINDS ("core none").
#   make bench-zero       the M model on 2 ranks x 1 thread at trainer_config.zero_stage 0, 1 and 2,
#                         interleaved: tokens/s against stage 0, peak RSS per rank, the start-up line's
#                         gradient and AdamW bytes per rank, the parameter all-gather's busy and exposed
#                         ms per iteration, overlapped with the next forward (1, 2) and blocking (1b, 2b).
#                         ZERO_REPS (2), ZERO_ITERS (10), ZERO_WARMUP (2), ZERO_CAP_MB (25), ZERO_BIND (core),
#                         ZERO_CONFIGS ("0 1 1b 2 2b").
#   make bench-eval       a full evaluation of char_cpu.yaml's test split after 2000 iterations
#                         (trained once into build/bench-eval, or EVAL_SNAPSHOT=path): the default
#                         eval_stride against eval_stride=1, times, losses, speed-up.
#
# TORCH_PY: the Python interpreters whose torch the benchmarks run, separated by spaces (default
# Debian's python3-torch 1.13 through /usr/bin/python3). bench-speed measures each and compares with
# the fastest; bench-quality uses the first. A current PyTorch (SDPA, torch.compile, MKL) for
# comparison:
#   python3 -m venv build/torch-venv && build/torch-venv/bin/pip install torch
#   make bench-speed TORCH_PY="/usr/bin/python3 build/torch-venv/bin/python"
# The driver itself (bench/run_bench.py) needs only Python's standard library (BENCH_PY).

TORCH_PY    ?= /usr/bin/python3
BENCH_PY    ?= /usr/bin/python3
BENCH_ARGS  ?=
PROFILE_ARGS ?=
BENCH_BIN   := $(B)/bench/bench_train

.PHONY: bench-speed bench-profile bench-quality bench-ddp bench-zero bench-eval bench-build

$(BENCH_BIN): bench/bench_train.c $(B)/libmingpt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(B)/libmingpt.a $(LDLIBS)

-include $(BENCH_BIN:=.d)

bench-build: $(BENCH_BIN)
# tests/test_bench_profile.sh runs it (the profiler's checks)
EXTRA_BUILD += $(BENCH_BIN)

bench-speed: $(BENCH_BIN)
	$(BENCH_PY) bench/run_bench.py --bin $(BENCH_BIN) --cache-dir $(B)/bench-cache \
	    --torch-py "$(TORCH_PY)" $(BENCH_ARGS)

bench-profile: $(BENCH_BIN)
	$(BENCH_PY) bench/profile_compare.py --bin $(BENCH_BIN) --cache-dir $(B)/bench-cache \
	    --torch-py "$(firstword $(TORCH_PY))" $(PROFILE_ARGS)

bench-quality: mingpt data $(BENCH_BIN)
	$(firstword $(TORCH_PY)) bench/bench_quality.py --mingpt ./mingpt --bench $(BENCH_BIN) --config char_cpu.yaml

bench-ddp: mingpt data
	bash bench/bench_ddp.sh ./mingpt

bench-zero: mingpt data
	bash bench/bench_zero.sh ./mingpt

EVAL_SNAPSHOT ?=
bench-eval: mingpt data
	bash bench/bench_eval.sh ./mingpt $(EVAL_SNAPSHOT)

BENCH_TARGETS += bench-speed bench-profile bench-quality bench-ddp bench-eval
