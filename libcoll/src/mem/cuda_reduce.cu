// CUDA kernels for dst = a OP b on device memory, for every dtype and op, with the same
// results as the host loops in host_reduce.c (float16/bfloat16 in float32, fp8 in
// float16 narrowed with __NV_SATFINITE, NaN from either side wins min/max, integer
// overflow wraps; the bitwise ops for the integer types only), and the final AVG division.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "mem/cuda_reduce.h"

namespace {

// Values of coll_dtype_t and coll_op_t (coll.h); kept in step by a static check in
// mem_cuda.c, which sees both.
enum { I8, U8, I32, U32, I64, U64, F16, BF16, F32, F64, F8E4M3, F8E5M2 };
enum { SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR };

enum { THREADS = 256, MAX_BLOCKS = 8192 };

// Storage type T, arithmetic type A (the unsigned twin for integers so that overflow
// wraps, float for the 16-bit floats).
template <typename T> struct arith {
  typedef T type;
  __device__ static T load(T v) { return v; }
  __device__ static T store(T v) { return v; }
};
template <> struct arith<int8_t> {
  typedef uint8_t type;
  __device__ static uint8_t load(int8_t v) { return (uint8_t)v; }
  __device__ static int8_t store(uint8_t v) { return (int8_t)v; }
};
template <> struct arith<int32_t> {
  typedef uint32_t type;
  __device__ static uint32_t load(int32_t v) { return (uint32_t)v; }
  __device__ static int32_t store(uint32_t v) { return (int32_t)v; }
};
template <> struct arith<int64_t> {
  typedef uint64_t type;
  __device__ static uint64_t load(int64_t v) { return (uint64_t)v; }
  __device__ static int64_t store(uint64_t v) { return (int64_t)v; }
};
template <> struct arith<__half> {
  typedef float type;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct arith<__nv_bfloat16> {
  typedef float type;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <typename T> __device__ bool is_nan(T) { return false; }
template <> __device__ bool is_nan<float>(float x) { return x != x; }
template <> __device__ bool is_nan<double>(double x) { return x != x; }

// Min and max compare in the storage type's signedness (int8 -1 < 0), so they read the
// raw values; sum, product and the bitwise ops go through the arithmetic type (the
// bitwise ops, apply_bits, are instantiated for integers only: see launch_reduce).
template <typename T, int OP> struct apply {
  __device__ static T run(T a, T b) {
    typedef typename arith<T>::type A;
    A x = arith<T>::load(a), y = arith<T>::load(b);
    A r;
    if (OP == PROD) r = x * y;
    else r = x + y;
    return arith<T>::store(r);
  }
};
template <typename T, int OP> struct apply_bits {
  __device__ static T run(T a, T b) {
    typedef typename arith<T>::type A;
    A x = arith<T>::load(a), y = arith<T>::load(b);
    return arith<T>::store(OP == BAND ? (A)(x & y) : OP == BOR ? (A)(x | y) : (A)(x ^ y));
  }
};
template <typename T> struct apply<T, BAND> : apply_bits<T, BAND> {};
template <typename T> struct apply<T, BOR> : apply_bits<T, BOR> {};
template <typename T> struct apply<T, BXOR> : apply_bits<T, BXOR> {};
template <typename T> struct apply<T, MIN> {
  __device__ static T run(T a, T b) { return (a < b || is_nan(a)) ? a : b; }
};
template <typename T> struct apply<T, MAX> {
  __device__ static T run(T a, T b) { return (a > b || is_nan(a)) ? a : b; }
};
// 16-bit floats: compare in float32, as the host does after widening.
template <typename H, int OP> struct apply_half {
  __device__ static H run(H a, H b) {
    float x = arith<H>::load(a), y = arith<H>::load(b), r;
    if (OP == SUM) r = x + y;
    else if (OP == PROD) r = x * y;
    else if (OP == MIN) r = (x < y || x != x) ? x : y;
    else r = (x > y || x != x) ? x : y;
    return arith<H>::store(r);
  }
};
template <int OP> struct apply<__half, OP> : apply_half<__half, OP> {};
template <int OP> struct apply<__nv_bfloat16, OP> : apply_half<__nv_bfloat16, OP> {};
template <> struct apply<__half, MIN> : apply_half<__half, MIN> {};
template <> struct apply<__half, MAX> : apply_half<__half, MAX> {};
template <> struct apply<__nv_bfloat16, MIN> : apply_half<__nv_bfloat16, MIN> {};
template <> struct apply<__nv_bfloat16, MAX> : apply_half<__nv_bfloat16, MAX> {};

// fp8, one byte of format FMT. Each step as NCCL's: both operands widened to __half
// (exact), the op in __half (round to nearest even), narrowed with round to nearest even
// and saturation (__NV_SATFINITE: Inf and out-of-range values to +-max, NaN to 0x7F).
// Min and max compare in __half with libcoll's NaN rule instead of __hmin/__hmax (which
// return the non-NaN operand), so that the device gives the host's bits (fp8_inline.h).
template <int FMT> struct fp8 {
  __nv_fp8_storage_t x;
};
template <int FMT> __device__ __half fp8_widen(fp8<FMT> v) {
  return __half(__nv_cvt_fp8_to_halfraw(v.x, (__nv_fp8_interpretation_t)FMT));
}
template <int FMT> __device__ fp8<FMT> fp8_narrow(__half h) {
  fp8<FMT> r;
  r.x = __nv_cvt_halfraw_to_fp8(__half_raw(h), __NV_SATFINITE, (__nv_fp8_interpretation_t)FMT);
  return r;
}
typedef fp8<__NV_E4M3> fp8_e4m3;
typedef fp8<__NV_E5M2> fp8_e5m2;

template <int FMT, int OP> struct apply_fp8 {
  __device__ static fp8<FMT> run(fp8<FMT> a, fp8<FMT> b) {
    __half x = fp8_widen(a), y = fp8_widen(b), r;
    if (OP == SUM) r = __hadd(x, y);
    else if (OP == PROD) r = __hmul(x, y);
    else if (OP == MIN) r = (__hlt(x, y) || __hisnan(x)) ? x : y;
    else r = (__hgt(x, y) || __hisnan(x)) ? x : y;
    return fp8_narrow<FMT>(r);
  }
};
template <int OP> struct apply<fp8_e4m3, OP> : apply_fp8<__NV_E4M3, OP> {};
template <int OP> struct apply<fp8_e5m2, OP> : apply_fp8<__NV_E5M2, OP> {};
template <> struct apply<fp8_e4m3, MIN> : apply_fp8<__NV_E4M3, MIN> {};
template <> struct apply<fp8_e4m3, MAX> : apply_fp8<__NV_E4M3, MAX> {};
template <> struct apply<fp8_e5m2, MIN> : apply_fp8<__NV_E5M2, MIN> {};
template <> struct apply<fp8_e5m2, MAX> : apply_fp8<__NV_E5M2, MAX> {};

// Each element is read before it is written by the same thread, so dst may alias a or b.
template <typename T, int OP>
__global__ void reduce_kernel(T *dst, const T *a, const T *b, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = apply<T, OP>::run(a[i], b[i]);
}

// Integers truncate toward zero, as C division does on the host.
template <typename T> __global__ void divide_kernel(T *buf, size_t n, int nranks) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = (T)(buf[i] / (T)nranks);
}
template <> __global__ void divide_kernel<__half>(__half *buf, size_t n, int nranks) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = __float2half_rn(__half2float(buf[i]) / (float)nranks);
}
template <>
__global__ void divide_kernel<__nv_bfloat16>(__nv_bfloat16 *buf, size_t n, int nranks) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = __float2bfloat16_rn(__bfloat162float(buf[i]) / (float)nranks);
}
// fp8: the exact quotient (double) rounded once to __half, then narrowed, as the host.
template <int FMT> __device__ void divide_fp8(fp8<FMT> *buf, size_t n, int nranks) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = fp8_narrow<FMT>(
        __double2half((double)__half2float(fp8_widen(buf[i])) / (double)nranks));
}
template <> __global__ void divide_kernel<fp8_e4m3>(fp8_e4m3 *buf, size_t n, int nranks) {
  divide_fp8(buf, n, nranks);
}
template <> __global__ void divide_kernel<fp8_e5m2>(fp8_e5m2 *buf, size_t n, int nranks) {
  divide_fp8(buf, n, nranks);
}
template <> __global__ void divide_kernel<float>(float *buf, size_t n, int nranks) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = buf[i] / (float)nranks;
}
template <> __global__ void divide_kernel<double>(double *buf, size_t n, int nranks) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = buf[i] / (double)nranks;
}

