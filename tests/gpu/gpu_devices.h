/* Device detection for the GPU test programs, the libcoll ones and nccl_premul_device:
 * the caller stays free of CUDA (ranks are forked, and a forked child cannot use a CUDA
 * context of its parent). */
#ifndef TESTS_GPU_GPU_DEVICES_H
#define TESTS_GPU_GPU_DEVICES_H

/* meson's exit code for a skipped test. */
#define GPU_SKIP 77

/* CUDA devices visible, counted in a child process. */
int gpu_device_count(void);

#endif
