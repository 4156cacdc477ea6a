/* Test values and checks shared by the GPU programs: see gpu_values.h. */
#include "gpu_values.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

static bool is_unsigned(coll_dtype_t t) {
  return t == COLL_UINT8 || t == COLL_UINT32 || t == COLL_UINT64;
}

static bool is_fp8(coll_dtype_t t) { return t == COLL_FLOAT8E4M3 || t == COLL_FLOAT8E5M2; }

static bool is_bitwise(coll_op_t op) {
  return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR;
}

bool gpu_op_applies(coll_dtype_t t, coll_op_t op) {
  bool is_float = t == COLL_FLOAT16 || t == COLL_BFLOAT16 || t == COLL_FLOAT32 ||
                  t == COLL_FLOAT64 || is_fp8(t);
  return !(is_float && is_bitwise(op));
}

double gpu_value(int r, size_t i, coll_dtype_t t, coll_op_t op) {
  if (op == COLL_PROD) return 1.0 + (double)((i + (size_t)r) % 2);
  if (is_bitwise(op)) {
    /* Every bit pattern of a byte (negative ones in the signed types: the high bits set
     * too), repeated in the third byte of the wider types; exact in a double. */
    int64_t v = (int64_t)((i * 37 + (size_t)r * 101 + 13) % 256);
    if (!is_unsigned(t)) v -= 128;
    if (coll_dtype_size(t) >= 4) v *= 65537;
    return (double)v;
  }
  /* fp8: -2..2, so that a sum over 4 ranks stays exact in e5m2 (integers to 8) */
  if (is_fp8(t)) return (int)((i * 7 + (size_t)r * 3) % 5) - 2;
  int v = (int)((i * 7 + (size_t)r * 3) % 9);
  return is_unsigned(t) ? v : v - 4;
}

double gpu_expected(int n, size_t i, coll_dtype_t t, coll_op_t op) {
  if (is_bitwise(op)) { /* exact, in two's complement (sign extension commutes with &|^) */
    int64_t bits = (int64_t)gpu_value(0, i, t, op);
    for (int r = 1; r < n; r++) {
      int64_t v = (int64_t)gpu_value(r, i, t, op);
      bits = op == COLL_BAND ? bits & v : op == COLL_BOR ? bits | v : bits ^ v;
    }
    return (double)bits;
  }
  double acc = gpu_value(0, i, t, op);
  for (int r = 1; r < n; r++) {
    double v = gpu_value(r, i, t, op);
    switch (op) {
      case COLL_PROD: acc *= v; break;
      case COLL_MIN: acc = v < acc ? v : acc; break;
      case COLL_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op != COLL_AVG) return acc;
  if (is_fp8(t)) { /* the exact mean rounded to the format (bench_data's rounding) */
    uint8_t b;
    bench_data_set(&b, 0, (int)t, acc / n);
    return bench_data_get(&b, 0, (int)t);
  }
  bool integer = t != COLL_FLOAT16 && t != COLL_BFLOAT16 && t != COLL_FLOAT32 && t != COLL_FLOAT64;
  return integer ? (double)((long long)acc / n) : acc / n; /* C division truncates */
}

int gpu_check(int rank, int n, const void *host, size_t first, size_t count, coll_dtype_t t,
              coll_op_t op, const char *what) {
  for (size_t k = 0; k < count; k++) {
    double want = gpu_expected(n, first + k, t, op), got = bench_data_get(host, k, (int)t);
    if (got != want) {
      fprintf(stderr, "rank %d of %d: %s %s %s count %zu: element %zu is %g, expected %g\n", rank,
              n, what, coll_dtype_name(t), coll_op_name(op), count, k, got, want);
      return 1;
    }
  }
  return 0;
}
