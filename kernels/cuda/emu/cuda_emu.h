// kernels/cuda/emu/cuda_emu.h -- run CUDA C++ kernels and CUDA host code on the CPU, for
// correctness tests (mingpt's copy of the ../shared/cuda_emu prototype, owned here; see
// README.md beside it for what was trimmed and the dialect the kernels follow).
//
//   g++ -x c++ -std=c++17 -O2 -I$CUDA/include -include kernels/cuda/emu/cuda_emu.h file.cu ...
//   (-DEMU_USE_CBLAS: the cuBLAS shim multiplies with OpenBLAS's cblas_sgemm)
//
// Threads of a block are cooperative fibers (one stack each) scheduled on one OS thread, so
// __syncthreads() and warp collectives (__shfl_*_sync, __ballot_sync, ...) are real barriers.
// Deadlocks, barrier divergence, bad shuffle masks, bad launch configs, non-device pointer
// arguments, out-of-range cudaMemcpy / cuBLAS operands are reported with kernel/block/thread.
// Blocks run one after another (or on EMU_THREADS OpenMP threads when built with -fopenmp).
//
// Environment: EMU_THREADS=n  EMU_STACK_KB=k  EMU_SCHEDULE=fwd|rev|rand  EMU_SEED=s
//              EMU_DEFER=1 (queue stream work until a sync point)  EMU_LENIENT_EXIT=1
//              EMU_ALLOW_HOST_PTR=1  EMU_STATS=1  EMU_SM_COUNT=n (multiprocessors reported)
// Launches are counted per kernel name: emu_launch_count() (emu_counters.h, callable from C).
// Stream capture and CUDA graphs: a capturing stream records its work, and the calls CUDA
// refuses inside a capture (host synchronisations, allocations) fail as they do there.
#ifndef CUDA_EMU_H
#define CUDA_EMU_H 1

#if defined(__CUDACC__)
#  define LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#  define DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#else  // ======================= CPU emulation =======================

// ---- 1. execution-space keywords (must precede the CUDA headers, which keep our definitions)
#define __global__
#define __device__
#define __host__
#define __shared__ thread_local   // block scope thread_local implies static: one copy per OS thread = per running block
#define __constant__
#define __managed__
#define __grid_constant__
#define __launch_bounds__(...)

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#if __has_include(<cublas_v2.h>) && !defined(EMU_NO_CUBLAS)
#  include <cublas_v2.h>
#  define EMU_HAVE_CUBLAS 1
#endif
#if defined(EMU_USE_CBLAS)
#  include <cblas.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cuda/emu/emu_counters.h"
#if !defined(__x86_64__) || defined(EMU_UCONTEXT)
#  include <ucontext.h>
#  define EMU_USE_UCONTEXT 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#  define EMU_ASAN 1
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
extern "C" void __asan_unpoison_memory_region(void const volatile* addr, size_t size);
#endif

