/* C entry points of the CUDA kernels in cuda_reduce.cu (element-wise reductions and the
 * AVG division on device memory). Plain C types only, so that C files include it
 * without the CUDA headers; the stream is a cudaStream_t passed as void *. */
#ifndef COLL_MEM_CUDA_REDUCE_H
#define COLL_MEM_CUDA_REDUCE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = a[i] OP b[i] (dtype and op as coll_dtype_t / coll_op_t values; AVG sums),
 * enqueued on `stream`. dst may alias a or b exactly. Returns a cudaError_t value (0 on
 * success); an unknown dtype or op, or a bitwise op on a float type, returns -1 without
 * launching anything. */
int cuda_reduce_launch(void *dst, const void *a, const void *b, size_t count, int dtype, int op,
                       void *stream);
/* buf[i] /= nranks, computed like the host's mem_host_finish_avg (integers truncate,
 * float16/bfloat16 in float32, fp8 in double rounded to float16). Same return convention. */
int cuda_finish_avg_launch(void *buf, size_t count, int dtype, int nranks, void *stream);

#ifdef __cplusplus
}
#endif
#endif
