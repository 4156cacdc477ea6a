/* Launcher environments resolved into a store address and port (Slurm, Open MPI, torchrun;
 * MASTER_ADDR/MASTER_PORT overriding), the host id, and a real job of forked ranks that
 * meets with nothing but Slurm's variables. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "launch/launch_env.h"
#include "launch/launch_port.h"
#include "launcher_env.h"
#include "multiproc.h"
#include "suite_run.h"

static void clean_env(void) {
  launcher_env_clear();
  unsetenv("COLL_DEBUG");
}

static void set_vars(const char *const *vars, int n) {
  for (int i = 0; i < n && vars[i] != NULL; i++) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", vars[i]);
    char *eq = strchr(buf, '=');
    ck_assert_ptr_nonnull(eq);
    *eq = '\0';
    setenv(buf, eq + 1, 1);
  }
}

enum { MAX_VARS = 10 };

typedef struct {
  const char *name;
  const char *vars[MAX_VARS];
  const char *addr; /* expected store host; NULL: an error is expected */
  int port;         /* expected port; 0: derived from job "77", step "0" (Slurm) */
  int rank;
  const char *needle; /* in the error message */
} env_case_t;

static const char *const slurm4[] = {"SLURM_NTASKS=4", "SLURM_JOB_ID=77", "SLURM_STEP_ID=0"};

static const env_case_t cases[] = {
    {.name = "slurm: first node of the step list, port from job and step",
     .vars = {"SLURM_PROCID=2", "SLURM_NODEID=1", "SLURM_STEP_NODELIST=node[3-4]",
              "SLURM_JOB_NODELIST=node[1-4]"},
     .addr = "node3",
     .rank = 2},
    {.name = "slurm: job node list when the step's is missing",
     .vars = {"SLURM_PROCID=0", "SLURM_JOB_NODELIST=n[01-10]-ib,login1"},
     .addr = "n01-ib"},
    {.name = "slurm: MASTER_ADDR and MASTER_PORT override",
     .vars = {"SLURM_PROCID=1", "SLURM_STEP_NODELIST=node[3-4]", "MASTER_ADDR=10.9.8.7",
              "MASTER_PORT=29999"},
     .addr = "10.9.8.7",
     .port = 29999,
     .rank = 1},
    {.name = "slurm: MASTER_PORT alone overrides the port only",
     .vars = {"SLURM_PROCID=1", "SLURM_STEP_NODELIST=rack[1-2]-n[1-3]", "MASTER_PORT=29998"},
     .addr = "rack1-n1",
     .port = 29998,
     .rank = 1},
    {.name = "slurm: malformed node list",
     .vars = {"SLURM_PROCID=1", "SLURM_STEP_NODELIST=node[3-4"},
     .needle = "SLURM_STEP_NODELIST: malformed host list 'node[3-4'"},
    {.name = "slurm: no node list", .vars = {"SLURM_PROCID=1"}, .needle = "MASTER_ADDR"},
    {.name = "slurm: rank 0 not on the first node",
     .vars = {"SLURM_PROCID=0", "SLURM_NODEID=1", "SLURM_STEP_NODELIST=node[3-4]"},
     .needle = "rank 0 runs on node 1"},
    {.name = "ompi: one node uses loopback, port from the job id",
     .vars = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
              "OMPI_MCA_ess_base_jobid=1112997889"},
     .addr = "127.0.0.1",
     .port = -1,
     .rank = 1},
    {.name = "ompi: across nodes, mpirun's host from the HNP URI",
     .vars = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
              "OMPI_MCA_ess_base_jobid=1112997889",
              "OMPI_MCA_orte_hnp_uri=1112997888.0;tcp://198.51.100.7:41421"},
     .addr = "198.51.100.7",
     .port = -1,
     .rank = 3},
    {.name = "ompi: rank 0 must run on mpirun's host",
     .vars = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
              "OMPI_MCA_ess_base_jobid=1112997889",
              "OMPI_MCA_orte_hnp_uri=1112997888.0;tcp://198.51.100.7:41421"},
     .needle = "rank 0 does not run on mpirun's host"},
    {.name = "ompi: rank 0 on mpirun's host",
     .vars = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
              "OMPI_MCA_ess_base_jobid=1112997889",
              "OMPI_MCA_orte_hnp_uri=1112997888.0;tcp://198.51.100.7,127.0.0.1:41421"},
     .addr = "198.51.100.7",
     .port = -1},
    {.name = "ompi: across nodes without a URI asks for mpirun -x",
     .vars = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
              "OMPI_MCA_ess_base_jobid=1"},
     .needle = "mpirun -x MASTER_ADDR"},
    {.name = "ompi inside a Slurm allocation: Open MPI's ranks win",
     .vars = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
              "OMPI_MCA_ess_base_jobid=1112997889", "SLURM_PROCID=0",
              "SLURM_STEP_NODELIST=node[3-4]"},
     .addr = "127.0.0.1",
     .port = -1,
     .rank = 3},
    {.name = "torchrun: MASTER_ADDR still required",
     .vars = {"RANK=1", "WORLD_SIZE=2", "MASTER_PORT=29500", "SLURM_STEP_NODELIST=node1"},
     .needle = "MASTER_ADDR is not set"},
};