// The invoker calls `kernel(args...)` in every thread, so template arguments are deduced from the
// launch arguments exactly as with <<<>>>; the second lambda recovers the kernel's address when the
// name denotes one function (plain kernel or explicit specialization), for per-kernel attributes.
#define LAUNCH(kernel, ...)                                                                    \
  ::emu::make_launch([=](const auto&... a_) { kernel(a_...); },                               \
                     [=](const auto&... a_) -> decltype(::emu::kaddr(kernel, a_...)) {        \
                       return ::emu::kaddr(kernel, a_...); },                                 \
                     #kernel, __FILE__, __LINE__, __VA_ARGS__)
#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::emu::dyn_smem_storage)

// ---- 2. built-in variables (per OS thread; the scheduler rewrites threadIdx before resuming a fiber)
inline thread_local uint3 threadIdx = {0, 0, 0};
inline thread_local uint3 blockIdx = {0, 0, 0};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
static constexpr int warpSize = 32;

namespace emu {

#ifndef EMU_MAX_DYN_SMEM
#  define EMU_MAX_DYN_SMEM 232448  // sm_90 opt-in maximum (227 KiB)
#endif
// dynamic shared memory of the running block: DYNAMIC_SHARED(T, name) points name here
// (mingpt's dialect has no `extern __shared__`, which needed link-time aliasing)
alignas(256) inline thread_local unsigned char dyn_smem_storage[EMU_MAX_DYN_SMEM];

// ------------------------------------------------------------------ configuration / errors
struct Config {
  size_t stack_size = 128 * 1024;
  int threads = 1;
  int schedule = 0;  // 0 forward, 1 reverse, 2 random
  unsigned seed = 1;
  bool defer = false, lenient_exit = false, allow_host_ptr = false;
  int stats = 0;   // EMU_STATS: 1 totals at exit, 2 also the launches per kernel name
};
inline const char* env(const char* n) { const char* v = getenv(n); return (v && *v) ? v : nullptr; }
inline Config& cfg() {
  static Config c = [] {
    Config c;
#if EMU_ASAN
    c.stack_size = 512 * 1024;
#endif
    if (const char* v = env("EMU_STACK_KB")) c.stack_size = (size_t)atol(v) * 1024;
    if (const char* v = env("EMU_THREADS")) c.threads = std::max(1, atoi(v));
    if (const char* v = env("EMU_SCHEDULE")) c.schedule = !strcmp(v, "rev") ? 1 : !strcmp(v, "rand") ? 2 : 0;
    if (const char* v = env("EMU_SEED")) c.seed = (unsigned)atol(v);
    c.defer = env("EMU_DEFER") && atoi(env("EMU_DEFER"));
    c.lenient_exit = env("EMU_LENIENT_EXIT") && atoi(env("EMU_LENIENT_EXIT"));
    c.allow_host_ptr = env("EMU_ALLOW_HOST_PTR") && atoi(env("EMU_ALLOW_HOST_PTR"));
    c.stats = env("EMU_STATS") ? std::max(0, atoi(env("EMU_STATS"))) : 0;
    return c;
  }();
  return c;
}

struct LaunchInfo {
  const char* kernel; const char* file; int line;
  dim3 grid, block; size_t smem; cudaStream_t stream;
};
inline thread_local const LaunchInfo* tl_launch = nullptr;
inline thread_local bool tl_in_kernel = false;

[[noreturn]] inline void fatal(const char* fmt, ...) {
  fflush(stdout);
  fprintf(stderr, "[cuda-emu] ERROR: ");
  va_list ap; va_start(ap, fmt); vfprintf(stderr, fmt, ap); va_end(ap);
  fprintf(stderr, "\n");
  if (tl_launch && tl_in_kernel)
    fprintf(stderr, "[cuda-emu]   in kernel %s launched at %s:%d <<<(%u,%u,%u),(%u,%u,%u),%zu>>>, block (%u,%u,%u), thread (%u,%u,%u)\n",
            tl_launch->kernel, tl_launch->file, tl_launch->line, tl_launch->grid.x, tl_launch->grid.y, tl_launch->grid.z,
            tl_launch->block.x, tl_launch->block.y, tl_launch->block.z, tl_launch->smem,
            blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
  fflush(stderr);
  abort();
}

struct Stats { std::atomic<long> launches{0}, blocks{0}, threads{0}, switches{0}; };
// cudaMemset / cudaMemsetAsync calls (a kernel launch each on a real GPU; no kernel here), always counted
inline std::atomic<long>& memset_calls() { static std::atomic<long> n{0}; return n; }
// device-to-host copies (emu_d2h_count), always counted
inline std::atomic<long>& d2h_copies() { static std::atomic<long> n{0}; return n; }
// Host waits (emu_host_wait_count), always counted, as a GPU would make the host wait: every
// piece of stream work takes a sequence number when submitted (submitted()); a synchronisation
// waits (and counts) when work beyond what the last one waited for (synced()) is before it.
inline std::atomic<long>& submitted() { static std::atomic<long> n{0}; return n; }
inline std::atomic<long>& synced() { static std::atomic<long> n{0}; return n; }
inline std::atomic<long>& host_waits() { static std::atomic<long> n{0}; return n; }
// A host synchronisation with the work submitted up to `upto`: counted when that is more than
// the last one covered.
inline void host_wait_upto(long upto) {
  long cur = synced().load();
  while (upto > cur)
    if (synced().compare_exchange_weak(cur, upto)) { host_waits()++; return; }
}
inline void host_wait_all() { host_wait_upto(submitted().load()); }
inline Stats& stats() {
  static Stats s;
  static bool reg = [] { atexit([] { fprintf(stderr, "[cuda-emu] stats: %ld launches, %ld memsets, %ld device-to-host copies, %ld blocks, %ld threads, %ld fiber switches, %ld host waits\n",
                                             stats().launches.load(), memset_calls().load(), d2h_copies().load(), stats().blocks.load(), stats().threads.load(), stats().switches.load(),
                                             host_waits().load()); });
                         return true; }();
  (void)reg;
  return s;
}

// ------------------------------------------------------------------ context switching
#if !EMU_USE_UCONTEXT
// x86-64 SysV: save callee-saved registers + MXCSR/x87 CW on the current stack, swap stacks.
asm(R"(
  .pushsection .text.emu_switch_ctx,"axG",@progbits,emu_switch_ctx,comdat
  .globl emu_switch_ctx
  .type emu_switch_ctx,@function
  .p2align 4
emu_switch_ctx:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch_ctx,.-emu_switch_ctx
  .popsection
)");
extern "C" void emu_switch_ctx(void** save_sp, void* load_sp);
struct Ctx { void* sp = nullptr; };
inline void ctx_make(Ctx& c, char* lo, size_t size, void (*entry)(), uint64_t fpstate) {
  uint64_t* p = (uint64_t*)(((uintptr_t)(lo + size)) & ~(uintptr_t)15);
  *--p = 0;                   // fake return address of entry(): keeps the ABI stack alignment
  *--p = (uint64_t)entry;     // `ret` target
  for (int i = 0; i < 6; i++) *--p = 0;  // rbp rbx r12..r15
  *--p = fpstate;             // MXCSR | x87 control word << 32
  c.sp = p;
}
inline void ctx_switch(Ctx& from, Ctx& to) { emu_switch_ctx(&from.sp, to.sp); }
inline uint64_t fp_state() {
  uint32_t mx; uint16_t cw;
  asm volatile("stmxcsr %0" : "=m"(mx)); asm volatile("fnstcw %0" : "=m"(cw));
  return (uint64_t)mx | ((uint64_t)cw << 32);
}
#else
struct Ctx { ucontext_t uc; };
inline void ctx_make(Ctx& c, char* lo, size_t size, void (*entry)(), uint64_t) {
  getcontext(&c.uc); c.uc.uc_stack.ss_sp = lo; c.uc.uc_stack.ss_size = size; c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
inline void ctx_switch(Ctx& from, Ctx& to) { swapcontext(&from.uc, &to.uc); }
inline uint64_t fp_state() { return 0; }
#endif

// ------------------------------------------------------------------ fibers and the block scheduler
enum : uint8_t { F_READY, F_BAR, F_WARP, F_DONE };
enum WOp : uint8_t { W_IDX, W_UP, W_DOWN, W_XOR, W_BALLOT, W_ANY, W_ALL, W_SYNC, W_MATCH, W_RADD, W_RMIN, W_RMAX, W_RAND, W_ROR, W_RXOR, W_WMMA, W_WMMA_X };
inline const char* wop_name(int op) {
  static const char* n[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
                            "__any_sync", "__all_sync", "__syncwarp", "__match_any_sync", "__reduce_add_sync",
                            "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync",
                            "nvcuda::wmma call", "nvcuda::wmma::mma_sync"};
  return n[op];
}

struct Fiber {
  Ctx ctx;
  char* stack = nullptr;
  uint3 tid;
  unsigned lane = 0, warp = 0;
  uint8_t state = F_DONE, wop = 0;
  unsigned wmask = 0; int warg = 0, wwidth = 32;
  uint64_t wval = 0, wres = 0;
  const char* file = ""; int line = 0;   // where the fiber is waiting
  int bar_pred = 0, bar_res = 0;
#if EMU_ASAN
  void* fake_stack = nullptr;
#endif
};

struct Runner {  // one per OS thread that executes blocks
  std::vector<Fiber> f;
  char* stacks = nullptr; size_t nstack = 0, stride = 0;
  Ctx sched;
  int n = 0, nwarps = 0, done = 0, cur = -1, pos = 0;
  int bar_arrived = 0, bar_acc = 0, bar_kind = 0;
  uint32_t warp_arrived[32], warp_done[32], warp_exist[32];
  void (*invoke)(const void*) = nullptr; const void* closure = nullptr;
  std::vector<int> order;
  long switches = 0;
#if EMU_ASAN
  const void* sched_bottom = nullptr; size_t sched_size = 0;
#endif
  // ASan keeps the shadow of an unmapped range: frames of fibers that exited mid-call are still
  // poisoned there, and a later mmap of the same addresses (a library's buffer, an MPI
  // shared-memory segment) would then read as a stack redzone. Clear it before unmapping.
  void release_stacks() {
#if EMU_ASAN
    __asan_unpoison_memory_region(stacks, nstack * stride);
#endif
    munmap(stacks, nstack * stride);
    stacks = nullptr; nstack = 0;
  }
  void prepare(const dim3& b) {
    int nt = (int)(b.x * b.y * b.z);
    size_t ss = cfg().stack_size, page = (size_t)sysconf(_SC_PAGESIZE);
    if ((size_t)nt > nstack) {  // stacks are reused across blocks and launches; one guard page each
      if (stacks) release_stacks();
      stride = ((ss + page - 1) / page + 1) * page;
      stacks = (char*)mmap(nullptr, nt * stride, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (stacks == MAP_FAILED) fatal("cannot mmap %d fiber stacks", nt);
      for (int i = 0; i < nt; i++) mprotect(stacks + i * stride, page, PROT_NONE);
      nstack = nt;
    }
    f.resize(nt);
    n = nt; nwarps = (nt + 31) / 32;
    for (int i = 0; i < nt; i++) {
      Fiber& F = f[i];
      F.stack = stacks + i * stride + page;
      F.tid = make_uint3(i % b.x, (i / b.x) % b.y, i / (b.x * b.y));
      F.lane = i & 31; F.warp = i >> 5;
    }
    for (int w = 0; w < nwarps; w++) {
      int lanes = std::min(32, nt - w * 32);
      warp_exist[w] = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    }
  }
};
inline thread_local Runner* tl_runner = nullptr;
inline Runner& runner() { if (!tl_runner) tl_runner = new Runner(); return *tl_runner; }

inline void yield_to_sched(Runner& R, Fiber& F, bool exiting = false) {
#if EMU_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &F.fake_stack, R.sched_bottom, R.sched_size);
#else
  (void)exiting;
#endif
  ctx_switch(F.ctx, R.sched);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(F.fake_stack, nullptr, nullptr);
#endif
}
// next READY fiber in schedule order after the current position (round robin), or -1
inline int next_ready(Runner& R) {
  for (int k = 1; k <= R.n; k++) {
    int p = R.pos + k; if (p >= R.n) p -= R.n;
    int i = R.order[p];
    if (R.f[i].state == F_READY) { R.pos = p; return i; }
  }
  return -1;
}
// the current fiber blocks (or exits): hand over directly to the next runnable fiber; only when
// none is runnable does control return to the scheduler (block finished, or deadlock)
inline void block_and_switch(Runner& R, Fiber& F, bool exiting = false) {
  int i = next_ready(R);
  if (i < 0) { yield_to_sched(R, F, exiting); return; }
  Fiber& G = R.f[i];
  R.cur = i; threadIdx = G.tid; R.switches++;
#if EMU_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &F.fake_stack, G.stack, cfg().stack_size);
#endif
  ctx_switch(F.ctx, G.ctx);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(F.fake_stack, nullptr, nullptr);
#endif
}

inline void on_fiber_exit(Runner& R, Fiber& F);
inline void fiber_entry() {
  Runner& R = *tl_runner;
#if EMU_ASAN
  if (!R.sched_bottom) __sanitizer_finish_switch_fiber(nullptr, &R.sched_bottom, &R.sched_size);  // first fiber: entered from the scheduler
  else __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  R.invoke(R.closure);
  Fiber& F = R.f[R.cur];
  on_fiber_exit(R, F);
  block_and_switch(R, F, true);
  fatal("internal: finished fiber resumed");
}

inline void release_barrier(Runner& R) {
  // all arrivals must come from the same __syncthreads() (divergent barriers are UB in CUDA)
  const char* file = nullptr; int line = 0;
  for (int i = 0; i < R.n; i++) {
    Fiber& G = R.f[i];
    if (G.state == F_DONE) continue;
    if (!file) { file = G.file; line = G.line; }
    else if (G.line != line || (G.file != file && strcmp(G.file, file) != 0))
      fatal("barrier divergence: threads of block (%u,%u,%u) met at different __syncthreads(): %s:%d (thread %u,%u,%u) and %s:%d",
            blockIdx.x, blockIdx.y, blockIdx.z, G.file, G.line, G.tid.x, G.tid.y, G.tid.z, file, line);
  }
  int res = R.bar_kind == 1 ? R.bar_acc : R.bar_kind == 2 ? (R.bar_acc == R.bar_arrived) : R.bar_kind == 3 ? (R.bar_acc > 0) : 0;
  for (int i = 0; i < R.n; i++) {
    Fiber& G = R.f[i];
    if (G.state == F_BAR) G.state = F_READY;
    G.bar_res = res;
  }
  R.bar_arrived = 0; R.bar_acc = 0;
}

inline int block_barrier(int kind, int pred, const char* file, int line) {
  Runner* Rp = tl_runner;
  if (!Rp || !tl_in_kernel) fatal("__syncthreads() called outside a kernel (%s:%d)", file, line);
  Runner& R = *Rp; Fiber& F = R.f[R.cur];
  F.file = file; F.line = line;
  if (R.bar_arrived == 0) R.bar_kind = kind;
  else if (R.bar_kind != kind) fatal("barrier divergence: different __syncthreads variants at %s:%d", file, line);
  R.bar_arrived++; R.bar_acc += (pred != 0);
  int target = cfg().lenient_exit ? R.n - R.done : R.n;
  if (R.bar_arrived == target) { release_barrier(R); return F.bar_res; }  // last arriver continues
  F.state = F_BAR;
  block_and_switch(R, F);
  return F.bar_res;
}

inline bool ptx_src_lane(int op, unsigned lane, int b, int width, unsigned& j) {
  // PTX shfl.sync semantics, c = ((32-width)<<8) | clamp
  unsigned segmask = (unsigned)(32 - width) & 31, cval = op == W_UP ? 0 : 31;
  unsigned maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask;
  int jj; bool p;
  switch (op) {
    case W_UP:   jj = (int)lane - b; p = jj >= (int)maxLane; break;
    case W_DOWN: jj = (int)lane + b; p = jj <= (int)maxLane; break;
    case W_XOR:  jj = (int)(lane ^ (unsigned)(b & 31)); p = jj <= (int)maxLane; break;
    default:     jj = (int)(minLane | ((unsigned)b & 31 & ~segmask)); p = jj <= (int)maxLane; break;
  }
  j = p ? (unsigned)jj : lane;
  return p;
}

inline void complete_warp(Runner& R, unsigned w, unsigned mask) {
  Fiber* L = &R.f[w * 32];
  int first = __builtin_ctz(mask);
  int op = L[first].wop;
  for (unsigned m = mask; m; m &= m - 1) {
    Fiber& G = L[__builtin_ctz(m)];
    if (G.wop != op || G.wmask != mask)
      fatal("warp %u of block (%u,%u,%u): mismatched warp collectives: lane %d: %s(mask 0x%08x) at %s:%d vs lane %u: %s(mask 0x%08x) at %s:%d",
            w, blockIdx.x, blockIdx.y, blockIdx.z, first, wop_name(op), mask, L[first].file, L[first].line,
            G.lane, wop_name(G.wop), G.wmask, G.file, G.line);
    // wmma calls (wmma_emu.h): one call site for the whole warp; W_WMMA also one argument value
    if ((op == W_WMMA || op == W_WMMA_X) &&
        (G.line != L[first].line || strcmp(G.file, L[first].file) != 0 || G.warg != L[first].warg))
      fatal("warp %u of block (%u,%u,%u): divergent nvcuda::wmma calls: lane %d at %s:%d, lane %u at %s:%d",
            w, blockIdx.x, blockIdx.y, blockIdx.z, first, L[first].file, L[first].line, G.lane, G.file, G.line);
    if (op == W_WMMA && G.wval != L[first].wval)
      fatal("warp %u of block (%u,%u,%u): nvcuda::wmma call at %s:%d with non-uniform arguments (lanes %d and %u differ in "
            "pointer, ldm, layout or fill value)", w, blockIdx.x, blockIdx.y, blockIdx.z, G.file, G.line, first, G.lane);
  }
  uint64_t agg = 0; unsigned bal = 0;
  switch (op) {
    case W_BALLOT: case W_ANY: case W_ALL:
      for (unsigned m = mask; m; m &= m - 1) { int l = __builtin_ctz(m); if (L[l].wval) bal |= 1u << l; }
      agg = op == W_BALLOT ? bal : op == W_ANY ? (bal != 0) : (bal == mask);
      break;
    case W_RADD: case W_RMIN: case W_RMAX: case W_RAND: case W_ROR: case W_RXOR: {
      bool sgn = L[first].warg != 0;  // signed int variant for min/max
      uint64_t a = L[first].wval;
      for (unsigned m = mask & (mask - 1); m; m &= m - 1) {
        uint32_t x = (uint32_t)L[__builtin_ctz(m)].wval, y = (uint32_t)a;
        switch (op) {
          case W_RADD: a = (uint32_t)(x + y); break;
          case W_RMIN: a = sgn ? (uint32_t)std::min((int32_t)x, (int32_t)y) : std::min(x, y); break;
          case W_RMAX: a = sgn ? (uint32_t)std::max((int32_t)x, (int32_t)y) : std::max(x, y); break;
          case W_RAND: a = x & y; break;
          case W_ROR: a = x | y; break;
          default: a = x ^ y; break;
        }
      }
      agg = a;
      break;
    }
    default: break;
  }
  for (unsigned m = mask; m; m &= m - 1) {
    int l = __builtin_ctz(m);
    Fiber& G = L[l];
    switch (op) {
      case W_IDX: case W_UP: case W_DOWN: case W_XOR: {
        int width = G.wwidth;
        if (width < 1 || width > 32 || (width & (width - 1)))
          fatal("%s at %s:%d: width %d is not a power of two in [1,32]", wop_name(op), G.file, G.line, width);
        unsigned j;
        ptx_src_lane(op, (unsigned)l, G.warg, width, j);
        // reading from a lane that is not in the mask is undefined: poison the result so bugs show
        G.wres = (mask >> j & 1) ? L[j].wval : ~(uint64_t)0;
        break;
      }
      case W_MATCH: {
        unsigned r = 0;
        for (unsigned m2 = mask; m2; m2 &= m2 - 1) { int l2 = __builtin_ctz(m2); if (L[l2].wval == G.wval) r |= 1u << l2; }
        G.wres = r;
        break;
      }
      default: G.wres = agg; break;
    }
    if (G.state == F_WARP) G.state = F_READY;
  }
  R.warp_arrived[w] &= ~mask;
}

inline uint64_t warp_op(int op, unsigned mask, uint64_t val, int arg, int width, const char* file, int line) {
  Runner* Rp = tl_runner;
  if (!Rp || !tl_in_kernel) fatal("%s called outside a kernel (%s:%d)", wop_name(op), file, line);
  Runner& R = *Rp; Fiber& F = R.f[R.cur];
  unsigned w = F.warp, lane = F.lane;
  if (!(mask >> lane & 1)) fatal("%s at %s:%d: calling lane %u is not in mask 0x%08x", wop_name(op), file, line, lane, mask);
  if (mask & ~R.warp_exist[w])
    fatal("%s at %s:%d: mask 0x%08x names lanes that do not exist (warp %u has lanes 0x%08x; blockDim=%u)",
          wop_name(op), file, line, mask, w, R.warp_exist[w], blockDim.x * blockDim.y * blockDim.z);
  if (mask & R.warp_done[w])
    fatal("%s at %s:%d: mask 0x%08x names lanes that already exited (0x%08x)", wop_name(op), file, line, mask, mask & R.warp_done[w]);
  F.wop = (uint8_t)op; F.wmask = mask; F.wval = val; F.warg = arg; F.wwidth = width; F.file = file; F.line = line;
  R.warp_arrived[w] |= 1u << lane;
  if ((R.warp_arrived[w] & mask) == mask) { complete_warp(R, w, mask); return F.wres; }
  F.state = F_WARP;
  block_and_switch(R, F);
  return F.wres;
}

inline void on_fiber_exit(Runner& R, Fiber& F) {
  F.state = F_DONE; R.done++;
  R.warp_done[F.warp] |= 1u << F.lane;
  // a lane waiting for this one in a warp collective can never complete
  Fiber* L = &R.f[F.warp * 32];
  for (unsigned m = R.warp_arrived[F.warp]; m; m &= m - 1) {
    Fiber& G = L[__builtin_ctz(m)];
    if (G.state == F_WARP && (G.wmask >> F.lane & 1))
      fatal("lane %u exited while lane %u waits for it in %s(mask 0x%08x) at %s:%d", F.lane, G.lane, wop_name(G.wop), G.wmask, G.file, G.line);
  }
  if (cfg().lenient_exit && R.bar_arrived > 0 && R.bar_arrived == R.n - R.done) release_barrier(R);
}

[[noreturn]] inline void report_deadlock(Runner& R) {
  fprintf(stderr, "[cuda-emu] ERROR: deadlock / barrier divergence in block (%u,%u,%u) of %s: no thread can make progress\n",
          blockIdx.x, blockIdx.y, blockIdx.z, tl_launch ? tl_launch->kernel : "?");
  int i = 0;
  while (i < R.n) {  // print runs of threads in the same state
    Fiber& G = R.f[i];
    int j = i + 1;
    while (j < R.n && R.f[j].state == G.state && R.f[j].line == G.line && R.f[j].file == G.file &&
           (G.state != F_WARP || (R.f[j].wop == G.wop && R.f[j].wmask == G.wmask))) j++;
    if (G.state == F_DONE) fprintf(stderr, "  threads %d..%d: exited\n", i, j - 1);
    else if (G.state == F_BAR) fprintf(stderr, "  threads %d..%d: waiting in __syncthreads() at %s:%d\n", i, j - 1, G.file, G.line);
    else fprintf(stderr, "  threads %d..%d: waiting in %s(mask 0x%08x) at %s:%d\n", i, j - 1, wop_name(G.wop), G.wmask, G.file, G.line);
    i = j;
  }
  if (R.bar_arrived && R.done) fprintf(stderr, "  (some threads exited before a __syncthreads() the others wait in; set EMU_LENIENT_EXIT=1 to count exited threads as arrived)\n");
  tl_in_kernel = false;
  fatal("kernel %s aborted", tl_launch ? tl_launch->kernel : "?");
}

inline void run_block(Runner& R, uint3 bid, size_t smem) {
  blockIdx = bid;
  uint64_t fp = fp_state();
  for (int i = 0; i < R.n; i++) {
    Fiber& F = R.f[i];
    F.state = F_READY; F.file = ""; F.line = 0;
#if EMU_ASAN  // frames that were live when the fiber last exited are still poisoned: clear the stack top
    size_t top = std::min(cfg().stack_size, (size_t)32768);
    __asan_unpoison_memory_region(F.stack + cfg().stack_size - top, top);
#endif
    ctx_make(F.ctx, F.stack, cfg().stack_size, fiber_entry, fp);
  }
  R.done = 0; R.bar_arrived = 0; R.bar_acc = 0;
  memset(R.warp_arrived, 0, sizeof R.warp_arrived);
  memset(R.warp_done, 0, sizeof R.warp_done);
  if (smem) memset(dyn_smem_storage, 0xff, smem);  // uninitialised shared memory reads as NaN / -1
  R.order.resize(R.n);
  for (int i = 0; i < R.n; i++) R.order[i] = cfg().schedule == 1 ? R.n - 1 - i : i;
  if (cfg().schedule == 2) {
    std::mt19937 g(cfg().seed * 2654435761u + bid.x * 97u + bid.y * 31u + bid.z);
    std::shuffle(R.order.begin(), R.order.end(), g);
  }
  R.pos = R.n - 1;
  int i = next_ready(R);
  Fiber& F = R.f[i];
  R.cur = i; threadIdx = F.tid; R.switches++;
#if EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, F.stack, cfg().stack_size);
#endif
  ctx_switch(R.sched, F.ctx);  // returns when no fiber is runnable any more
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  if (R.done < R.n) report_deadlock(R);
  R.cur = -1;
}

// SIGSEGV/SIGBUS inside a kernel: print which thread faulted (like compute-sanitizer's "invalid address")
inline void segv_handler(int sig, siginfo_t* si, void*) {
  char buf[512];
  Runner* R = tl_runner;
  bool guard = false;
  if (R && R->stacks && (char*)si->si_addr >= R->stacks && (char*)si->si_addr < R->stacks + R->nstack * R->stride)
    guard = ((size_t)((char*)si->si_addr - R->stacks) % R->stride) < (size_t)sysconf(_SC_PAGESIZE);
  if (tl_in_kernel && tl_launch) {
    int len = snprintf(buf, sizeof buf, "[cuda-emu] %s at address %p in kernel %s (%s:%d), block (%u,%u,%u), thread (%u,%u,%u)%s\n",
                       sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", si->si_addr, tl_launch->kernel, tl_launch->file, tl_launch->line,
                       blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z,
                       guard ? " -- fiber stack overflow, raise EMU_STACK_KB" : "");
    if (len > 0) { ssize_t r = write(2, buf, (size_t)std::min(len, (int)sizeof buf)); (void)r; }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}
#if EMU_ASAN
extern "C" void __sanitizer_set_death_callback(void (*)(void));
inline void asan_death() {  // add the CUDA coordinates to AddressSanitizer reports
  if (tl_in_kernel && tl_launch)
    fprintf(stderr, "[cuda-emu] the report above happened in kernel %s (%s:%d), block (%u,%u,%u), thread (%u,%u,%u)\n", tl_launch->kernel,
            tl_launch->file, tl_launch->line, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
}
#endif
inline void install_signal_handlers() {
#if EMU_ASAN
  static std::atomic<bool> cb{false};
  if (!cb.exchange(true)) __sanitizer_set_death_callback(asan_death);
#else
  static thread_local bool done = false;
  if (done) return;
  done = true;
  static thread_local std::vector<char> alt(64 * 1024);
  stack_t ss{}; ss.ss_sp = alt.data(); ss.ss_size = alt.size(); sigaltstack(&ss, nullptr);
  static std::atomic<bool> installed{false};
  if (!installed.exchange(true)) {
    struct sigaction sa{}; sa.sa_sigaction = segv_handler; sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr); sigaction(SIGBUS, &sa, nullptr);
  }
#endif
}

// ------------------------------------------------------------------ memory registry
enum MemKind { M_DEVICE, M_PINNED, M_MANAGED };
struct Alloc { size_t size; int kind; int device; };
struct Registry { std::mutex m; std::map<uintptr_t, Alloc> a; size_t bytes = 0; };
inline Registry& registry() { static Registry r; return r; }
// allocation containing [p, p+n) (n==0: p may equal the end); nullptr if none
inline const Alloc* find_alloc(const void* p, size_t n, uintptr_t* base = nullptr) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.m);
  uintptr_t x = (uintptr_t)p;
  auto it = r.a.upper_bound(x);
  if (it == r.a.begin()) return nullptr;
  --it;
  if (x < it->first || x + n > it->first + it->second.size) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}
inline bool is_dev(const void* p, size_t n) { return find_alloc(p, n) != nullptr; }

thread_local inline cudaError_t last_error = cudaSuccess;
inline cudaError_t set_error(cudaError_t e) { if (e != cudaSuccess) last_error = e; return e; }

// ------------------------------------------------------------------ streams: immediate or deferred (EMU_DEFER=1)
struct DevQueue { std::mutex m; std::vector<std::function<void()>> q; };
inline thread_local int tl_device = 0;
inline DevQueue& devq(int d) { static DevQueue qs[16]; return qs[d & 15]; }
inline void flush(int d = -1) {
  DevQueue& Q = devq(d < 0 ? tl_device : d);
  for (;;) {
    std::vector<std::function<void()>> work;
    { std::lock_guard<std::mutex> g(Q.m); work.swap(Q.q); }
    if (work.empty()) return;
    for (auto& w : work) w();
  }
}
inline void submit(std::function<void()> fn) {
  submitted()++;
  if (!cfg().defer) { fn(); return; }
  DevQueue& Q = devq(tl_device);
  std::lock_guard<std::mutex> g(Q.m);
  Q.q.push_back(std::move(fn));
}

// ------------------------------------------------------------------ launch counts (emu_counters.h)
// LAUNCH's kernel text without parentheses and template arguments: "(round_kernel<__half>)" -> "round_kernel".
inline std::string kernel_base_name(const char* s) {
  while (*s == '(' || *s == ' ') s++;
  size_t n = strcspn(s, "<) ");
  return std::string(s, n);
}
struct LaunchCounts { std::mutex m; std::map<std::string, long> by_name; long total = 0; };
inline LaunchCounts& launch_counts() {
  static LaunchCounts c;
  // EMU_STATS=2: the launches per kernel name at exit, most first (after the totals line)
  static bool reg = [] {
    if (cfg().stats >= 2)
      atexit([] {
        LaunchCounts& L = launch_counts();
        std::lock_guard<std::mutex> g(L.m);
        std::vector<std::pair<long, std::string>> v;
        for (auto& kv : L.by_name) v.push_back({kv.second, kv.first});
        std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
        for (auto& e : v) fprintf(stderr, "[cuda-emu] %8ld  %s\n", e.first, e.second.c_str());
      });
    return true;
  }();
  (void)reg;
  return c;
}
inline void count_launch(const char* kernel) {
  std::string k = kernel_base_name(kernel);
  LaunchCounts& c = launch_counts();
  std::lock_guard<std::mutex> g(c.m);
  c.by_name[k]++;
  c.total++;
}

// ------------------------------------------------------------------ stream capture (CUDA graphs)
// cudaStreamBeginCapture(s) turns s into a recorder: kernel launches, cudaMemsetAsync,
// cudaMemcpyAsync and cuBLAS calls enqueued on s become nodes of the capture (nothing runs);
// cudaStreamEndCapture hands them over as a graph, cudaGraphLaunch submits them in order (a
// linear graph: the emulator has one FIFO per device anyway). Calls that CUDA refuses during a
// capture return its error and invalidate the capture, so the emulator shows a host
// synchronisation inside a captured region: see capture_unsafe / capture_implicit below.
struct Node { std::function<void()> fn; std::string kernel; int kind; };  // kind: NODE_*
enum { NODE_OTHER = 0, NODE_KERNEL = 1, NODE_MEMSET = 2 };
inline thread_local const char tl_thread_tag = 0;  // its address names the host thread
struct Capture { int mode; const void* thread; bool invalidated; std::vector<Node> nodes; };
struct Captures { std::mutex m; std::map<const void*, Capture> by_stream; std::atomic<int> active{0}; };
inline Captures& captures() { static Captures c; return c; }
// 1 when stream s is capturing (invalidated or not)
inline bool is_capturing(cudaStream_t s) {
  Captures& C = captures();
  if (C.active.load() == 0) return false;
  std::lock_guard<std::mutex> g(C.m);
  return C.by_stream.count((const void*)s) != 0;
}
// Enqueue fn on stream s: recorded when s is capturing (cudaErrorStreamCaptureInvalidated, not
// recorded, when that capture was invalidated), else counted (kernels, memsets) and submitted.
inline cudaError_t submit_on(cudaStream_t s, std::function<void()> fn, const char* kernel = nullptr, int kind = NODE_OTHER) {
  Captures& C = captures();
  if (C.active.load() != 0) {
    std::lock_guard<std::mutex> g(C.m);
    auto it = C.by_stream.find((const void*)s);
    if (it != C.by_stream.end()) {
      if (it->second.invalidated) return cudaErrorStreamCaptureInvalidated;
      it->second.nodes.push_back(Node{std::move(fn), kernel ? kernel : "", kind});
      return cudaSuccess;
    }
  }
  if (kind == NODE_KERNEL) count_launch(kernel);
  else if (kind == NODE_MEMSET) memset_calls()++;
  submit(std::move(fn));
  return cudaSuccess;
}
// A "potentially unsafe" call (cudaMalloc, cudaFree, cudaMallocHost, cudaDeviceSynchronize, ...)
// while captures are active: every capture in cudaStreamCaptureModeGlobal, and in
// ThreadLocal mode those begun by this thread, are invalidated and the call fails with
// cudaErrorStreamCaptureUnsupported; Relaxed captures allow it. cudaSuccess: the call may go on.
inline cudaError_t capture_unsafe(const char* fn) {
  Captures& C = captures();
  if (C.active.load() == 0) return cudaSuccess;
  std::lock_guard<std::mutex> g(C.m);
  bool hit = false;
  for (auto& kv : C.by_stream) {
    Capture& c = kv.second;
    if (c.mode == cudaStreamCaptureModeRelaxed || (c.mode == cudaStreamCaptureModeThreadLocal && c.thread != &tl_thread_tag)) continue;
    c.invalidated = hit = true;
  }
  if (!hit) return cudaSuccess;
  fprintf(stderr, "[cuda-emu] %s during stream capture: cudaErrorStreamCaptureUnsupported (the capture is invalidated)\n", fn);
  return set_error(cudaErrorStreamCaptureUnsupported);
}
// A synchronous call on the legacy default stream (cudaMemcpy, cudaMemset, ...) while a
// stream is capturing: the legacy stream would wait for the capturing (blocking) streams, so
// CUDA refuses it with cudaErrorStreamCaptureImplicit and invalidates those captures, whatever
// their mode. `stream` (cudaStreamSynchronize, cudaStreamQuery): the same for that stream if it
// is capturing, with cudaErrorStreamCaptureUnsupported.
inline cudaError_t capture_implicit(const char* fn, cudaStream_t stream = nullptr, bool legacy = true) {
  Captures& C = captures();
  if (C.active.load() == 0) return cudaSuccess;
  std::lock_guard<std::mutex> g(C.m);
  if (!legacy) {
    auto it = C.by_stream.find((const void*)stream);
    if (it == C.by_stream.end()) return cudaSuccess;
    it->second.invalidated = true;
    fprintf(stderr, "[cuda-emu] %s on a capturing stream: cudaErrorStreamCaptureUnsupported (the capture is invalidated)\n", fn);
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (C.by_stream.empty()) return cudaSuccess;
  for (auto& kv : C.by_stream) kv.second.invalidated = true;
  fprintf(stderr, "[cuda-emu] %s (legacy default stream) while a stream is capturing: cudaErrorStreamCaptureImplicit "
          "(the capture is invalidated)\n", fn);
  return set_error(cudaErrorStreamCaptureImplicit);
}
// cudaStreamLegacy (0 or 0x1) and cudaStreamPerThread (0x2) are not streams that can capture
inline bool special_stream(cudaStream_t s) { return (uintptr_t)s <= 2; }

// ------------------------------------------------------------------ kernel launch
inline std::map<const void*, int>& func_max_dyn_smem() { static std::map<const void*, int> m; return m; }

inline void run_grid(const LaunchInfo& L, void (*invoke)(const void*), const void* closure) {
  long nb = (long)L.grid.x * L.grid.y * L.grid.z;
  auto body = [&](long bi) {
    Runner& R = runner();
    install_signal_handlers();
    if (R.n != (int)(L.block.x * L.block.y * L.block.z) || blockDim.x != L.block.x || blockDim.y != L.block.y || blockDim.z != L.block.z)
      R.prepare(L.block);
    blockDim = L.block; gridDim = L.grid;
    R.invoke = invoke; R.closure = closure;
    tl_launch = &L; tl_in_kernel = true;
    uint3 bid = make_uint3((unsigned)(bi % L.grid.x), (unsigned)((bi / L.grid.x) % L.grid.y), (unsigned)(bi / ((long)L.grid.x * L.grid.y)));
    long s0 = R.switches;
    run_block(R, bid, L.smem);
    tl_in_kernel = false;
    if (cfg().stats) stats().switches += R.switches - s0;
  };
#ifdef _OPENMP
  if (cfg().threads > 1 && nb > 1) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(cfg().threads)
    for (long bi = 0; bi < nb; bi++) body(bi);
  } else
#endif
    for (long bi = 0; bi < nb; bi++) body(bi);
  if (cfg().stats) { stats().launches++; stats().blocks += nb; stats().threads += nb * L.block.x * L.block.y * L.block.z; }
}

template <class T> struct ident { using type = T; };
template <class... P> const void* kaddr(void (*f)(P...), const typename ident<P>::type&...) { return (const void*)f; }
inline int max_attr_smem() { int m = -1; for (auto& kv : func_max_dyn_smem()) m = std::max(m, kv.second); return m; }

template <class Inv, class Tup> struct Closure { Inv inv; Tup args; };
template <class Inv, class Tup> void invoke_closure(const void* c) {
  auto* cl = static_cast<const Closure<Inv, Tup>*>(c);
  std::apply(cl->inv, cl->args);  // by-value kernel parameters: every thread gets its own copy
}

template <class T> void check_arg(const LaunchInfo& L, int idx, const T& v) {
  if constexpr (std::is_pointer_v<T>) {
    if (v == nullptr || cfg().allow_host_ptr) return;
    uintptr_t base;
    const Alloc* a = find_alloc((const void*)v, 0, &base);
    if (!a)
      fatal("kernel %s launched at %s:%d: argument %d (%p) does not point into device memory "
            "(cudaMalloc/cudaMallocManaged/cudaMallocHost); on a GPU this is an illegal address",
            L.kernel, L.file, L.line, idx, (const void*)v);
  } else { (void)L; (void)idx; (void)v; }
}

template <class Inv, class Addr> struct Launch {
  Inv inv; Addr addr; LaunchInfo L;
  template <class... A> void operator()(A&&... a) const {
    using Tup = std::tuple<std::decay_t<A>...>;
    static_assert(std::is_invocable_v<const Inv&, const std::decay_t<A>&...>,
                  "kernel cannot be called with these arguments (note: pass nullptr, not NULL, for pointer arguments)");
    const dim3 &g = L.grid, &b = L.block;
    unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    if (g.x == 0 || g.y == 0 || g.z == 0 || nt == 0 || nt > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 ||
        g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
      fprintf(stderr, "[cuda-emu] launch of %s at %s:%d: invalid configuration grid (%u,%u,%u) block (%u,%u,%u)\n",
              L.kernel, L.file, L.line, g.x, g.y, g.z, b.x, b.y, b.z);
      set_error(cudaErrorInvalidConfiguration);
      return;
    }
    auto cl = std::make_shared<Closure<Inv, Tup>>(Closure<Inv, Tup>{inv, Tup(std::forward<A>(a)...)});
    // dynamic shared memory above 48 KiB needs cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize)
    int maxdyn = 48 * 1024;
    const void* ka = nullptr;
    if constexpr (std::is_invocable_v<const Addr&, const std::decay_t<A>&...>) ka = std::apply(addr, cl->args);
    if (ka) { auto& m = func_max_dyn_smem(); auto it = m.find(ka); if (it != m.end()) maxdyn = it->second; }
    else maxdyn = std::max(maxdyn, max_attr_smem());  // kernel deduced from the arguments: address unknown
    if (L.smem > (size_t)maxdyn) {
      fprintf(stderr, "[cuda-emu] launch of %s at %s:%d: %zu bytes dynamic shared memory > %d allowed "
              "(use cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, n))\n", L.kernel, L.file, L.line, L.smem, maxdyn);
      set_error(cudaErrorInvalidValue);
      return;
    }
    std::apply([&](const auto&... x) { int i = 0; (check_arg(L, i++, x), ...); }, cl->args);
    LaunchInfo info = L;
    set_error(submit_on(L.stream, [cl, info] { run_grid(info, &invoke_closure<Inv, Tup>, cl.get()); }, L.kernel, NODE_KERNEL));
  }
};
template <class Inv, class Addr>
Launch<Inv, Addr> make_launch(Inv inv, Addr addr, const char* name, const char* file, int line, dim3 g, dim3 b, size_t smem = 0, cudaStream_t st = 0) {
  return Launch<Inv, Addr>{inv, addr, LaunchInfo{name, file, line, g, b, smem, st}};
}

template <class T> inline uint64_t to_bits(const T& v) {
  static_assert(sizeof(T) <= 8, "warp shuffle of a type larger than 8 bytes");
  uint64_t u = 0; memcpy(&u, (const void*)&v, sizeof(T)); return u;
}
template <class T> inline T from_bits(uint64_t u) { T v; memcpy((void*)&v, &u, sizeof(T)); return v; }

template <class T> struct atomic_uint { using type = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>; };
template <class T, class F> inline T atomic_rmw(T* addr, F f) {  // CAS loop on the bit pattern
  using U = typename atomic_uint<T>::type;
  U* p = reinterpret_cast<U*>(addr);
  U old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
  T ov;
  do { memcpy((void*)&ov, &old, sizeof(T)); T nv = f(ov); memcpy(&nw, (const void*)&nv, sizeof(T)); }
  while (!__atomic_compare_exchange_n(p, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  return ov;
}
}  // namespace emu

// emitted in every object that includes this header (used), one copy kept by the linker
extern "C" __attribute__((used)) inline long emu_launch_count(const char* kernel) {
  emu::LaunchCounts& c = emu::launch_counts();
  std::lock_guard<std::mutex> g(c.m);
  if (!kernel) return c.total;
  auto it = c.by_name.find(kernel);
  return it == c.by_name.end() ? 0 : it->second;
}

extern "C" __attribute__((used)) inline long emu_memset_count(void) { return emu::memset_calls().load(); }
extern "C" __attribute__((used)) inline long emu_d2h_count(void) { return emu::d2h_copies().load(); }
extern "C" __attribute__((used)) inline long emu_host_wait_count(void) { return emu::host_waits().load(); }

// ------------------------------------------------------------------ 3. device intrinsics
#define EMU_LOC const char* _file = __builtin_FILE(), int _line = __builtin_LINE()
inline void __syncthreads(EMU_LOC) { emu::block_barrier(0, 0, _file, _line); }
inline int __syncthreads_count(int p, EMU_LOC) { return emu::block_barrier(1, p, _file, _line); }
inline int __syncthreads_and(int p, EMU_LOC) { return emu::block_barrier(2, p, _file, _line); }
inline int __syncthreads_or(int p, EMU_LOC) { return emu::block_barrier(3, p, _file, _line); }
inline void __syncwarp(unsigned mask = 0xffffffffu, EMU_LOC) { emu::warp_op(emu::W_SYNC, mask, 0, 0, 32, _file, _line); }
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = warpSize, EMU_LOC) {
  return emu::from_bits<T>(emu::warp_op(emu::W_IDX, mask, emu::to_bits(v), src, width, _file, _line)); }
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = warpSize, EMU_LOC) {
  return emu::from_bits<T>(emu::warp_op(emu::W_UP, mask, emu::to_bits(v), (int)d, width, _file, _line)); }
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = warpSize, EMU_LOC) {
  return emu::from_bits<T>(emu::warp_op(emu::W_DOWN, mask, emu::to_bits(v), (int)d, width, _file, _line)); }
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = warpSize, EMU_LOC) {
  return emu::from_bits<T>(emu::warp_op(emu::W_XOR, mask, emu::to_bits(v), lm, width, _file, _line)); }
inline unsigned __ballot_sync(unsigned mask, int p, EMU_LOC) { return (unsigned)emu::warp_op(emu::W_BALLOT, mask, p != 0, 0, 32, _file, _line); }
inline int __any_sync(unsigned mask, int p, EMU_LOC) { return (int)emu::warp_op(emu::W_ANY, mask, p != 0, 0, 32, _file, _line); }
inline int __all_sync(unsigned mask, int p, EMU_LOC) { return (int)emu::warp_op(emu::W_ALL, mask, p != 0, 0, 32, _file, _line); }
template <class T> inline unsigned __match_any_sync(unsigned mask, T v, EMU_LOC) {
  return (unsigned)emu::warp_op(emu::W_MATCH, mask, emu::to_bits(v), 0, 32, _file, _line); }
inline unsigned __reduce_add_sync(unsigned mask, unsigned v, EMU_LOC) { return (unsigned)emu::warp_op(emu::W_RADD, mask, v, 0, 32, _file, _line); }
inline int __reduce_add_sync(unsigned mask, int v, EMU_LOC) { return (int)(unsigned)emu::warp_op(emu::W_RADD, mask, (unsigned)v, 1, 32, _file, _line); }
inline unsigned __reduce_min_sync(unsigned mask, unsigned v, EMU_LOC) { return (unsigned)emu::warp_op(emu::W_RMIN, mask, v, 0, 32, _file, _line); }
inline int __reduce_min_sync(unsigned mask, int v, EMU_LOC) { return (int)(unsigned)emu::warp_op(emu::W_RMIN, mask, (unsigned)v, 1, 32, _file, _line); }
inline unsigned __reduce_max_sync(unsigned mask, unsigned v, EMU_LOC) { return (unsigned)emu::warp_op(emu::W_RMAX, mask, v, 0, 32, _file, _line); }
inline int __reduce_max_sync(unsigned mask, int v, EMU_LOC) { return (int)(unsigned)emu::warp_op(emu::W_RMAX, mask, (unsigned)v, 1, 32, _file, _line); }
inline unsigned __reduce_and_sync(unsigned mask, unsigned v, EMU_LOC) { return (unsigned)emu::warp_op(emu::W_RAND, mask, v, 0, 32, _file, _line); }
inline unsigned __reduce_or_sync(unsigned mask, unsigned v, EMU_LOC) { return (unsigned)emu::warp_op(emu::W_ROR, mask, v, 0, 32, _file, _line); }
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v, EMU_LOC) { return (unsigned)emu::warp_op(emu::W_RXOR, mask, v, 0, 32, _file, _line); }
// approximation: all lanes of the warp that have not exited (the emulator has no notion of convergence)
inline unsigned __activemask() { auto& R = *emu::tl_runner; auto& F = R.f[R.cur]; return R.warp_exist[F.warp] & ~R.warp_done[F.warp]; }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
[[noreturn]] inline void __trap() { emu::fatal("__trap() called"); }
inline void __brkpt() { raise(SIGTRAP); }
inline long long clock64() { return (long long)std::chrono::steady_clock::now().time_since_epoch().count(); }
inline void __nanosleep(unsigned) {}

