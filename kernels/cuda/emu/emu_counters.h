/* kernels/cuda/emu/emu_counters.h — what the CUDA emulator counts, readable from C tests.
 *
 * Only the emulated build has these (cuda_emu.h defines them in every object compiled with it);
 * a program linked with the real CUDA objects must not call them. */
#ifndef MINGPT_EMU_COUNTERS_H
#define MINGPT_EMU_COUNTERS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel launches issued so far in this process (counted at the launch call, also under
 * EMU_DEFER=1 where the kernel runs later; launches refused for a bad configuration are not
 * counted) whose kernel is named `kernel`, without template arguments: "round_kernel" counts
 * round_kernel<__nv_bfloat16> and round_kernel<__half>. kernel NULL: every launch.
 * Thread-safe; tests take differences around the code they measure. */
long emu_launch_count(const char *kernel);

/* cudaMemset and cudaMemsetAsync calls issued so far in this process (each a kernel launch on a
 * real GPU, none here; EMU_STATS=1 prints them beside the launches). Thread-safe. */
long emu_memset_count(void);

/* Device-to-host copies issued so far in this process: cudaMemcpy, cudaMemcpyAsync and
 * cudaMemcpy2D whose kind is cudaMemcpyDeviceToHost (or cudaMemcpyDefault from device memory
 * to host memory), and cudaMemcpyFromSymbol. On a GPU the host must wait for each before it can
 * read the result: tests use it to show that an op keeps the host off the critical path.
 * Counted when issued (also during stream capture). Thread-safe. */
long emu_d2h_count(void);

/* Host waits issued so far in this process, as a GPU would make the host wait: a
 * cudaStreamSynchronize / cudaDeviceSynchronize with stream work submitted since the last wait,
 * a cudaEventSynchronize on an event recorded after the work the last wait covered, and every
 * synchronous copy (cudaMemcpy, cudaMemcpy2D, cudaMemcpy{To,From}Symbol). A wait for work already
 * waited for (e.g. an event recorded before the last stream synchronisation) costs nothing on a
 * GPU and is not counted. Counted also under EMU_DEFER=1 (the same numbers). Thread-safe. */
long emu_host_wait_count(void);

#ifdef __cplusplus
}
#endif

#endif
