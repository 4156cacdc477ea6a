/* Names and sizes of the public enums (types, ops, algorithms), from one table each. */
#include <stddef.h>

#include "coll.h"

typedef struct {
  const char *name;
  size_t size;
} dtype_info_t;

static const dtype_info_t dtype_table[COLL_DTYPE_COUNT] = {
    [COLL_INT8] = {.name = "int8", .size = 1},
    [COLL_UINT8] = {.name = "uint8", .size = 1},
    [COLL_INT32] = {.name = "int32", .size = 4},
    [COLL_UINT32] = {.name = "uint32", .size = 4},
    [COLL_INT64] = {.name = "int64", .size = 8},
    [COLL_UINT64] = {.name = "uint64", .size = 8},
    [COLL_FLOAT16] = {.name = "float16", .size = 2},
    [COLL_BFLOAT16] = {.name = "bfloat16", .size = 2},
    [COLL_FLOAT32] = {.name = "float32", .size = 4},
    [COLL_FLOAT64] = {.name = "float64", .size = 8},
    [COLL_FLOAT8E4M3] = {.name = "float8_e4m3", .size = 1},
    [COLL_FLOAT8E5M2] = {.name = "float8_e5m2", .size = 1},
};

static const char *const op_table[COLL_OP_COUNT] = {
    [COLL_SUM] = "sum", [COLL_PROD] = "prod", [COLL_MIN] = "min",
    [COLL_MAX] = "max", [COLL_AVG] = "avg",  [COLL_BAND] = "band",
    [COLL_BOR] = "bor", [COLL_BXOR] = "bxor",
};

static const char *const algo_table[COLL_ALGO_COUNT] = {
    [COLL_ALGO_AUTO] = "auto", [COLL_ALGO_RING] = "ring",     [COLL_ALGO_TREE] = "tree",
    [COLL_ALGO_HD] = "hd",     [COLL_ALGO_MASTER] = "master", [COLL_ALGO_ARENA] = "arena",
    [COLL_ALGO_RING_NODES] = "ring_nodes", [COLL_ALGO_TWO_LEVEL] = "two_level",
    [COLL_ALGO_LEADERS] = "leaders",
};

/* Casts through unsigned reject negative values of the enums as well. */
size_t coll_dtype_size(coll_dtype_t dtype) {
  return (unsigned)dtype < COLL_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

const char *coll_dtype_name(coll_dtype_t dtype) {
  return (unsigned)dtype < COLL_DTYPE_COUNT ? dtype_table[dtype].name : NULL;
}

const char *coll_op_name(coll_op_t op) {
  return (unsigned)op < COLL_OP_COUNT ? op_table[op] : NULL;
}

const char *coll_algo_name(coll_algo_t algo) {
  return (unsigned)algo < COLL_ALGO_COUNT ? algo_table[algo] : NULL;
}