// atomics (fibers of a block never interleave inside one call; CAS makes them safe across EMU_THREADS)
inline int atomicAdd(int* a, int v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* a, unsigned v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline float atomicAdd(float* a, float v) { return emu::atomic_rmw(a, [v](float o) { return o + v; }); }
inline double atomicAdd(double* a, double v) { return emu::atomic_rmw(a, [v](double o) { return o + v; }); }
inline __half atomicAdd(__half* a, __half v) { return emu::atomic_rmw(a, [v](__half o) { return __float2half(__half2float(o) + __half2float(v)); }); }
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* a, __nv_bfloat16 v) {
  return emu::atomic_rmw(a, [v](__nv_bfloat16 o) { return __float2bfloat16(__bfloat162float(o) + __bfloat162float(v)); }); }
inline __half2 atomicAdd(__half2* a, __half2 v) { return emu::atomic_rmw(a, [v](__half2 o) { return __hadd2(o, v); }); }
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* a, __nv_bfloat162 v) { return emu::atomic_rmw(a, [v](__nv_bfloat162 o) { return __hadd2(o, v); }); }
inline int atomicSub(int* a, int v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicSub(unsigned* a, unsigned v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicExch(T* a, T v) { return emu::atomic_rmw(a, [v](T) { return v; }); }
template <class T> inline T atomicMax(T* a, T v) { return emu::atomic_rmw(a, [v](T o) { return o < v ? v : o; }); }
template <class T> inline T atomicMin(T* a, T v) { return emu::atomic_rmw(a, [v](T o) { return v < o ? v : o; }); }
template <class T> inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicCAS(T* a, T cmp, T v) { __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; }
inline unsigned atomicInc(unsigned* a, unsigned lim) { return emu::atomic_rmw(a, [lim](unsigned o) { return o >= lim ? 0u : o + 1; }); }
inline unsigned atomicDec(unsigned* a, unsigned lim) { return emu::atomic_rmw(a, [lim](unsigned o) { return (o == 0 || o > lim) ? lim : o - 1; }); }
#define EMU_SCOPED_ATOMIC(name) \
  template <class... A> inline auto name##_block(A... a) { return name(a...); } \
  template <class... A> inline auto name##_system(A... a) { return name(a...); }
EMU_SCOPED_ATOMIC(atomicAdd) EMU_SCOPED_ATOMIC(atomicSub) EMU_SCOPED_ATOMIC(atomicExch) EMU_SCOPED_ATOMIC(atomicMax)
EMU_SCOPED_ATOMIC(atomicMin) EMU_SCOPED_ATOMIC(atomicCAS) EMU_SCOPED_ATOMIC(atomicAnd) EMU_SCOPED_ATOMIC(atomicOr)

// math / bit intrinsics (IEEE results; the GPU's approximate __expf/rsqrtf differ by a few ulp)
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline void __sincosf(float x, float* s, float* c) { sincosf(x, s, c); }
inline float __fdividef(float a, float b) { return a / b; }
inline float fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x > 1.f ? 1.f : (x > 0.f ? x : 0.f); }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; memcpy(&x, &i, 4); return x; }
inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; memcpy(&x, &i, 8); return x; }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) { x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1); x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4); return __builtin_bswap32(x); }
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
// min/max: the overload set of CUDA's math_functions.h (mixed signedness -> unsigned, float/double -> double)
#define EMU_MINMAX(R, A, B) inline R min(const A a, const B b) { return (R)a < (R)b ? (R)a : (R)b; } \
                            inline R max(const A a, const B b) { return (R)a > (R)b ? (R)a : (R)b; }
