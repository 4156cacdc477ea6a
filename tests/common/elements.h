/* Element i of a buffer of any libcoll type, read or written through a double (or, for
 * the integer types, as bits and a signed value): what the tests' references and fills
 * need. float16, bfloat16 and fp8 go through libcoll's own conversions (mem/memops.h);
 * integers are stored as the low bytes of the value's int64 (two's complement). */
#ifndef TESTS_COMMON_ELEMENTS_H
#define TESTS_COMMON_ELEMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* Element i as a double. */
double elem_get(const void *buf, size_t i, coll_dtype_t dt);
/* Element i of an integer type as (the bits as an unsigned value, the signed value). */
void elem_get_int(const void *buf, size_t i, coll_dtype_t dt, uint64_t *u, int64_t *s);
/* Write v, rounded to dt (floats: to nearest even; fp8: saturating), as element i. */
void elem_put(void *buf, size_t i, coll_dtype_t dt, double v);

#endif
