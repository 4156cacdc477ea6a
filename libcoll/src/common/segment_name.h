/* The names of the POSIX shared-memory segments libcoll creates (the shm transport's
 * inboxes, the arena, registered windows, cuda_ipc's control blocks), and the way a
 * launcher removes the ones a dead process left in /dev/shm. Every name is
 *   /coll-<what>-p<pid>-<16 hex digits>
 * with the creating process's pid. A segment's name is unlinked once every peer mapped
 * it; a process that dies before that (a replacement killed while joining) leaves the
 * name, and only the pid in it says whose it was. */
#ifndef COLL_COMMON_SEGMENT_NAME_H
#define COLL_COMMON_SEGMENT_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes "/coll-<what>-p<this pid>-<unique as 16 hex digits>" into dst (cap bytes). */
void coll_segment_name(char *dst, size_t cap, const char *what, uint64_t unique);

/* Whether `name` (as listed in /dev/shm, without the leading '/') is a libcoll segment
 * created by process `pid`. */
bool coll_segment_is_of(const char *name, pid_t pid);

/* Unlinks every libcoll segment of process `pid` still in /dev/shm. For a launcher, once
 * it has reaped `pid` (a pid is not reused before its parent reaps it). Returns how many
 * were removed and, when bytes is not NULL, their total size. */
int coll_segments_reclaim(pid_t pid, uint64_t *bytes);

#endif