EMU_MINMAX(int, int, int) EMU_MINMAX(unsigned, unsigned, unsigned) EMU_MINMAX(unsigned, int, unsigned) EMU_MINMAX(unsigned, unsigned, int)
EMU_MINMAX(long, long, long) EMU_MINMAX(unsigned long, unsigned long, unsigned long) EMU_MINMAX(unsigned long, long, unsigned long)
EMU_MINMAX(unsigned long, unsigned long, long) EMU_MINMAX(long long, long long, long long)
EMU_MINMAX(unsigned long long, unsigned long long, unsigned long long) EMU_MINMAX(unsigned long long, long long, unsigned long long)
EMU_MINMAX(unsigned long long, unsigned long long, long long)
#undef EMU_MINMAX
inline float min(const float a, const float b) { return fminf(a, b); }
inline float max(const float a, const float b) { return fmaxf(a, b); }
inline double min(const double a, const double b) { return fmin(a, b); }
inline double max(const double a, const double b) { return fmax(a, b); }
inline double min(const float a, const double b) { return fmin(a, b); }
inline double max(const float a, const double b) { return fmax(a, b); }
inline double min(const double a, const float b) { return fmin(a, b); }
inline double max(const double a, const float b) { return fmax(a, b); }
// cache-hinted loads/stores
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }
// bf16 / fp16 functions that cuda_bf16.h / cuda_fp16.h only declare for device code
#define EMU_H1(T, F, f, g) inline T f(const T a) { return F(g(X2F(a))); }
#define X2F(a) __bfloat162float(a)
EMU_H1(__nv_bfloat16, __float2bfloat16, hexp, expf) EMU_H1(__nv_bfloat16, __float2bfloat16, hlog, logf)
EMU_H1(__nv_bfloat16, __float2bfloat16, hsqrt, sqrtf) EMU_H1(__nv_bfloat16, __float2bfloat16, hrsqrt, rsqrtf)
EMU_H1(__nv_bfloat16, __float2bfloat16, htanh, tanhf)
#undef X2F
#define X2F(a) __half2float(a)
EMU_H1(__half, __float2half, hexp, expf) EMU_H1(__half, __float2half, hlog, logf)
EMU_H1(__half, __float2half, hsqrt, sqrtf) EMU_H1(__half, __float2half, hrsqrt, rsqrtf)
#undef X2F
#undef EMU_H1
inline __nv_bfloat16 __hfma(const __nv_bfloat16 a, const __nv_bfloat16 b, const __nv_bfloat16 c) {
  return __float2bfloat16(fmaf(__bfloat162float(a), __bfloat162float(b), __bfloat162float(c))); }
