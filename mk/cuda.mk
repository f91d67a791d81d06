# mk/cuda.mk — the CUDA backend (kernels/cuda/), included by the Makefile.
#
# With nvcc on PATH (CUDA=0 skips everything here):
#   * every kernels/cuda/*.cu compiles with nvcc once, for sm_80 and sm_90 (+ compute_90 PTX
#     for newer GPUs) in one call, warnings as errors (host compiler, nvcc and ptxas, which
#     also reports register spills and local memory as errors); `nvcc --resource-usage`
#     output of all files is kept in $(B)/nv/resource-usage.log and checked for spills;
#   * those objects are linked with cudart, cuBLAS and cuBLASLt into $(B)/libmingpt_cuda.so, which
#     ./mingpt loads with dlopen only when a CUDA backend is asked for (backend_select,
#     kernels/backend.c; the emulated test programs link the objects and the weak
#     backend_cuda_create instead, see kernels/backend.h);
#   * `make test` also compiles the same .cu files with g++ and the emulation layer
#     (kernels/cuda/emu/cuda_emu.h, its cuBLAS shim backed by OpenBLAS) and runs the emulated
#     suites under the default, reversed and random thread schedules, with deferred stream
#     execution (EMU_DEFER=1) and under AddressSanitizer + UBSan; plus the dialect gate and
#     the no-driver negative tests;
#   * the same emulated objects, built -fPIC, as a shared library that ./mingpt loads instead of
#     the real one when MINGPT_CUDA_LIB names it ($(B)/emu/libmingpt_cuda.so), and the NCCL path
#     of data-parallel training on it: tests/cuda/test_nccl_emu.sh runs MPI ranks (processes)
#     whose emulated NCCL (kernels/cuda/emu/nccl_emu.h) all-reduces over MPI.
comma := ,
CUDA ?= $(if $(shell command -v nvcc 2>/dev/null),1,0)

ifeq ($(CUDA),1)

NVCC      ?= nvcc
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v $(NVCC))))
CXX       ?= g++
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
NVCCFLAGS ?= -O3 -g -lineinfo
NVCC_ALL  := -std=c++17 -I. $(CUDA_ARCH) $(NVCCFLAGS) --threads 2 --resource-usage \
             -Werror all-warnings -Xptxas -warn-spills,-warn-lmem-usage,-Werror \
             -Xcompiler -Wall,-Wextra,-Werror,-fPIC
# SAN=1 (Makefile): the host side of the nvcc objects is sanitized too (one flag per -Xcompiler:
# nvcc splits its argument at commas)
NVCC_ALL  += $(foreach f,$(subst $(comma), ,$(subst -fsanitize=,,$(filter -fsanitize=%,$(SAN_FLAGS)))),-Xcompiler -fsanitize=$(f)) \
             $(foreach f,$(filter-out -fsanitize=%,$(SAN_FLAGS)),-Xcompiler $(f))
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lnccl -lstdc++