START_TEST(launcher_environment_resolves_the_store) {
  const env_case_t *c = &cases[_i];
  clean_env();
  const bool slurm = strncmp(c->name, "slurm", 5) == 0;
  if (slurm) set_vars(slurm4, 3);
  set_vars(c->vars, MAX_VARS);
  coll_config_t cfg;
  char addr[256] = "";
  coll_status_t st = launch_env_config(&cfg, addr, sizeof addr);
  if (c->addr == NULL) {
    ck_assert_msg(st == COLL_ERR_INVALID_ARGUMENT, "%s: accepted", c->name);
    ck_assert_msg(strstr(coll_last_error(), c->needle) != NULL, "%s: message '%s' lacks '%s'",
                  c->name, coll_last_error(), c->needle);
    return;
  }
  ck_assert_msg(st == COLL_OK, "%s: %s", c->name, coll_last_error());
  ck_assert_int_eq(cfg.rank, c->rank);
  ck_assert_int_eq(cfg.size, 4 - 2 * (strncmp(c->name, "torchrun", 8) == 0));
  ck_assert_ptr_nonnull(cfg.master_addr);
  ck_assert_msg(strcmp(cfg.master_addr, c->addr) == 0, "%s: store host '%s', want '%s'", c->name,
                cfg.master_addr, c->addr);
  int want_port = c->port > 0    ? c->port
                  : c->port == 0 ? launch_port_derive("77", "0")
                                 : launch_port_derive("1112997889", NULL);
  ck_assert_int_eq(cfg.master_port, want_port);
}
END_TEST

/* coll_launch_info reads what coll_comm_init_env would, without joining: which launcher,
 * rank, size and local rank; nothing set is "not found", not an error. */
START_TEST(launch_info_names_the_launcher_without_joining) {
  clean_env();
  coll_launch_info_t info;
  ck_assert_int_eq(coll_launch_info(&info), COLL_OK);
  ck_assert_int_eq(info.found, 0);
  ck_assert_int_eq(info.local_rank, -1);
  ck_assert_ptr_null(info.launcher);

  static const char *const torchrun[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", NULL};
  set_vars(torchrun, MAX_VARS);
  ck_assert_int_eq(coll_launch_info(&info), COLL_OK);
  ck_assert_int_eq(info.found, 1);
  ck_assert_int_eq(info.rank, 1);
  ck_assert_int_eq(info.size, 2);
  ck_assert_int_eq(info.local_rank, 1);
  ck_assert_str_eq(info.launcher, "torchrun/collrun");

  clean_env();
  static const char *const ompi_in_slurm[] = {"OMPI_COMM_WORLD_RANK=3",
                                              "OMPI_COMM_WORLD_SIZE=4",
                                              "OMPI_COMM_WORLD_LOCAL_RANK=1",
                                              "SLURM_PROCID=0",
                                              "SLURM_NTASKS=1",
                                              "SLURM_LOCALID=0",
                                              NULL};
  set_vars(ompi_in_slurm, MAX_VARS);
  ck_assert_int_eq(coll_launch_info(&info), COLL_OK);
  ck_assert_str_eq(info.launcher, "Open MPI");
  ck_assert_int_eq(info.rank, 3);
  ck_assert_int_eq(info.size, 4);
  ck_assert_int_eq(info.local_rank, 1);

  clean_env();
  static const char *const slurm[] = {"SLURM_PROCID=2", "SLURM_NTASKS=3", NULL};
  set_vars(slurm, MAX_VARS);
  ck_assert_int_eq(coll_launch_info(&info), COLL_OK);
  ck_assert_str_eq(info.launcher, "Slurm");
  ck_assert_int_eq(info.local_rank, -1);

  clean_env();
  static const char *const bad[] = {"RANK=5", "WORLD_SIZE=2", NULL};
  set_vars(bad, MAX_VARS);
  ck_assert_int_eq(coll_launch_info(&info), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(coll_last_error(), "RANK") != NULL, "message: %s", coll_last_error());
  ck_assert_int_eq(coll_launch_info(NULL), COLL_ERR_INVALID_ARGUMENT);
  clean_env();
}
END_TEST

START_TEST(host_id_is_forced_or_names_host_boot_and_network_namespace) {
  clean_env();
  char id[256], again[256];
  launch_host_id(id, sizeof id);
  launch_host_id(again, sizeof again);
  ck_assert_str_eq(id, again);
  ck_assert_ptr_nonnull(strstr(id, "/net:"));
  ck_assert_ptr_null(strstr(id, "slurm:"));
  setenv("SLURMD_NODENAME", "node7", 1);
  launch_host_id(again, sizeof again);
  ck_assert_ptr_nonnull(strstr(again, "/slurm:node7"));
  setenv("COLL_HOST_ID", "rack1\nnode9", 1);
  launch_host_id(again, sizeof again);
  ck_assert_str_eq(again, "rack1_node9");
  unsetenv("COLL_HOST_ID");
  unsetenv("SLURMD_NODENAME");
  /* In a child of our own, so that the new network namespace never leaks into other
   * tests (also with CK_FORK=no). */
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    if (unshare(CLONE_NEWNET) != 0) _exit(3);
    launch_host_id(again, sizeof again);
    ssize_t w = write(fds[1], again, strlen(again) + 1);
    _exit(w > 0 ? 0 : 1);
  }
  close(fds[1]);
  ssize_t got = read(fds[0], again, sizeof again - 1);
  close(fds[0]);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    fprintf(stderr, "host id: no network namespace (not root?): part skipped\n");
    return;
  }
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && got > 0, "child failed");
  again[got] = '\0';
  ck_assert_msg(strcmp(id, again) != 0, "same host id '%s' in another network namespace", id);
}
END_TEST