inline __nv_bfloat162 __hfma2(const __nv_bfloat162 a, const __nv_bfloat162 b, const __nv_bfloat162 c) {
  return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
inline __half __hfma(const __half a, const __half b, const __half c) {
  return __float2half(fmaf(__half2float(a), __half2float(b), __half2float(c))); }

// ------------------------------------------------------------------ 4b. tensor cores: nvcuda::wmma
#include "wmma_emu.h"

// ------------------------------------------------------------------ 5. CUDA runtime API (host)
struct CUstream_st { int device; };
// An event completes when the stream work queued before its record has run. `pending` counts
// records not yet executed (EMU_DEFER=1 queues them), `owner` marks the host thread that
// recorded it last (see cudaEventQuery).
// seq: the stream work submitted up to its last record (emu::submitted), for the host-wait count
struct CUevent_st { double t_ms = 0; bool recorded = false; std::atomic<int> pending{0}; std::atomic<const void*> owner{nullptr};
                    std::atomic<long> seq{0}; };
inline double emu_now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

inline cudaError_t cudaMalloc(void** p, size_t n) {
  if (!p) return emu::set_error(cudaErrorInvalidValue);
  *p = nullptr;
  if (cudaError_t e = emu::capture_unsafe("cudaMalloc")) return e;
  void* q = nullptr;  // exact size (not rounded up) so that AddressSanitizer sees every overrun
  if (posix_memalign(&q, 256, n ? n : 1) != 0) return emu::set_error(cudaErrorMemoryAllocation);
  memset(q, 0xff, n);  // device memory is not zeroed: make uninitialised reads visible (NaN / -1)
  { auto& r = emu::registry(); std::lock_guard<std::mutex> g(r.m); r.a[(uintptr_t)q] = {n, emu::M_DEVICE, emu::tl_device}; r.bytes += n; }
  *p = q;
  return cudaSuccess;
}
inline cudaError_t emu_free(void* p, int kind) {
  if (!p) return cudaSuccess;
  if (cudaError_t e = emu::capture_unsafe(kind == emu::M_PINNED ? "cudaFreeHost" : "cudaFree")) return e;
  emu::flush();
  auto& r = emu::registry();
  { std::lock_guard<std::mutex> g(r.m);
    auto it = r.a.find((uintptr_t)p);
    if (it == r.a.end() || (it->second.kind == emu::M_PINNED) != (kind == emu::M_PINNED)) {
      fprintf(stderr, "[cuda-emu] free of %p which is not a live %s allocation\n", p, kind == emu::M_PINNED ? "pinned host" : "device");
      return emu::set_error(cudaErrorInvalidValue);
    }
    r.bytes -= it->second.size; r.a.erase(it); }
  free(p);
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) { return emu_free(p, emu::M_DEVICE); }
inline cudaError_t emu_alloc_kind(void** p, size_t n, int kind) {
  cudaError_t e = cudaMalloc(p, n);
  if (e == cudaSuccess) { auto& r = emu::registry(); std::lock_guard<std::mutex> g(r.m); r.a[(uintptr_t)*p].kind = kind; }
  return e;
}
inline cudaError_t cudaMallocManaged(void** p, size_t n, unsigned int) { return emu_alloc_kind(p, n, emu::M_MANAGED); }
inline cudaError_t cudaMallocHost(void** p, size_t n) { return emu_alloc_kind(p, n, emu::M_PINNED); }
inline cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) { return emu_alloc_kind(p, n, emu::M_PINNED); }
inline cudaError_t cudaFreeHost(void* p) { return emu_free(p, emu::M_PINNED); }
inline cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
inline cudaError_t cudaMemGetInfo(size_t* fr, size_t* total) { *total = 80ull << 30; *fr = *total - emu::registry().bytes; return cudaSuccess; }

