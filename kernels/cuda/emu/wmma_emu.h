// kernels/cuda/emu/wmma_emu.h — the nvcuda::wmma subset mingpt's kernels use, for the emulator
// (included by cuda_emu.h after its device intrinsics; never by nvcc, which has <mma.h>).
//
// Fragments of one shape, 16x16x16: matrix_a (16x16, m x k) and matrix_b (16x16, k x n) of
// __nv_bfloat16 or __half, row_major or col_major; accumulator (16x16, m x n) of float. As on
// the GPU a fragment is distributed over the 32 lanes of a warp: each lane holds num_elements
// = 8 of its 256 elements in x[]. Which ones is unspecified on hardware (and differs between
// fragment kinds), so kernels may only apply the same operation to every x[i]; here too the
// kinds differ, so that code combining x[] of fragments of two kinds position by position gets
// wrong results: element 8l + i of lane l is, in row-major order of the fragment's logical
// matrix, position 8l + i (matrix_a), 8l + i + 128 mod 256 (accumulator), and in column-major
// order position 8l + i (matrix_b).
//
// Every call (fill_fragment, load_matrix_sync, store_matrix_sync, mma_sync) is warp-collective,
// as the real ones: the 32 lanes must all make it, from the same call site, in uniform control
// flow, with the same pointer, ldm and layout. It is a warp barrier here (the warp-collective
// machinery of cuda_emu.h), and a lane missing, a call from another line or a non-uniform
// argument is reported as an error, as are a pointer not 32-byte aligned and an ldm that is not
// a multiple of 16 bytes (both undefined on the GPU).
//
// mma_sync(d, a, b, c): d = a b + c, every product of two 16-bit inputs exact in fp32 and added
// in fp32 in k order to c (the tensor cores' order and internal rounding differ: compare with
// tolerances, as for cuBLAS). d may be c.
#ifndef CUDA_EMU_WMMA_H
#define CUDA_EMU_WMMA_H

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <class T, int N> struct __frag_base {
  enum { num_elements = N };
  T x[N];
};

template <class Use, int m, int n, int k, class T, class Layout = void>
class fragment : public __frag_base<T, 8> {
  static_assert(m == 16 && n == 16 && k == 16, "wmma emulation: only the 16x16x16 shape");
  static_assert(std::is_same<Use, accumulator>::value ? std::is_same<T, float>::value && std::is_same<Layout, void>::value
                                                      : (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value) &&
                                                            (std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value),
                "wmma emulation: matrix_a/matrix_b of __nv_bfloat16 or __half with row_major or col_major, float accumulators");
};

}  // namespace wmma
}  // namespace nvcuda

namespace emu {
namespace wmma_impl {

inline const char* call_name(int what) {
  static const char* n[] = {"nvcuda::wmma::fill_fragment", "nvcuda::wmma::load_matrix_sync", "nvcuda::wmma::store_matrix_sync",
                            "nvcuda::wmma::mma_sync"};
  return n[what];
}

// The warp barrier of one call: every lane of the warp arrives (W_WMMA: same call site, same
// `what`, same `uniform` value, checked when the last lane arrives); returns the lane's position
// in its warp. A lane that never arrives is a deadlock, reported by the scheduler.
inline unsigned sync(int what, uint64_t uniform, const char* file, int line) {
  Runner* Rp = tl_runner;
  if (!Rp || !tl_in_kernel) fatal("%s called outside a kernel (%s:%d)", call_name(what), file, line);
  warp_op(W_WMMA, 0xffffffffu, uniform, what, 32, file, line);
  return Rp->f[Rp->cur].lane;
}

// The fragments of the other lanes of the warp, published by mma_sync between its two barriers.
struct Operands { const void *a, *b, *c; };
inline const Operands* peer(unsigned lane) {
  Runner& R = *tl_runner;
  return (const Operands*)(uintptr_t)R.f[R.f[R.cur].warp * 32 + lane].wval;
}

template <class T> inline void check_ptr(int what, const void* p, unsigned ldm, const char* file, int line) {
  if ((uintptr_t)p % 32) fatal("%s at %s:%d: pointer %p is not 32-byte aligned", call_name(what), file, line, p);
  if ((ldm * sizeof(T)) % 16 || ldm < 16)
    fatal("%s at %s:%d: ldm %u is not a multiple of %zu elements (16 bytes) of at least 16", call_name(what), file, line, ldm,
          16 / sizeof(T));
}
inline uint64_t arg_hash(const void* p, unsigned ldm, int layout) {
  return (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)ldm << 2 | (uint64_t)layout);
}

// Logical (row, col) of x[i] of lane l in a fragment of kind Use, and the inverse (lane * 8 + slot).
template <class Use> inline void pos(int l, int i, int& r, int& c) {
  int e = l * 8 + i;
  if (std::is_same<Use, nvcuda::wmma::accumulator>::value) e = (e + 128) % 256;
  if (std::is_same<Use, nvcuda::wmma::matrix_b>::value) { r = e % 16; c = e / 16; }
  else { r = e / 16; c = e % 16; }
}
template <class Use> inline int where(int r, int c) {
  if (std::is_same<Use, nvcuda::wmma::matrix_b>::value) return c * 16 + r;
  const int e = r * 16 + c;
  return std::is_same<Use, nvcuda::wmma::accumulator>::value ? (e + 128) % 256 : e;
}

inline float to_f(float v) { return v; }
inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float to_f(__half v) { return __half2float(v); }

}  // namespace wmma_impl
}  // namespace emu