CUDA_SRC  := $(sort $(wildcard kernels/cuda/*.cu))
CUDA_HDR  := $(wildcard kernels/cuda/*.cuh kernels/cuda/*.h) kernels/cuda/emu/launch.cuh \
             kernels/backend.h kernels/dropout_rng.h
CUDA_OBJ  := $(CUDA_SRC:%.cu=$(B)/nv/%.o)
CUDA_RU   := $(B)/nv/resource-usage.log

# ---------------------------------------------------------------- real CUDA build
$(B)/nv/%.o: %.cu $(CUDA_HDR) mk/cuda.mk
	@mkdir -p $(dir $@)
	@echo "$(NVCC) [sm_80 sm_90] -c $<"
	@$(NVCC) $(NVCC_ALL) -c $< -o $@ > $@.ru 2>&1 || { cat $@.ru; rm -f $@; exit 1; }

$(CUDA_RU): $(CUDA_OBJ) tests/cuda/check_spills.sh
	@cat $(CUDA_OBJ:=.ru) > $@
	@sh tests/cuda/check_spills.sh $@

# The CUDA backend is a shared library that ./mingpt dlopens only when a CUDA backend is
# asked for (device=cuda or auto): loading cuBLAS costs ~100 ms, which every other command
# (--cfg job, --help, sample) must not pay. Path: MINGPT_CUDA_LIB in the Makefile.
CUDA_SO := $(B)/libmingpt_cuda.so
# Where ./mingpt looks for it, relative to the binary (without CUDA=1 it is not built, and
# --version says so)
$(B)/kernels/backend.o: CFLAGS += -DMINGPT_CUDA_LIB='"$(CUDA_SO)"'
$(CUDA_SO): $(CUDA_OBJ) | $(CUDA_RU)
	$(CC) -shared -o $@ $(CUDA_OBJ) $(CUDA_LDLIBS) -lm $(SAN_FLAGS)
mingpt: | $(CUDA_SO)

# ---------------------------------------------------------------- emulated build
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp
# the emulator's NCCL runs over MPI (Open MPI's wrapper compiler knows the flags; make deps
# installs it, and `make test` parses this file again after deps)
EMU_MPI_CFLAGS := $(shell mpicc -showme:compile 2>/dev/null)
EMU_MPI_LIBS   := $(shell mpicc -showme:link 2>/dev/null)
EMU_H      := kernels/cuda/emu/cuda_emu.h
EMU_DEPS   := $(EMU_H) kernels/cuda/emu/nccl_emu.h kernels/cuda/emu/cublaslt_emu.h kernels/cuda/emu/emu_counters.h \
              kernels/cuda/emu/wmma_emu.h
EMU_FLAGS  := -x c++ -std=c++17 -O2 -g -I. -I$(CUDA_HOME)/include -I$(OPENBLAS_INC) $(EMU_MPI_CFLAGS) -DEMU_USE_CBLAS \
              -include $(EMU_H) -Wall -Wextra -Werror $(SAN_FLAGS)
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
EMU_OBJ    := $(CUDA_SRC:%.cu=$(B)/emu/%.o)
ASAN_OBJ   := $(CUDA_SRC:%.cu=$(B)/emu-asan/%.o)

$(B)/emu/%.o: %.cu $(CUDA_HDR) $(EMU_DEPS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -c $< -o $@
$(B)/emu-asan/%.o: %.cu $(CUDA_HDR) $(EMU_DEPS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) $(ASAN_FLAGS) -c $< -o $@
$(B)/emu-asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -c $< -o $@

# comm_nccl.cu implements dist/comm.h and times with config/clock.h (the other kernels include
# neither)
$(foreach d,nv emu emu-asan emu-pic,$(B)/$(d)/kernels/cuda/comm_nccl.o): dist/comm.h config/clock.h

# ./mingpt can load the emulated backend: the emulated objects built -fPIC, one shared library
# (MINGPT_CUDA_LIB=$(abspath $(EMU_SO)) ./mingpt trainer_config.device=cuda ...)
EMU_SO      := $(B)/emu/libmingpt_cuda.so
EMU_PIC_OBJ := $(CUDA_SRC:%.cu=$(B)/emu-pic/%.o)
$(B)/emu-pic/%.o: %.cu $(CUDA_HDR) $(EMU_DEPS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -fPIC -c $< -o $@
$(EMU_SO): $(EMU_PIC_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -shared -Wl,-z,defs -o $@ $(EMU_PIC_OBJ) -L$(OPENBLAS_LIB) -Wl,-rpath,$(OPENBLAS_LIB) -lopenblas \
	    $(EMU_MPI_LIBS) -lpthread -lm $(SAN_FLAGS)

# The cuBLAS shim's own loops instead of OpenBLAS (only matmul.cu calls cuBLAS): a GEMM
# summation order unlike the CPU backend's, as on a real GPU, for the fp32 comparisons.
NOBLAS_OBJ := $(filter-out $(B)/emu/kernels/cuda/matmul.o,$(EMU_OBJ)) $(B)/emu-noblas/kernels/cuda/matmul.o
$(B)/emu-noblas/%.o: %.cu $(CUDA_HDR) $(EMU_DEPS)
	@mkdir -p $(dir $@)
	$(CXX) $(filter-out -DEMU_USE_CBLAS,$(EMU_FLAGS)) -c $< -o $@

CUDA_TESTS := test_cuda_ops test_cuda_train test_cuda_cast test_loss_scaler test_cuda_layouts test_cuda_tf32 test_cuda_graph
CUDA_EMU_BIN  := $(CUDA_TESTS:%=$(B)/cuda-tests/%)
ifeq ($(SAN),1)
# every emulated suite is sanitized already: the ASan run is the plain binaries with its schedule
CUDA_ASAN_BIN := $(CUDA_EMU_BIN)
CUDA_ASAN_ENV := EMU_SCHEDULE=rand EMU_DEFER=1
else
CUDA_ASAN_BIN := $(CUDA_TESTS:%=$(B)/cuda-tests/%.asan)
CUDA_ASAN_ENV := ASAN_OPTIONS=detect_leaks=1 EMU_SCHEDULE=rand EMU_DEFER=1
endif
CUDA_NOBLAS_BIN := $(B)/cuda-tests/test_cuda_ops.noblas $(B)/cuda-tests/test_cuda_train.noblas
EMU_SELF_BIN  := $(B)/cuda-tests/emu/test_emu_features $(B)/cuda-tests/emu/test_emu_cublas $(B)/cuda-tests/emu/test_emu_cublaslt \
                 $(B)/cuda-tests/emu/test_emu_graph $(B)/cuda-tests/emu/test_emu_wmma \
                 $(B)/cuda-tests/emu/emu_bugs $(B)/cuda-tests/emu/emu_bugs.asan $(B)/cuda-tests/emu/test_emu_features.asan

$(B)/cuda-tests/%: tests/cuda/%.c $(EMU_OBJ) $(B)/libmingpt.a tests/test_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MT $@ -MF $@.d -c $< -o $@.o
	$(CXX) -fopenmp -o $@ $@.o $(EMU_OBJ) $(B)/libmingpt.a $(LDLIBS) $(EMU_MPI_LIBS) -lcmocka
$(B)/cuda-tests/%.asan: tests/cuda/%.c $(ASAN_OBJ) $(B)/emu-asan/trainer/loss_scaler.o $(B)/libmingpt.a tests/test_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MT $@ -MF $@.d -c $< -o $@.o
	$(CXX) -fopenmp $(ASAN_FLAGS) -o $@ $@.o $(ASAN_OBJ) $(B)/emu-asan/trainer/loss_scaler.o $(B)/libmingpt.a $(LDLIBS) $(EMU_MPI_LIBS) -lcmocka

$(B)/cuda-tests/%.noblas: tests/cuda/%.c $(NOBLAS_OBJ) $(B)/libmingpt.a tests/test_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MT $@ -MF $@.d -c $< -o $@.o
	$(CXX) -fopenmp -o $@ $@.o $(NOBLAS_OBJ) $(B)/libmingpt.a $(LDLIBS) $(EMU_MPI_LIBS) -lcmocka

# the NCCL path on MPI ranks: a plain C program with libmingpt.a (dist/comm.c opens the MPI
# communicator from $(B)/libmingpt_mpi.so, backend_select loads $(EMU_SO)); run by tests/cuda/test_nccl_emu.sh
NCCL_EMU_BIN := $(B)/cuda-tests/test_nccl_emu
$(NCCL_EMU_BIN): tests/cuda/test_nccl_emu.c $(B)/libmingpt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(B)/libmingpt.a $(LDLIBS)

# the emulator's own tests (dialect semantics, cuBLAS shim, diagnosed bugs); emu_bugs is never
# built with SAN=1's sanitizers: its cases are deliberate bugs that the emulator must report
# (it leaks on purpose; emu_bugs.asan is its ASan case)
$(B)/cuda-tests/emu/emu_bugs: EMU_FLAGS := $(filter-out $(SAN_FLAGS),$(EMU_FLAGS))
$(B)/cuda-tests/emu/%: tests/cuda/emu/%.cu $(EMU_DEPS) kernels/cuda/emu/launch.cuh
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -Wno-unused-parameter $< -o $@ -L$(OPENBLAS_LIB) -Wl,-rpath,$(OPENBLAS_LIB) -lopenblas -lpthread
$(B)/cuda-tests/emu/%.asan: tests/cuda/emu/%.cu $(EMU_DEPS) kernels/cuda/emu/launch.cuh
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -Wno-unused-parameter -fsanitize=address -fno-omit-frame-pointer $< -o $@ -L$(OPENBLAS_LIB) -Wl,-rpath,$(OPENBLAS_LIB) -lopenblas -lpthread

# objects of the chains above are kept (not deleted as intermediates)
.SECONDARY: $(EMU_OBJ) $(ASAN_OBJ) $(EMU_PIC_OBJ) $(B)/emu-noblas/kernels/cuda/matmul.o $(B)/emu-asan/trainer/loss_scaler.o

# header dependencies of the C parts (test programs; the ASan build of the loss scaler, which the
# .asan test programs link ahead of libmingpt.a's, so the scaler they test is instrumented too)
-include $(wildcard $(B)/cuda-tests/*.d $(B)/emu-asan/trainer/loss_scaler.d)

# no-driver probe: a C program linked with the real (nvcc) objects, like ./mingpt
$(B)/cuda-tests/cuda_probe: tests/cuda/cuda_probe.c $(CUDA_OBJ) $(B)/libmingpt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(CUDA_OBJ) $(B)/libmingpt.a $(LDLIBS) $(CUDA_LDLIBS)

# ---------------------------------------------------------------- targets
.PHONY: cuda-build cuda-build-all cuda-test cuda-gate cuda-emu cuda-emu-rand cuda-emu-rev cuda-emu-defer cuda-emu-lprefuse \
        cuda-emu-noepi cuda-emu-noblas cuda-emu-asan cuda-emu-self cuda-negative cuda-emu-nccl cuda-emu-counts
# compile in parallel even when make runs without -j (the nvcc calls dominate the build)
CUDA_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# after ./mingpt: libmingpt.a and the nvcc objects are then built, so the sub-make (its own
# job slots) never races the parent make over them under make -j
cuda-build: mingpt
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(CUDA_JOBS)) cuda-build-all
cuda-build-all: $(CUDA_RU) $(CUDA_EMU_BIN) $(CUDA_ASAN_BIN) $(CUDA_NOBLAS_BIN) $(EMU_SELF_BIN) $(B)/cuda-tests/cuda_probe \
                $(EMU_SO) $(NCCL_EMU_BIN)

EXTRA_BUILD += cuda-build
EXTRA_TESTS += cuda-test

# every emulated suite runs under these settings (all must pass); one OpenMP thread: the
# CPU reference ops are tiny here, and spinning OpenMP threads on a loaded 2-core CI
# machine make the suites up to 10x slower
CUDA_TEST_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cuda-test: cuda-gate cuda-emu-self cuda-emu cuda-emu-rev cuda-emu-rand cuda-emu-defer cuda-emu-lprefuse cuda-emu-noepi cuda-emu-noblas \
           cuda-emu-asan cuda-negative cuda-emu-nccl cuda-emu-counts
	@echo "cuda: all emulated suites, gate and negative tests passed"

cuda-gate:
	@sh tests/cuda/check_dialect.sh
	@sh tests/cuda/test_gate.sh
	@sh tests/cuda/check_spills.sh $(CUDA_RU)
cuda-emu-self: $(EMU_SELF_BIN)
	@$(B)/cuda-tests/emu/test_emu_features >/dev/null && echo "emu: dialect semantics ok"
	@$(B)/cuda-tests/emu/test_emu_features.asan > $(B)/cuda-tests/emu/test_emu_features.asan.log 2>&1 \
	  && echo "emu: dialect semantics under ASan ok (fiber stacks unmapped with clean shadow)" \
	  || { cat $(B)/cuda-tests/emu/test_emu_features.asan.log; exit 1; }
	@$(B)/cuda-tests/emu/test_emu_cublas >/dev/null && echo "emu: cuBLAS shim ok"
	@$(B)/cuda-tests/emu/test_emu_cublaslt >/dev/null && echo "emu: cuBLASLt shim ok"
	@$(B)/cuda-tests/emu/test_emu_graph > $(B)/cuda-tests/emu/test_emu_graph.log 2>&1 \
	  && echo "emu: stream capture and graphs ok" || { cat $(B)/cuda-tests/emu/test_emu_graph.log; exit 1; }
	@$(B)/cuda-tests/emu/test_emu_wmma >/dev/null && echo "emu: wmma ok"
	@sh tests/cuda/emu/run_emu_bugs.sh $(B)/cuda-tests/emu
define run_cuda_suites
	@set -e; for t in $(2); do echo "== $$t [$(1)]"; env $(CUDA_TEST_ENV) $(1) $$t > $$t.$(3).log 2>&1 || { cat $$t.$(3).log; echo "FAILED: $$t [$(1)]"; exit 1; }; \
	  grep -E "PASSED|FAILED|step 9|eval:" $$t.$(3).log | tail -9; done
endef
cuda-emu: $(CUDA_EMU_BIN)
	$(call run_cuda_suites,EMU_SCHEDULE=fwd,$(CUDA_EMU_BIN),fwd)
cuda-emu-rev: $(CUDA_EMU_BIN)
	$(call run_cuda_suites,EMU_SCHEDULE=rev,$(CUDA_EMU_BIN),rev)
cuda-emu-rand: $(CUDA_EMU_BIN)
	$(call run_cuda_suites,EMU_SCHEDULE=rand EMU_SEED=7,$(CUDA_EMU_BIN),rand)
cuda-emu-defer: $(CUDA_EMU_BIN)
	$(call run_cuda_suites,EMU_DEFER=1,$(CUDA_EMU_BIN),defer)
# the emulated cuBLASLt refusing a 16-bit D with fp32 epilogue vectors (as a real one may): the
# fallbacks of c_fc's GELU, mlp.c_proj's dGELU and c_attn's bias epilogues writing copies, in the
# suites that reach them
CUDA_LPREFUSE_BIN := $(filter %/test_cuda_ops %/test_cuda_cast %/test_cuda_train %/test_cuda_graph %/test_cuda_layouts,\
                              $(CUDA_EMU_BIN))
cuda-emu-lprefuse: $(CUDA_LPREFUSE_BIN)
	$(call run_cuda_suites,EMU_CUBLASLT_LP_D=refuse,$(CUDA_LPREFUSE_BIN),lprefuse)
# MINGPT_CUDA_EPILOGUES=off: no cuBLASLt at all, the backend's own bias, GELU and column-sum kernels
# after cuBLAS GEMMs for every linear layer, fp32 included
CUDA_NOEPI_BIN := $(filter %/test_cuda_ops %/test_cuda_train %/test_cuda_graph %/test_cuda_layouts,$(CUDA_EMU_BIN))
cuda-emu-noepi: $(CUDA_NOEPI_BIN)
	$(call run_cuda_suites,MINGPT_CUDA_EPILOGUES=off,$(CUDA_NOEPI_BIN),noepi)
cuda-emu-noblas: $(CUDA_NOBLAS_BIN)
	$(call run_cuda_suites,EMU_SCHEDULE=fwd,$(CUDA_NOBLAS_BIN),noblas)
cuda-emu-asan: $(CUDA_ASAN_BIN)
	$(call run_cuda_suites,$(CUDA_ASAN_ENV),$(CUDA_ASAN_BIN),asan)
cuda-negative: mingpt $(B)/cuda-tests/cuda_probe
	@bash tests/cuda/test_cuda_negative.sh $(B)/cuda-tests/cuda_probe
# launches, memsets and host copies of one tutorial-shaped training step; roofline.py's bytes
cuda-emu-counts: mingpt $(EMU_SO) data
	@bash tests/cuda/test_step_counts.sh ./mingpt $(EMU_SO)
# 2 and 3 MPI ranks (processes) on the emulated backend, its NCCL over MPI
cuda-emu-nccl: $(NCCL_EMU_BIN) $(EMU_SO) $(B)/libmingpt_mpi.so
	@env $(CUDA_TEST_ENV) bash tests/cuda/test_nccl_emu.sh $(NCCL_EMU_BIN) $(EMU_SO) $(B)/libmingpt_mpi.so

# ---------------------------------------------------------------- on a real GPU
# `make gpu-tests`: the op, training, layout and loss-scaler suites linked with the nvcc objects
# instead of the emulated ones, for a machine with a GPU (the cast suite counts emulated launches
# and stays emulated-only). Not part of `make test`: the CI machine has no GPU.
GPU_TESTS := test_cuda_ops test_cuda_train test_cuda_layouts test_loss_scaler test_cuda_graph
GPU_BIN   := $(GPU_TESTS:%=$(B)/gpu-tests/%)
$(B)/gpu-tests/%: tests/cuda/%.c $(CUDA_OBJ) $(B)/libmingpt.a tests/test_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(CUDA_OBJ) $(B)/libmingpt.a $(LDLIBS) $(CUDA_LDLIBS) -lcmocka
.PHONY: gpu-tests gpu-bench
gpu-tests: $(GPU_BIN)
# built (not run) by `make test` too, so a suite that only links against the emulator fails here
cuda-build-all: $(GPU_BIN)
# `make gpu-bench`: the tutorial config on the GPU, mingpt against PyTorch (tests/cuda/gpu_bench.sh)
gpu-bench: mingpt data
	bash tests/cuda/gpu_bench.sh
else  # CUDA=0: nothing CUDA is built or tested
.PHONY: cuda-test
EXTRA_TESTS += cuda-test
cuda-test:
	@echo "cuda: SKIP [no-nvcc] the CUDA backend's tests (CUDA=0 or no nvcc on PATH)"
	@[ -z "$${MINGPT_SKIP_LOG:-}" ] || printf 'no-nvcc\tcuda-test\tCUDA=0 or no nvcc on PATH\n' >> "$$MINGPT_SKIP_LOG"
endif
