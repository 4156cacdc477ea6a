/* Small helpers every layer uses: rounding sizes up and the spin-wait pause instruction.
 * Header-only, so they cost a call nowhere. */
#ifndef COLL_COMMON_UTIL_H
#define COLL_COMMON_UTIL_H

#include <stddef.h>

/* x rounded up to a multiple of `to` (to > 0). */
static inline size_t coll_round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* Tell the core that this thread is spinning (x86 PAUSE, arm64 YIELD). */
static inline void coll_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
