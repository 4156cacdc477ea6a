/* Shared-memory segment names with their creator's pid, and the reclaim of a dead
 * process's segments (segment_name.h). */
#include "common/segment_name.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void coll_segment_name(char *dst, size_t cap, const char *what, uint64_t unique) {
  snprintf(dst, cap, "/coll-%s-p%d-%016llx", what, (int)getpid(), (unsigned long long)unique);
}

bool coll_segment_is_of(const char *name, pid_t pid) {
  char mark[32];
  int len = snprintf(mark, sizeof mark, "-p%d-", (int)pid);
  if (strncmp(name, "coll-", 5) != 0) return false;
  /* The pid's mark is followed by the 16 hex digits that end the name. */
  const char *hit = strstr(name, mark);
  return hit != NULL && strlen(hit + len) == 16;
}

int coll_segments_reclaim(pid_t pid, uint64_t *bytes) {
  if (bytes != NULL) *bytes = 0;
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0;
  int removed = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (!coll_segment_is_of(e->d_name, pid)) continue;
    struct stat sb;
    off_t size = fstatat(dirfd(d), e->d_name, &sb, 0) == 0 ? sb.st_size : 0;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) != 0) continue; /* gone meanwhile, or not ours to remove */
    removed++;
    if (bytes != NULL) *bytes += (uint64_t)size;
  }
  closedir(d);
  return removed;
}