namespace emu {
// validate a copy like the driver would: device side must lie inside one allocation
inline bool dev_side(const void* p, size_t n) { const Alloc* a = find_alloc(p, n); return a && a->kind != M_PINNED; }
inline bool host_side(const void* p, size_t n) {  // unregistered host memory, or pinned / managed memory
  if (!find_alloc(p, 0)) return true;
  const Alloc* a = find_alloc(p, n); return a && a->kind != M_DEVICE;
}
inline cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* fn) {
  bool ok;
  switch (kind) {
    case cudaMemcpyHostToDevice: ok = dev_side(dst, n) && host_side(src, n); break;
    case cudaMemcpyDeviceToHost: ok = dev_side(src, n) && host_side(dst, n); break;
    case cudaMemcpyDeviceToDevice: ok = dev_side(dst, n) && dev_side(src, n); break;
    case cudaMemcpyHostToHost: ok = host_side(dst, n) && host_side(src, n); break;
    case cudaMemcpyDefault: ok = (dev_side(dst, n) || host_side(dst, n)) && (dev_side(src, n) || host_side(src, n)); break;
    default: ok = false;
  }
  if (!ok) {
    fprintf(stderr, "[cuda-emu] %s(dst=%p, src=%p, %zu bytes, kind=%d): pointer/kind mismatch or range outside its allocation\n",
            fn, dst, src, n, (int)kind);
    return set_error(cudaErrorInvalidValue);
  }
  if (n && (kind == cudaMemcpyDeviceToHost || (kind == cudaMemcpyDefault && dev_side(src, n) && !dev_side(dst, n)))) d2h_copies()++;
  return cudaSuccess;
}
}  // namespace emu
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (cudaError_t e = emu::check_copy(dst, src, n, kind, "cudaMemcpy")) return e;
  if (cudaError_t e = emu::capture_implicit("cudaMemcpy")) return e;
  emu::submitted()++; emu::host_wait_all();   // the copy itself: the host waits for it
  emu::flush();
  memmove(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  if (cudaError_t e = emu::check_copy(dst, src, n, kind, "cudaMemcpyAsync")) return e;
  return emu::set_error(emu::submit_on(s, [=] { memmove(dst, src, n); }));
}
inline cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, cudaMemcpyKind kind) {
  if (height == 0 || width == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return emu::set_error(cudaErrorInvalidPitchValue);
  if (cudaError_t e = emu::check_copy(dst, src, 0, kind, "cudaMemcpy2D")) return e;
  if (cudaError_t e = emu::check_copy((char*)dst + (height - 1) * dpitch, (const char*)src + (height - 1) * spitch, width, kind, "cudaMemcpy2D")) return e;
  if (cudaError_t e = emu::capture_implicit("cudaMemcpy2D")) return e;
  emu::submitted()++; emu::host_wait_all();
  emu::flush();
  for (size_t r = 0; r < height; r++) memmove((char*)dst + r * dpitch, (const char*)src + r * spitch, width);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) {
  if (!emu::is_dev(p, n)) { fprintf(stderr, "[cuda-emu] cudaMemset(%p, %zu): not inside a device allocation\n", p, n); return emu::set_error(cudaErrorInvalidValue); }
  if (cudaError_t e = emu::capture_implicit("cudaMemset")) return e;
  emu::memset_calls()++; emu::flush(); memset(p, v, n); return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) {
  if (!emu::is_dev(p, n)) { fprintf(stderr, "[cuda-emu] cudaMemsetAsync(%p, %zu): not inside a device allocation\n", p, n); return emu::set_error(cudaErrorInvalidValue); }
  return emu::set_error(emu::submit_on(s, [=] { memset(p, v, n); }, nullptr, emu::NODE_MEMSET));
}
inline cudaError_t cudaMemcpyToSymbol(const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind) {
  if (cudaError_t e = emu::capture_implicit("cudaMemcpyToSymbol")) return e;
  emu::submitted()++; emu::host_wait_all();
  emu::flush(); memcpy((char*)sym + off, src, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind) {
  if (cudaError_t e = emu::capture_implicit("cudaMemcpyFromSymbol")) return e;
  emu::d2h_copies()++; emu::submitted()++; emu::host_wait_all(); emu::flush(); memcpy(dst, (const char*)sym + off, n); return cudaSuccess; }
template <class T> inline cudaError_t cudaMemcpyToSymbol(const T& sym, const void* src, size_t n, size_t off = 0, cudaMemcpyKind k = cudaMemcpyHostToDevice) {
  return ::cudaMemcpyToSymbol((const void*)&sym, src, n, off, k); }
template <class T> inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& sym, size_t n, size_t off = 0, cudaMemcpyKind k = cudaMemcpyDeviceToHost) {
  return ::cudaMemcpyFromSymbol(dst, (const void*)&sym, n, off, k); }
// __device__/__constant__ variables are ordinary globals: register them so their address passes the device-pointer checks
inline cudaError_t cudaGetSymbolAddress(void** p, const void* sym) { *p = (void*)sym; return cudaSuccess; }
template <class T> inline cudaError_t cudaGetSymbolAddress(void** p, const T& sym) {
  auto& r = emu::registry(); std::lock_guard<std::mutex> g(r.m);
  r.a.emplace((uintptr_t)&sym, emu::Alloc{sizeof(T), emu::M_DEVICE, emu::tl_device});
  *p = (void*)&sym; return cudaSuccess;
}
template <class T> inline cudaError_t cudaGetSymbolSize(size_t* n, const T&) { *n = sizeof(T); return cudaSuccess; }
inline cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int, cudaStream_t) { return cudaSuccess; }