namespace nvcuda {
namespace wmma {

// logical (row, col) of element i of lane l, in the 16x16 matrix of a fragment of kind Use
#define EMU_WMMA_RC(Use, l, i) int r_, c_; emu::wmma_impl::pos<Use>((int)(l), (i), r_, c_)

template <class Use, int m, int n, int k, class T, class L, class V>
inline void fill_fragment(fragment<Use, m, n, k, T, L>& f, const V& v, EMU_LOC) {
  const T t = (T)v;
  emu::wmma_impl::sync(0, emu::to_bits(emu::wmma_impl::to_f(t)), _file, _line);
  for (int i = 0; i < 8; i++) f.x[i] = t;
}

// matrix_a / matrix_b: element (r, c) of the logical matrix at p[r*ldm + c] (row_major) or
// p[c*ldm + r] (col_major)
template <class Use, class T, class L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L>& f, const T* p, unsigned ldm, EMU_LOC) {
  static_assert(!std::is_same<Use, accumulator>::value, "accumulator loads take a layout_t");
  const bool row = std::is_same<L, row_major>::value;
  emu::wmma_impl::check_ptr<T>(1, p, ldm, _file, _line);
  const unsigned lane = emu::wmma_impl::sync(1, emu::wmma_impl::arg_hash(p, ldm, row), _file, _line);
  for (int i = 0; i < 8; i++) {
    EMU_WMMA_RC(Use, lane, i);
    f.x[i] = row ? p[(size_t)r_ * ldm + c_] : p[(size_t)c_ * ldm + r_];
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t layout, EMU_LOC) {
  emu::wmma_impl::check_ptr<float>(1, p, ldm, _file, _line);
  const unsigned lane = emu::wmma_impl::sync(1, emu::wmma_impl::arg_hash(p, ldm, layout), _file, _line);
  for (int i = 0; i < 8; i++) {
    EMU_WMMA_RC(accumulator, lane, i);
    f.x[i] = layout == mem_row_major ? p[(size_t)r_ * ldm + c_] : p[(size_t)c_ * ldm + r_];
  }
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout, EMU_LOC) {
  emu::wmma_impl::check_ptr<float>(2, p, ldm, _file, _line);
  const unsigned lane = emu::wmma_impl::sync(2, emu::wmma_impl::arg_hash(p, ldm, layout), _file, _line);
  for (int i = 0; i < 8; i++) {
    EMU_WMMA_RC(accumulator, lane, i);
    (layout == mem_row_major ? p[(size_t)r_ * ldm + c_] : p[(size_t)c_ * ldm + r_]) = f.x[i];
  }
}

// d = a b + c. Two barriers: after the first every lane's operands are published (its Fiber's
// warp value points at them), each lane computes its 8 elements of d into a temporary, and
// only after the second (no lane reads any more) does it write them (d may be c).
template <class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, T, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c, EMU_LOC) {
  using emu::wmma_impl::Operands;
  const Operands mine = {&a, &b, &c};
  if (!emu::tl_runner || !emu::tl_in_kernel) emu::fatal("%s called outside a kernel (%s:%d)", "nvcuda::wmma::mma_sync", _file, _line);
  emu::warp_op(emu::W_WMMA_X, 0xffffffffu, (uint64_t)(uintptr_t)&mine, 3, 32, _file, _line);
  const unsigned lane = emu::tl_runner->f[emu::tl_runner->cur].lane;
  // element (r, c) of a fragment: lane where / 8, slot where % 8
  auto A = [](int r, int c) {
    const int e = emu::wmma_impl::where<matrix_a>(r, c);
    return emu::wmma_impl::to_f(((const fragment<matrix_a, 16, 16, 16, T, LA>*)emu::wmma_impl::peer(e / 8)->a)->x[e % 8]);
  };
  auto B = [](int r, int c) {
    const int e = emu::wmma_impl::where<matrix_b>(r, c);
    return emu::wmma_impl::to_f(((const fragment<matrix_b, 16, 16, 16, T, LB>*)emu::wmma_impl::peer(e / 8)->b)->x[e % 8]);
  };
  float out[8];
  for (int i = 0; i < 8; i++) {
    EMU_WMMA_RC(accumulator, lane, i);
    float s = c.x[i];
    for (int kk = 0; kk < 16; kk++) s += A(r_, kk) * B(kk, c_);
    out[i] = s;
  }
  emu::warp_op(emu::W_WMMA_X, 0xffffffffu, (uint64_t)(uintptr_t)&mine, 3, 32, _file, _line);
  for (int i = 0; i < 8; i++) d.x[i] = out[i];
}

#undef EMU_WMMA_RC

}  // namespace wmma
}  // namespace nvcuda

#endif  // CUDA_EMU_WMMA_H
