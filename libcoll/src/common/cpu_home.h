/* A rank's own CPU among the other local ranks' CPUs (launch/placement.c chooses them), and
 * the way back to it: a waiting thread found on a CPU that placement gave another local
 * rank moves itself back to its own, at most once a millisecond, and leaves its CPU mask
 * as it was (this is not binding). Only the thread that placement placed has a home. */
#ifndef COLL_COMMON_CPU_HOME_H
#define COLL_COMMON_CPU_HOME_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

/* Moves the calling thread to cpu and sets its mask back to mask (the thread's mask now):
 * 0 when both worked, -1 when the move failed (nothing changed), or the errno of the
 * failed restore (the thread is then held on cpu). */
int coll_cpu_move_keep_mask(int cpu, const cpu_set_t *mask);

/* Gives the calling thread its home CPU (>= 0) and the set of CPUs placement gave to the
 * other local ranks (home itself is taken out of it). */
void coll_cpu_home_set(int home, const cpu_set_t *peer_homes);

/* The calling thread's home CPU, or -1. */
int coll_cpu_home(void);

/* Called by a waiter that is past its pure spin, on CPU cpu at time now_ns: when cpu is
 * another local rank's home and the last move was a millisecond or more ago, moves the
 * thread to its home and restores its mask. Returns true when it moved. */
bool coll_cpu_home_return_at(int cpu, int64_t now_ns);

/* The same, on the CPU the thread runs on now. */
bool coll_cpu_home_return(void);

/* How many times this thread has moved home. */
int64_t coll_cpu_home_moves(void);

#endif
