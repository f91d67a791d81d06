// tests/cuda/backend_util.h — moving test data into and out of a Backend's memory (the CUDA
// suites; cmocka asserts, so include after tests/test_util.h).
#ifndef MINGPT_TESTS_CUDA_BACKEND_UTIL_H
#define MINGPT_TESTS_CUDA_BACKEND_UTIL_H

#include "kernels/backend.h"

// A new backend buffer of `bytes` holding a copy of host memory h. Fails the test when out of memory.
static inline void *up(Backend *be, const void *h, size_t bytes) {
    void *d = be->alloc(be, bytes);
    assert_non_null(d);
    be->upload(be, d, h, bytes);
    return d;
}
// A new host array (malloc; the caller frees) with the n floats of backend buffer d.
static inline float *down(Backend *be, const float *d, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(h);
    be->download(be, h, d, n * sizeof(float));
    return h;
}

#endif