unsigned blocks_for(size_t n) {
  size_t b = (n + THREADS - 1) / THREADS;
  if (b > (size_t)MAX_BLOCKS) b = MAX_BLOCKS;
  return (unsigned)(b == 0 ? 1 : b);
}

template <typename T>
int launch_reduce(void *dst, const void *a, const void *b, size_t n, int op, cudaStream_t s) {
  T *d = static_cast<T *>(dst);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  unsigned g = blocks_for(n);
  switch (op) {
    case SUM:
    case AVG: reduce_kernel<T, SUM><<<g, THREADS, 0, s>>>(d, x, y, n); break;
    case PROD: reduce_kernel<T, PROD><<<g, THREADS, 0, s>>>(d, x, y, n); break;
    case MIN: reduce_kernel<T, MIN><<<g, THREADS, 0, s>>>(d, x, y, n); break;
    case MAX: reduce_kernel<T, MAX><<<g, THREADS, 0, s>>>(d, x, y, n); break;
    case BAND:
    case BOR:
    case BXOR:
      if constexpr (std::is_integral<T>::value) {
        if (op == BAND) reduce_kernel<T, BAND><<<g, THREADS, 0, s>>>(d, x, y, n);
        else if (op == BOR) reduce_kernel<T, BOR><<<g, THREADS, 0, s>>>(d, x, y, n);
        else reduce_kernel<T, BXOR><<<g, THREADS, 0, s>>>(d, x, y, n);
        break;
      } else {
        return -1;  // float types have no bitwise reduction (the API refuses them first)
      }
    default: return -1;
  }
  return (int)cudaGetLastError();
}

