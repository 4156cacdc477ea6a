#!/usr/bin/env bash
# check_transports.sh LOG NRANKS: from a job's COLL_DEBUG=INFO output, check that every
# ordered pair of ranks connected once, with shm when both are on one node and tcp when not.
# A rank's node is the host id the other ranks report for it ("slurm:<node>" part if any).
set -u
log=$1
nranks=$2
sed -n 's/.*\[coll rank \([0-9]*\) [^]]*\] INFO peer \([0-9]*\) (host \([^)]*\)): \([a-z_]*\).*/\1 \2 \3 \4/p' "$log" |
  awk -v n="$nranks" '
    { r = $1; p = $2; h = $3; t = $4
      sub(/.*slurm:/, "", h)
      if ((p in node) && node[p] != h) { print "  rank " p " is on two hosts: " node[p] ", " h; bad++ }
      node[p] = h; k++; R[k] = r; P[k] = p; T[k] = t; seen[r " " p]++ }
    END {
      for (i = 1; i <= k; i++) {
        want = node[R[i]] == node[P[i]] ? "shm" : "tcp"
        if (!(R[i] in node)) { print "  no host known for rank " R[i]; bad++ }
        else if (T[i] != want) { print "  rank " R[i] " (" node[R[i]] ") -> rank " P[i] " (" node[P[i]] "): " T[i] ", want " want; bad++ }
        count[T[i]]++
      }
      for (a = 0; a < n; a++) for (b = 0; b < n; b++)
        if (a != b && seen[a " " b] != 1) { print "  pair " a " -> " b " connected " seen[a " " b] + 0 " times"; bad++ }
      printf "  transports: %d shm, %d tcp pairs over", count["shm"], count["tcp"]
      for (a = 0; a < n; a++) printf " %d:%s", a, node[a]
      printf "\n"
      if (count["tcp"] == 0) { print "  no pair used tcp: the nodes were not told apart"; bad++ }
      exit bad > 0
    }'
