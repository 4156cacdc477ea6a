/* Slurm's compressed host lists ("node[1-3,7]", "n[01-10]-ib,login1", "rack[1-2]-n[1-3]"):
 * counting and naming the hosts without expanding the whole list in memory. */
#ifndef COLL_LAUNCH_HOSTLIST_H
#define COLL_LAUNCH_HOSTLIST_H
#include <stddef.h>

#include "coll.h"

/* Syntax accepted (what Slurm writes into SLURM_*NODELIST):
 *   list   := item ("," item)*
 *   item   := (text | "[" ranges "]")+        text: any characters but , [ ] and spaces
 *   ranges := range ("," range)*
 *   range  := digits | digits "-" digits      lo <= hi, at most 18 digits
 * A range is zero-padded to the width of its lower bound ("[08-10]": 08 09 10). Several
 * bracket groups in one item multiply, the leftmost varying slowest ("r[1-2]-n[1-2]":
 * r1-n1 r1-n2 r2-n1 r2-n2). Anything else (empty item, "[]", nested or unbalanced
 * brackets, "[3-1]", letters in brackets, more than HOSTLIST_MAX hosts) is an error. */
enum {
  HOSTLIST_NAME_MAX = 256, /* longest host name, with its terminating NUL */
  HOSTLIST_MAX = 1 << 20,  /* most hosts in one list */
};

/* Check the whole list and count its hosts. COLL_ERR_INVALID_ARGUMENT with a message
 * naming the list and the position when it is malformed. */
coll_status_t hostlist_count(const char *list, size_t *count);
/* The index-th host (from 0) of a well-formed list into out[cap]; the whole list is
 * checked first, so a malformed tail is an error even for index 0. */
coll_status_t hostlist_nth(const char *list, size_t index, char *out, size_t cap);

#endif