template <typename T> int launch_divide(void *buf, size_t n, int nranks, cudaStream_t s) {
  divide_kernel<T><<<blocks_for(n), THREADS, 0, s>>>(static_cast<T *>(buf), n, nranks);
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int cuda_reduce_launch(void *dst, const void *a, const void *b, size_t count, int dtype,
                                  int op, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (count == 0) return 0;
  switch (dtype) {
    case I8: return launch_reduce<int8_t>(dst, a, b, count, op, s);
    case U8: return launch_reduce<uint8_t>(dst, a, b, count, op, s);
    case I32: return launch_reduce<int32_t>(dst, a, b, count, op, s);
    case U32: return launch_reduce<uint32_t>(dst, a, b, count, op, s);
    case I64: return launch_reduce<int64_t>(dst, a, b, count, op, s);
    case U64: return launch_reduce<uint64_t>(dst, a, b, count, op, s);
    case F16: return launch_reduce<__half>(dst, a, b, count, op, s);
    case BF16: return launch_reduce<__nv_bfloat16>(dst, a, b, count, op, s);
    case F32: return launch_reduce<float>(dst, a, b, count, op, s);
    case F64: return launch_reduce<double>(dst, a, b, count, op, s);
    case F8E4M3: return launch_reduce<fp8_e4m3>(dst, a, b, count, op, s);
    case F8E5M2: return launch_reduce<fp8_e5m2>(dst, a, b, count, op, s);
    default: return -1;
  }
}

extern "C" int cuda_finish_avg_launch(void *buf, size_t count, int dtype, int nranks,
                                      void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (count == 0 || nranks <= 1) return 0;
  switch (dtype) {
    case I8: return launch_divide<int8_t>(buf, count, nranks, s);
    case U8: return launch_divide<uint8_t>(buf, count, nranks, s);
    case I32: return launch_divide<int32_t>(buf, count, nranks, s);
    case U32: return launch_divide<uint32_t>(buf, count, nranks, s);
    case I64: return launch_divide<int64_t>(buf, count, nranks, s);
    case U64: return launch_divide<uint64_t>(buf, count, nranks, s);
    case F16: return launch_divide<__half>(buf, count, nranks, s);
    case BF16: return launch_divide<__nv_bfloat16>(buf, count, nranks, s);
    case F32: return launch_divide<float>(buf, count, nranks, s);
    case F64: return launch_divide<double>(buf, count, nranks, s);
    case F8E4M3: return launch_divide<fp8_e4m3>(buf, count, nranks, s);
    case F8E5M2: return launch_divide<fp8_e5m2>(buf, count, nranks, s);
    default: return -1;
  }
}
