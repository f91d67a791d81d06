// tests/test_backend.c — backend selection and the CPU backend's mixed precision.
#include "tests/test_util.h"

#include "kernels/backend.h"
#include "model/gpt.h"

static void test_selection(void **state) {
    char err[512];
    Backend *be;
    assert_int_equal(backend_select("cpu", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_OK);
    assert_non_null(be);
    assert_string_equal(be->name, "cpu");
    assert_true(be->host_memory);
    be->destroy(be);
    // no GPU here: falls back to cpu
    assert_int_equal(backend_select("auto", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_OK);
    assert_non_null(be);
    be->destroy(be);
    // The messages name the device and the problem, not the caller's setting.
    assert_int_equal(backend_select("tpu", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_BAD_DEVICE);
    assert_null(be);
    assert_string_equal(err, "must be auto, cpu or cuda (got 'tpu')");
    // MINGPT_CUDA_ATTENTION: fused or cublas where a CUDA backend may be chosen; anything else is
    // an error naming the variable (also under auto, which would otherwise fall back to the CPU)
    setenv("MINGPT_CUDA_ATTENTION", "flash", 1);
    assert_int_equal(backend_select("auto", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_BAD_ENV);
    assert_null(be);
    assert_string_equal(err, "MINGPT_CUDA_ATTENTION must be fused or cublas (got 'flash')");
    assert_int_equal(backend_select("cuda", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_BAD_ENV);
    assert_null(be);
    assert_int_equal(backend_select("cpu", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_OK);   // not read
    be->destroy(be);
    setenv("MINGPT_CUDA_ATTENTION", "cublas", 1);
    assert_int_equal(backend_select("auto", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_OK);
    be->destroy(be);
    unsetenv("MINGPT_CUDA_ATTENTION");
    // MINGPT_CUDA_EPILOGUES likewise: cublaslt or off
    setenv("MINGPT_CUDA_EPILOGUES", "none", 1);
    assert_int_equal(backend_select("auto", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_BAD_ENV);
    assert_null(be);
    assert_string_equal(err, "MINGPT_CUDA_EPILOGUES must be cublaslt or off (got 'none')");
    assert_int_equal(backend_select("cpu", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_OK);   // not read
    be->destroy(be);
    setenv("MINGPT_CUDA_EPILOGUES", "off", 1);
    assert_int_equal(backend_select("auto", 0, DTYPE_FP32, &be, err, sizeof err), BACKEND_OK);
    be->destroy(be);
    unsetenv("MINGPT_CUDA_EPILOGUES");
    // cuda on a machine without a usable GPU (or a build without CUDA) is an error that says why.
    const BackendError rc = backend_select("cuda", 0, DTYPE_FP32, &be, err, sizeof err);
    if (rc == BACKEND_OK) { be->destroy(be); skip(); }
    assert_int_equal(rc, BACKEND_NO_CUDA);
    assert_null(be);
    assert_true(err[0] != 0);
    assert_null(strstr(err, "trainer_config"));
}

// zero clears exactly the bytes asked for, small (one memset) and large (split across threads,
// a size that is no multiple of the split's chunk), and nothing around them.
static void test_zero(void **state) {
    Backend *be = backend_cpu_create(DTYPE_FP32);
    const size_t sizes[] = { 0, 1, 4097, (5u << 20) + 12345 };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const size_t n = sizes[k];
        unsigned char *buf = malloc(n + 2);
        memset(buf, 0xA5, n + 2);
        be->zero(be, buf + 1, n);
        assert_int_equal(buf[0], 0xA5);
        assert_int_equal(buf[n + 1], 0xA5);
        for (size_t i = 1; i <= n; i++)
            if (buf[i]) fail_msg("size %zu: byte %zu not cleared", n, i - 1);
        free(buf);
    }
    be->destroy(be);
}

// bf16 mode: a matmul equals the fp32 matmul of bf16-rounded inputs (the rounding is
// round-to-nearest-even, checked independently here by the bit pattern).
static float ref_bf16(float x) {
    uint32_t u; memcpy(&u, &x, 4);
    uint32_t lsb = (u >> 16) & 1, rest = u & 0xffff;
    u &= 0xffff0000u;
    if (rest > 0x8000 || (rest == 0x8000 && lsb)) u += 0x10000;
    memcpy(&x, &u, 4);
    return x;
}

static void test_matmul_low_precision(void **state) {
    enum { N = 5, C = 33, OC = 7 };
    float inp[N * C], w[OC * C], b[OC], out[N * OC], ri[N * C], rw[OC * C];
    TestRng r = test_rng(9);
    test_fill(&r, inp, N * C, -2, 2); test_fill(&r, w, OC * C, -2, 2); test_fill(&r, b, OC, -1, 1);
    for (int i = 0; i < N * C; i++) ri[i] = ref_bf16(inp[i]);
    for (int i = 0; i < OC * C; i++) rw[i] = ref_bf16(w[i]);
    Backend *be = backend_cpu_create(DTYPE_BF16);
    be->matmul_forward(be, out, inp, w, b, N, C, OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double acc = b[o];
            for (int c = 0; c < C; c++) acc += (double)ri[n * C + c] * rw[o * C + c];
            assert_true(fabs(out[n * OC + o] - acc) < 1e-4 * (1 + fabs(acc)));
        }
    // The inputs themselves are left untouched (rounding happens in scratch copies).
    assert_true(inp[0] != ri[0] || inp[1] != ri[1] || inp[2] != ri[2]);
    be->destroy(be);
    // fp16: values round to 11 significant bits.
    be = backend_cpu_create(DTYPE_FP16);
    float one[1] = { 1.0f + 1.0f / 4096 }, eye[1] = { 1.0f }, o1[1];
    be->matmul_forward(be, o1, one, eye, NULL, 1, 1, 1);
    assert_true(o1[0] == 1.0f);   // 1 + 2^-12 is below fp16 resolution at 1 (2^-10)
    be->destroy(be);
}

// A whole model's loss in bf16 mode stays within bf16's error of the fp32 loss.
static void test_model_bf16_close_to_fp32(void **state) {
    GPTShape s = { .vocab_size = 17, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16 };
    char err[256];
    Backend *b32 = backend_cpu_create(DTYPE_FP32), *b16 = backend_cpu_create(DTYPE_BF16);
    GPT m32, m16;
    assert_int_equal(gpt_build_on(&m32, &s, 3, 8, b32, err, sizeof err), 0);
    assert_int_equal(gpt_build_on(&m16, &s, 3, 8, b16, err, sizeof err), 0);
    gpt_init_weights(&m32, 1);
    gpt_init_weights(&m16, 1);
    int32_t x[24], y[24];
    for (int i = 0; i < 24; i++) { x[i] = (i * 5) % 17; y[i] = (i * 3 + 1) % 17; }
    float l32 = gpt_forward(&m32, x, y, 3, 8, false, 0, 0, NULL);
    float l16 = gpt_forward(&m16, x, y, 3, 8, false, 0, 0, NULL);
    assert_true(l32 != l16);                          // the rounding happened
    assert_true(fabsf(l32 - l16) < 2e-2f * l32);      // and stayed small
    gpt_free(&m32); gpt_free(&m16);
    b32->destroy(b32); b16->destroy(b16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_zero),
        cmocka_unit_test(test_matmul_low_precision),
        cmocka_unit_test(test_model_bf16_close_to_fp32),
    };
    return cmocka_run_group_tests_name("backend", tests, NULL, NULL);
}
