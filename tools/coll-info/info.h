/* coll-info: the parts that differ with the build (RDMA support or not), behind one small
 * interface so that main.c needs no #if. */
#ifndef TOOLS_COLL_INFO_INFO_H
#define TOOLS_COLL_INFO_INFO_H

#include <stdbool.h>
#include <stdio.h>

/* Describe RDMA devices: full (devices, ports, GIDs, pick) or one line (the pick or why
 * there is none). Returns 0 when a usable port exists, 1 otherwise. */
int info_ib(FILE *out, bool full);

#endif