/* A job that meets with Slurm's variables only: the store on "localhost", the first host
 * of a node list whose other host does not even resolve, at the derived port. */
typedef struct {
  char job[32];
} slurm_job_t;

static int slurm_rank(int rank, int nranks, void *arg) {
  const slurm_job_t *job = arg;
  clean_env();
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv("SLURM_PROCID", v, 1);
  setenv("SLURM_LOCALID", rank < 2 ? v : "0", 1);
  setenv("SLURM_NODEID", rank < 2 ? "0" : "1", 1);
  setenv("SLURMD_NODENAME", rank < 2 ? "localhost" : "nowhere", 1);
  snprintf(v, sizeof v, "%d", nranks);
  setenv("SLURM_NTASKS", v, 1);
  setenv("SLURM_STEP_NODELIST", "localhost,nowhere.invalid", 1);
  setenv("SLURM_JOB_ID", job->job, 1);
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("COLL_TIMEOUT_MS", "20000", 1);
  coll_comm_t *comm = NULL;
  coll_status_t st = coll_comm_init_env(&comm);
  if (st != COLL_OK) {
    fprintf(stderr, "rank %d: init_env: %s\n", rank, coll_last_error());
    return 1;
  }
  int64_t x[1000];
  for (int i = 0; i < 1000; i++) x[i] = rank + i;
  st = coll_all_reduce(x, x, 1000, COLL_INT64, COLL_SUM, comm);
  int bad = st != COLL_OK;
  for (int i = 0; i < 1000 && !bad; i++) bad = x[i] != (int64_t)nranks * i + 3;
  if (bad) fprintf(stderr, "rank %d: all_reduce: %s\n", rank, coll_last_error());
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(ranks_meet_with_only_slurm_variables) {
  slurm_job_t job;
  /* A job id whose derived port is free now. */
  for (int tries = 0;; tries++) {
    ck_assert_int_lt(tries, 200);
    snprintf(job.job, sizeof job.job, "%d%02d", (int)getpid(), tries);
    int port = launch_port_derive(job.job, "0");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    bool free_now = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (free_now) break;
  }
  ck_assert_int_eq(mp_run(3, 60000, slurm_rank, &job), 0);
}
END_TEST

SUITE_MAIN("cluster_launch_env",
           suite_loop_tests("env", 90, 0, (int)(sizeof cases / sizeof cases[0]),
                            launcher_environment_resolves_the_store),
           suite_tests("env", 90, launch_info_names_the_launcher_without_joining,
                       host_id_is_forced_or_names_host_boot_and_network_namespace,
                       ranks_meet_with_only_slurm_variables))
