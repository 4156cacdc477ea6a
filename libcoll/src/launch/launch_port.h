/* What a launcher's environment does not say outright: the store's port derived from the
 * job's ids, the launching host's addresses in Open MPI's URI, whether an address is one
 * of this machine's, and the host id that tells ranks on one machine from the others. */
#ifndef COLL_LAUNCH_LAUNCH_PORT_H
#define COLL_LAUNCH_LAUNCH_PORT_H
#include <stdbool.h>
#include <stddef.h>

#include "coll.h"

/* Derived ports lie in [LAUNCH_PORT_BASE, LAUNCH_PORT_BASE + LAUNCH_PORT_SPAN): 20000..31999,
 * below Linux's ephemeral range (32768..60999), so that no outgoing connection of the
 * host holds the port by chance. */
enum { LAUNCH_PORT_BASE = 20000, LAUNCH_PORT_SPAN = 12000 };

/* The port for job `job` (e.g. SLURM_JOB_ID) and step `step` (SLURM_STEP_ID; NULL or ""
 * when the launcher has no steps): LAUNCH_PORT_BASE + FNV-1a("job.step") % SPAN. Every
 * rank of a step computes the same port with no communication; two steps of one job
 * running at once get different ports unless their hashes collide (1 in 12000). */
int launch_port_derive(const char *job, const char *step);

enum { LAUNCH_ADDRS_MAX = 8, LAUNCH_ADDR_LEN = 46 };

/* The IPv4 addresses in an Open MPI URI such as OMPI_MCA_orte_hnp_uri
 * ("1112997888.0;tcp://192.0.2.2,10.0.0.5:41421;tcp6://[fd00::2]:35185"): the host that
 * ran mpirun. *n = 0 when it names none; a malformed URI is an error. */
coll_status_t launch_uri_ipv4(const char *uri, char addrs[][LAUNCH_ADDR_LEN], int max, int *n);

/* Index into addrs of the address to reach that host from here: the first in a subnet of
 * one of this host's (non-loopback) interfaces, else the first that is not loopback, else 0. */
int launch_pick_reachable(char addrs[][LAUNCH_ADDR_LEN], int n);

/* Whether the IPv4 address is assigned to an interface of this host (network namespace). */
bool launch_addr_is_local(const char *ipv4);

/* This host's id for choosing transports: ranks with equal ids may use shared memory.
 * COLL_HOST_ID when set; else "hostname/boot_id/net:<inode of /proc/self/ns/net>" plus
 * "/slurm:<SLURMD_NODENAME>" under Slurm, so that network namespaces and emulated Slurm
 * nodes of one kernel count as different hosts. Never contains a newline. */
void launch_host_id(char *out, size_t cap);

#endif