inline cudaError_t cudaGetLastError(void) { cudaError_t e = emu::last_error; emu::last_error = cudaSuccess; return e; }
inline cudaError_t cudaPeekAtLastError(void) { return emu::last_error; }
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    default: return "cudaErrorUnknown(emu)";
  }
}
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return cudaGetErrorName(e);
  }
}
inline cudaError_t cudaDeviceSynchronize(void) {
  if (cudaError_t e = emu::capture_unsafe("cudaDeviceSynchronize")) return e;
  emu::host_wait_all(); emu::flush(); return emu::last_error; }
inline cudaError_t cudaDeviceReset(void) { emu::flush(); return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = new CUstream_st{emu::tl_device}; return cudaSuccess; }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) { return cudaStreamCreate(s); }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) { emu::flush(); delete s; return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (cudaError_t e = emu::capture_implicit("cudaStreamSynchronize", s, emu::special_stream(s))) return e;
  emu::host_wait_all(); emu::flush(); return cudaSuccess; }
inline cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (cudaError_t e = emu::capture_implicit("cudaStreamQuery", s, emu::special_stream(s))) return e;
  emu::flush(); return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }  // queue is FIFO: always satisfied
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = new CUevent_st(); return cudaSuccess; }
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { return cudaEventCreate(e); }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (emu::is_capturing(s)) return cudaSuccess;  // inside a capture a record only orders streams: no node here
  e->pending.fetch_add(1);
  e->owner.store(&emu::tl_thread_tag);
  e->seq.store(emu::submitted().load());   // the work before this record
  emu::submit([e] { e->t_ms = emu_now_ms(); e->recorded = true; e->pending.fetch_sub(1); });
  return cudaSuccess;
}
// waits (and counts) only when the work before the event's record was not already waited for
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e) emu::host_wait_upto(e->seq.load());
  emu::flush(); return cudaSuccess; }
// Stream work runs on the host thread that synchronises (there is no GPU running beside it):
// queried from the thread that recorded the event, the query runs the queue (so a polling loop
// makes progress, as on a GPU); queried from any other thread (a watchdog) it only looks, and
// reports cudaErrorNotReady while the work before the record has not run, so that thread never
// executes kernels or collectives, nor blocks inside one. Never recorded: complete, as in CUDA.
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e->pending.load() == 0) return cudaSuccess;
  if (e->owner.load() != &emu::tl_thread_tag) return cudaErrorNotReady;
  emu::flush();
  return e->pending.load() == 0 ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (!a->recorded || !b->recorded) return emu::set_error(cudaErrorInvalidResourceHandle);
  *ms = (float)(b->t_ms - a->t_ms); return cudaSuccess; }
// ---- stream capture and graphs (section "stream capture" above has the rules)
struct CUgraph_st { std::vector<emu::Node> nodes; };
struct CUgraphExec_st { std::vector<emu::Node> nodes; };
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  if (emu::special_stream(s)) {
    fprintf(stderr, "[cuda-emu] cudaStreamBeginCapture on the legacy default stream: cudaErrorStreamCaptureUnsupported\n");
    return emu::set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal && mode != cudaStreamCaptureModeRelaxed)
    return emu::set_error(cudaErrorInvalidValue);
  emu::Captures& C = emu::captures();
  std::lock_guard<std::mutex> g(C.m);
  if (C.by_stream.count((const void*)s)) return emu::set_error(cudaErrorIllegalState);  // already capturing
  C.by_stream[(const void*)s] = emu::Capture{(int)mode, &emu::tl_thread_tag, false, {}};
  C.active.fetch_add(1);
  return cudaSuccess;
}
// The graph of the capture (nullptr and cudaErrorStreamCaptureInvalidated when it was invalidated).
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  if (!graph) return emu::set_error(cudaErrorInvalidValue);
  *graph = nullptr;
  emu::Captures& C = emu::captures();
  std::lock_guard<std::mutex> g(C.m);
  auto it = C.by_stream.find((const void*)s);
  if (it == C.by_stream.end()) return emu::set_error(cudaErrorIllegalState);  // not capturing
  if (it->second.mode != cudaStreamCaptureModeRelaxed && it->second.thread != &emu::tl_thread_tag)
    return emu::set_error(cudaErrorStreamCaptureWrongThread);
  const bool bad = it->second.invalidated;
  if (!bad) *graph = new CUgraph_st{std::move(it->second.nodes)};
  C.by_stream.erase(it);
  C.active.fetch_sub(1);
  return bad ? emu::set_error(cudaErrorStreamCaptureInvalidated) : cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* st) {
  if (!st) return emu::set_error(cudaErrorInvalidValue);
  emu::Captures& C = emu::captures();
  std::lock_guard<std::mutex> g(C.m);
  if (emu::special_stream(s) && !C.by_stream.empty()) return emu::set_error(cudaErrorStreamCaptureImplicit);
  auto it = C.by_stream.find((const void*)s);
  *st = it == C.by_stream.end() ? cudaStreamCaptureStatusNone
      : it->second.invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return emu::set_error(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}
// Submits the nodes in capture order on s (recorded into s's capture when s is capturing);
// launches and memsets count when they are submitted, as direct ones do.
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (!exec) return emu::set_error(cudaErrorInvalidValue);
  for (const emu::Node& n : exec->nodes)
    if (cudaError_t e = emu::submit_on(s, n.fn, n.kind == emu::NODE_KERNEL ? n.kernel.c_str() : nullptr, n.kind))
      return emu::set_error(e);
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { delete exec; return cudaSuccess; }  // queued nodes hold copies
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) { delete graph; return cudaSuccess; }
inline int emu_device_count() { const char* v = emu::env("EMU_DEVICES"); return v ? atoi(v) : 1; }
inline cudaError_t cudaGetDeviceCount(int* c) { *c = emu_device_count(); return cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) { if (d < 0 || d >= emu_device_count()) return emu::set_error(cudaErrorInvalidDevice); emu::tl_device = d; return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = emu::tl_device; return cudaSuccess; }
// EMU_SM_COUNT=n: the multiprocessor count the device reports (132, an H100's, by default), read at
// every query, so a test can size grids of grid-stride kernels down between two backends
inline int emu_sm_count() {
  const char* e = getenv("EMU_SM_COUNT");
  const int n = e ? atoi(e) : 0;
  return n > 0 ? n : 132;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "cuda-emu CPU (sm_90 limits)");
  p->totalGlobalMem = 80ull << 30; p->sharedMemPerBlock = 48 * 1024; p->sharedMemPerBlockOptin = EMU_MAX_DYN_SMEM;
  p->sharedMemPerMultiprocessor = 228 * 1024; p->regsPerBlock = 65536; p->warpSize = 32; p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
  p->major = 9; p->minor = 0; p->multiProcessorCount = emu_sm_count(); p->maxThreadsPerMultiProcessor = 2048; p->l2CacheSize = 50 << 20;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = emu_sm_count(); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = EMU_MAX_DYN_SMEM; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = 2048; break;
    default: *v = 0;
  }
  return cudaSuccess;
}
inline cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute a, int v) {
  if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (v < 0 || v > EMU_MAX_DYN_SMEM) return emu::set_error(cudaErrorInvalidValue);
    emu::func_max_dyn_smem()[f] = v;
  }
  return cudaSuccess;
}
template <class T> inline cudaError_t cudaFuncSetAttribute(T* f, cudaFuncAttribute a, int v) { return ::cudaFuncSetAttribute((const void*)f, a, v); }
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* nb, const void*, int bs, size_t) { *nb = bs > 0 ? std::max(1, 2048 / bs) : 0; return cudaSuccess; }
template <class T> inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* nb, T* f, int bs, size_t s) {
  return ::cudaOccupancyMaxActiveBlocksPerMultiprocessor(nb, (const void*)f, bs, s); }

