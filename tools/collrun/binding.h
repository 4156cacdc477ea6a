/* Binding ranks to cores, as mpirun does: which CPUs each local rank may run on, worked out
 * in collrun from the CPUs collrun itself may use, and applied in the child before exec. */
#ifndef TOOLS_COLLRUN_BINDING_H
#define TOOLS_COLLRUN_BINDING_H

#include <sched.h> /* cpu_set_t and CPU_ALLOC: _GNU_SOURCE comes from meson */
#include <stdbool.h>
#include <stddef.h>

typedef enum {
  BINDING_NONE, /* ranks inherit collrun's affinity mask */
  BINDING_CORE, /* each rank on its own CPU, or on a share of them when oversubscribed */
} binding_policy_t;

/* The CPUs of every local rank; NULL sets (policy none) leave the inherited mask alone. */
typedef struct {
  int nproc;
  size_t set_size;  /* bytes of each set, for CPU_*_S and sched_setaffinity */
  cpu_set_t **sets; /* nproc sets, or NULL for BINDING_NONE */
} binding_t;

/* "none" or "core"; false for anything else. */
bool binding_parse_policy(const char *text, binding_policy_t *policy);

/* Work out the sets for nproc local ranks from collrun's own affinity mask (which a cgroup
 * or taskset may have narrowed): with m allowed CPUs a0 < a1 < ... and nproc <= m, rank i
 * gets a_i alone; with nproc > m, rank i gets the CPUs that its 1/nproc slice
 * [i*m/nproc, (i+1)*m/nproc) of the allowed list overlaps (a contiguous range, at least one
 * CPU). false after printing why. */
bool binding_plan(binding_policy_t policy, int nproc, binding_t *binding);

/* In the child between fork and exec (async-signal-safe: a system call and write(2)):
 * restrict the calling process to local rank's set. Does nothing for BINDING_NONE. On
 * failure writes a warning to stderr and leaves the mask as inherited. */
void binding_apply(const binding_t *binding, int local_rank);

void binding_free(binding_t *binding);

#endif
