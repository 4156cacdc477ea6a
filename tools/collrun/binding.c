/* Binding ranks to cores: the per-rank CPU sets (from collrun's own affinity mask, so a
 * cgroup's or taskset's narrower mask is respected) and their use in the child. */
#include "binding.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FIRST_SET_CPUS = 1024, MAX_SET_CPUS = 1 << 20 };

bool binding_parse_policy(const char *text, binding_policy_t *policy) {
  if (strcmp(text, "none") == 0) {
    *policy = BINDING_NONE;
    return true;
  }
  if (strcmp(text, "core") == 0) {
    *policy = BINDING_CORE;
    return true;
  }
  return false;
}

/* collrun's affinity mask, in a set large enough for the kernel (EINVAL: too small). */
static cpu_set_t *own_mask(int *ncpus_out, size_t *size_out) {
  for (int ncpus = FIRST_SET_CPUS; ncpus <= MAX_SET_CPUS; ncpus *= 2) {
    cpu_set_t *set = CPU_ALLOC(ncpus);
    if (set == NULL) return NULL;
    size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      *ncpus_out = ncpus;
      *size_out = size;
      return set;
    }
    CPU_FREE(set);
    if (errno != EINVAL) return NULL;
  }
  return NULL;
}

bool binding_plan(binding_policy_t policy, int nproc, binding_t *binding) {
  *binding = (binding_t){.nproc = nproc};
  if (policy == BINDING_NONE) return true;
  int ncpus = 0;
  size_t size = 0;
  cpu_set_t *mask = own_mask(&ncpus, &size);
  if (mask == NULL) {
    fprintf(stderr, "collrun: cannot read this process's CPU affinity: %s\n", strerror(errno));
    return false;
  }
  int allowed_count = CPU_COUNT_S(size, mask);
  int *allowed = calloc((size_t)(allowed_count > 0 ? allowed_count : 1), sizeof *allowed);
  binding->sets = calloc((size_t)nproc, sizeof *binding->sets);
  bool ok = allowed != NULL && binding->sets != NULL && allowed_count > 0;
  int m = 0;
  for (int cpu = 0; ok && cpu < ncpus && m < allowed_count; cpu++)
    if (CPU_ISSET_S(cpu, size, mask)) allowed[m++] = cpu;
  binding->set_size = size;
  for (int i = 0; ok && i < nproc; i++) {
    binding->sets[i] = CPU_ALLOC(ncpus);
    if (binding->sets[i] == NULL) {
      ok = false;
      break;
    }
    CPU_ZERO_S(size, binding->sets[i]);
    int first, last;
    if (nproc <= m) {
      first = last = i;
    } else {
      /* Slice [i*m/nproc, (i+1)*m/nproc) of the allowed list: the CPUs it overlaps. */
      long long lo = (long long)i * m, hi = (long long)(i + 1) * m;
      first = (int)(lo / nproc);
      last = (int)((hi + nproc - 1) / nproc) - 1;
      if (last < first) last = first;
    }
    for (int k = first; k <= last; k++) CPU_SET_S(allowed[k], size, binding->sets[i]);
  }
  if (!ok) {
    fprintf(stderr, "collrun: cannot plan the binding of %d ranks (%d allowed CPUs): %s\n", nproc,
            allowed_count, allowed_count > 0 ? "out of memory" : "no CPU allowed");
    binding_free(binding);
  }
  free(allowed);
  CPU_FREE(mask);
  return ok;
}

void binding_apply(const binding_t *binding, int local_rank) {
  if (binding == NULL || binding->sets == NULL) return;
  if (sched_setaffinity(0, binding->set_size, binding->sets[local_rank]) == 0) return;
  static const char msg[] =
      "collrun: warning: binding a rank to its CPUs failed (sched_setaffinity:"
      " the CPUs allowed changed?); it runs unbound\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
}

void binding_free(binding_t *binding) {
  if (binding->sets != NULL) {
    for (int i = 0; i < binding->nproc; i++)
      if (binding->sets[i] != NULL) CPU_FREE(binding->sets[i]);
    free(binding->sets);
  }
  binding->sets = NULL;
}