// ------------------------------------------------------------------ 6. cuBLAS (column-major GEMM on the CPU)
#if EMU_HAVE_CUBLAS
struct cublasContext { cudaStream_t stream = 0; cublasMath_t math = CUBLAS_DEFAULT_MATH; cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST; };
inline cublasStatus_t cublasCreate_v2(cublasHandle_t* h) { *h = new cublasContext(); return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { emu::flush(); delete h; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) { h->stream = s; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t* s) { *s = h->stream; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) { h->math = m; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t* m) { *m = h->math; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t m) { h->pm = m; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t* m) { *m = h->pm; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; }
inline const char* cublasGetStatusString(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : s == CUBLAS_STATUS_INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_NOT_SUPPORTED"; }
inline const char* cublasGetStatusName(cublasStatus_t s) { return cublasGetStatusString(s); }
namespace emu {
inline size_t dt_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : (t == CUDA_R_16BF || t == CUDA_R_16F) ? 2 : 0; }
inline float ld_el(const void* p, cudaDataType t, size_t i) {
  return t == CUDA_R_32F ? ((const float*)p)[i] : t == CUDA_R_16BF ? __bfloat162float(((const __nv_bfloat16*)p)[i]) : __half2float(((const __half*)p)[i]); }
inline void st_el(void* p, cudaDataType t, size_t i, float v) {
  if (t == CUDA_R_32F) ((float*)p)[i] = v; else if (t == CUDA_R_16BF) ((__nv_bfloat16*)p)[i] = __float2bfloat16(v); else ((__half*)p)[i] = __float2half(v); }
inline bool operand_ok(const char* fn, const char* nm, const void* p, cudaDataType t, long rows, long cols, long ld, long long stride, int batch) {
  if (rows == 0 || cols == 0 || batch == 0) return true;
  size_t last = (size_t)((cols - 1) * ld + rows) + (size_t)((batch - 1) * stride);
  if (is_dev(p, last * dt_size(t))) return true;
  fprintf(stderr, "[cuda-emu] %s: operand %s=%p (%ld x %ld, ld=%ld, stride=%lld, batch=%d) is not inside one device allocation\n",
          fn, nm, p, rows, cols, ld, stride, batch);
  return false;
}
// The shim's model of an fp32 value read as TF32 (cvt.rna.tf32.f32): 10 explicit mantissa bits,
// rounded to nearest with ties away from zero; inf and NaN pass through. Real cuBLAS decides per
// GEMM whether to use TF32 at all and may round otherwise; the shim always rounds, so the
// emulated backend shows TF32's effect on every fp32 GEMM.
inline float to_tf32(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) { u += 0x1000u; u &= 0xffffe000u; }
  memcpy(&x, &u, 4); return x;
}
// One product of the shim: op(A) (m x k) and op(B) (k x n) read from their storage type into fp32
// (a row-major m x k, b column-major k x n), tf32: both rounded to TF32 first; acc[i*n + j] =
// their fp32 dot product (OpenBLAS's sgemm with -DEMU_USE_CBLAS, else ascending p). The cuBLAS
// shim and the cuBLASLt shim (cublaslt_emu.h) share it: same rounding points, same sums.
inline void gemm_load(bool tA, bool tB, int m, int n, int k, const char* Ab, cudaDataType At, int lda, const char* Bb,
                      cudaDataType Bt, int ldb, std::vector<float>& a, std::vector<float>& b) {
  a.resize((size_t)m * k); b.resize((size_t)k * n);
  for (int i = 0; i < m; i++)  // a: op(A) row-major (m x k)
    for (int p = 0; p < k; p++) a[(size_t)i * k + p] = ld_el(Ab, At, tA ? (size_t)p + (size_t)i * lda : (size_t)i + (size_t)p * lda);
  for (int j = 0; j < n; j++)  // b: op(B) column-major (k x n)
    for (int p = 0; p < k; p++) b[(size_t)j * k + p] = ld_el(Bb, Bt, tB ? (size_t)j + (size_t)p * ldb : (size_t)p + (size_t)j * ldb);
}
inline void gemm_acc(int m, int n, int k, std::vector<float>& a, std::vector<float>& b, bool tf32, std::vector<float>& acc) {
  if (tf32) { for (float& v : a) v = to_tf32(v); for (float& v : b) v = to_tf32(v); }
  acc.resize((size_t)m * n);
#if defined(EMU_USE_CBLAS)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, acc.data(), n);
#else
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      const float* ar = &a[(size_t)i * k]; const float* bc = &b[(size_t)j * k];
      float s = 0.f;
      for (int p = 0; p < k; p++) s += ar[p] * bc[p];
      acc[(size_t)i * n + j] = s;
    }
#endif
}
// C = alpha*op(A)*op(B) + beta*C, column-major, fp32 accumulation, beta==0 ignores C (even NaN).
// tf32 (CUBLAS_COMPUTE_32F_FAST_TF32 with fp32 operands): A and B rounded to TF32 first.
inline cublasStatus_t gemm(cublasHandle_t h, const char* fn, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           float alpha, const void* A, cudaDataType At, int lda, long long sA, const void* B, cudaDataType Bt, int ldb,
                           long long sB, float beta, void* C, cudaDataType Ct, int ldc, long long sC, int batch, bool tf32 = false) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  bool tA = ta != CUBLAS_OP_N, tB = tb != CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1, tA ? k : m) || ldb < std::max(1, tB ? n : k) || ldc < std::max(1, m)) {
    fprintf(stderr, "[cuda-emu] %s: invalid m=%d n=%d k=%d lda=%d ldb=%d ldc=%d (transa=%d transb=%d)\n", fn, m, n, k, lda, ldb, ldc, ta, tb);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!dt_size(At) || !dt_size(Bt) || !dt_size(Ct) || At != Bt) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!operand_ok(fn, "A", A, At, tA ? k : m, tA ? m : k, lda, sA, batch) || !operand_ok(fn, "B", B, Bt, tB ? n : k, tB ? k : n, ldb, sB, batch) ||
      !operand_ok(fn, "C", C, Ct, m, n, ldc, sC, batch))
    return CUBLAS_STATUS_INVALID_VALUE;
  cudaError_t enq = submit_on(h->stream, [=] {
    std::vector<float> a, b, c;
    for (int bt = 0; bt < batch; bt++) {
      const char* Ab = (const char*)A + bt * sA * (long long)dt_size(At);
      const char* Bb = (const char*)B + bt * sB * (long long)dt_size(Bt);
      char* Cb = (char*)C + bt * sC * (long long)dt_size(Ct);
      gemm_load(tA, tB, m, n, k, Ab, At, lda, Bb, Bt, ldb, a, b);
      gemm_acc(m, n, k, a, b, tf32 && At == CUDA_R_32F, c);
      for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) { size_t ci = (size_t)i + (size_t)j * ldc;
        float v = alpha * c[(size_t)i * n + j]; if (beta != 0.f) v += beta * ld_el(Cb, Ct, ci); st_el(Cb, Ct, ci, v); }
    }
  });
  return enq == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;  // a capture invalidated before
}
inline bool compute_ok(cublasComputeType_t c) {
  return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_FAST_TF32 || c == CUBLAS_COMPUTE_32F_FAST_16BF || c == CUBLAS_COMPUTE_32F_FAST_16F || c == CUBLAS_COMPUTE_32F_PEDANTIC;
}
}  // namespace emu
inline cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                     const float* A, int lda, const float* B, int ldb, const float* beta, float* C, int ldc) {
  return emu::gemm(h, "cublasSgemm", ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, *beta, C, CUDA_R_32F, ldc, 0, 1);
}
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                                const float* A, int lda, long long sA, const float* B, int ldb, long long sB, const float* beta,
                                                float* C, int ldc, long long sC, int batch) {
  return emu::gemm(h, "cublasSgemmStridedBatched", ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, sA, B, CUDA_R_32F, ldb, sB, *beta, C, CUDA_R_32F, ldc, sC, batch);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                                   const void* A, cudaDataType At, int lda, const void* B, cudaDataType Bt, int ldb, const void* beta,
                                   void* C, cudaDataType Ct, int ldc, cublasComputeType_t ct, cublasGemmAlgo_t) {
  if (!emu::compute_ok(ct)) return CUBLAS_STATUS_NOT_SUPPORTED;
  return emu::gemm(h, "cublasGemmEx", ta, tb, m, n, k, *(const float*)alpha, A, At, lda, 0, B, Bt, ldb, 0, *(const float*)beta, C, Ct, ldc, 0, 1,
                   ct == CUBLAS_COMPUTE_32F_FAST_TF32);
}
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                                 const void* alpha, const void* A, cudaDataType At, int lda, long long sA, const void* B,
                                                 cudaDataType Bt, int ldb, long long sB, const void* beta, void* C, cudaDataType Ct, int ldc,
                                                 long long sC, int batch, cublasComputeType_t ct, cublasGemmAlgo_t) {
  if (!emu::compute_ok(ct)) return CUBLAS_STATUS_NOT_SUPPORTED;
  return emu::gemm(h, "cublasGemmStridedBatchedEx", ta, tb, m, n, k, *(const float*)alpha, A, At, lda, sA, B, Bt, ldb, sB,
                   *(const float*)beta, C, Ct, ldc, sC, batch, ct == CUBLAS_COMPUTE_32F_FAST_TF32);
}
// cuBLASLt: the cublasLtMatmul subset mingpt uses (epilogues bias, bias + GELU, bias gradients),
// on the product above. -DEMU_NO_CUBLASLT leaves it out.
#if __has_include(<cublasLt.h>) && !defined(EMU_NO_CUBLASLT)
#  include "cublaslt_emu.h"
#endif
#endif  // EMU_HAVE_CUBLAS

// ------------------------------------------------------------------ 7. NCCL (ranks = MPI processes)
// nccl_emu.h backs the NCCL subset mingpt uses with MPI between the processes of an mpirun job;
// it needs <mpi.h> (the build adds `mpicc -showme:compile`). -DEMU_NO_NCCL leaves NCCL out.
#if __has_include(<nccl.h>) && !defined(EMU_NO_NCCL)
#  if __has_include(<mpi.h>)
#    include "nccl_emu.h"
#  else
#    error "cuda_emu.h: the emulator's NCCL runs over MPI: add the flags of `mpicc -showme:compile`, or define EMU_NO_NCCL"
#  endif
#endif

#endif  // !__CUDACC__
#endif  // CUDA_EMU_H
