/* Element access by type for the tests (see elements.h). Every access is a memcpy: a
 * buffer need not be aligned for its type. */
#include "elements.h"

#include <string.h>

#include "mem/memops.h"

/* Element i's bytes, copied into a zeroed 8-byte value. */
static uint64_t raw(const void *buf, size_t i, size_t size) {
  uint64_t v = 0;
  memcpy(&v, (const char *)buf + i * size, size); /* little-endian: the low bytes */
  return v;
}

double elem_get(const void *buf, size_t i, coll_dtype_t dt) {
  size_t size = coll_dtype_size(dt);
  uint64_t bits = raw(buf, i, size);
  float f;
  double d;
  switch (dt) {
    case COLL_FLOAT16:
      return mem_half_to_float((uint16_t)bits);
    case COLL_BFLOAT16:
      return mem_bf16_to_float((uint16_t)bits);
    case COLL_FLOAT32:
      memcpy(&f, &bits, 4);
      return f;
    case COLL_FLOAT64:
      memcpy(&d, &bits, 8);
      return d;
    case COLL_FLOAT8E4M3:
    case COLL_FLOAT8E5M2:
      return mem_fp8_to_float((uint8_t)bits, dt);
    case COLL_UINT64:
      return (double)bits;
    default: {
      uint64_t u;
      int64_t s;
      elem_get_int(buf, i, dt, &u, &s);
      return (double)s;
    }
  }
}

void elem_get_int(const void *buf, size_t i, coll_dtype_t dt, uint64_t *u, int64_t *s) {
  uint64_t bits = raw(buf, i, coll_dtype_size(dt));
  switch (dt) {
    case COLL_INT8:
      *s = (int8_t)bits;
      break;
    case COLL_UINT8:
      *s = (uint8_t)bits;
      break;
    case COLL_INT32:
      *s = (int32_t)bits;
      break;
    case COLL_UINT32:
      *s = (uint32_t)bits;
      break;
    case COLL_INT64:
    case COLL_UINT64:
      *s = (int64_t)bits;
      break;
    default:
      *s = 0;
  }
  *u = (uint64_t)*s;
}

void elem_put(void *buf, size_t i, coll_dtype_t dt, double v) {
  size_t size = coll_dtype_size(dt);
  char *p = (char *)buf + i * size;
  uint16_t h;
  uint8_t b;
  float f;
  int64_t iv;
  switch (dt) {
    case COLL_FLOAT16:
      h = mem_float_to_half((float)v);
      memcpy(p, &h, 2);
      break;
    case COLL_BFLOAT16:
      h = mem_float_to_bf16((float)v);
      memcpy(p, &h, 2);
      break;
    case COLL_FLOAT32:
      f = (float)v;
      memcpy(p, &f, 4);
      break;
    case COLL_FLOAT64:
      memcpy(p, &v, 8);
      break;
    case COLL_FLOAT8E4M3:
    case COLL_FLOAT8E5M2:
      b = mem_double_to_fp8(v, dt);
      memcpy(p, &b, 1);
      break;
    default:
      iv = (int64_t)v;
      memcpy(p, &iv, size); /* little-endian: the low bytes, wrapped */
  }
}
