/* collrun: launch N ranks of a program on this node with torchrun's environment, host the
 * rendezvous store on node 0, and run the job (see --help, or options.c). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "job.h"
#include "options.h"

enum { TOKEN_BYTES = 16, EXIT_NOT_FOUND = 127, EXIT_USAGE = 2 };

/* libcoll writes the hang report (after a deadline passed; the first rank whose deadline
 * it was) to COLL_HANG_REPORT:
 * point it at a file of ours, unless the user chose one, so the exit message can add it. */
static void hang_report_path(char *path, size_t cap) {
  const char *user = getenv("COLL_HANG_REPORT");
  path[0] = '\0';
  if (user != NULL && user[0] != '\0') return;
  snprintf(path, cap, "/tmp/collrun-hang-%d.txt", (int)getpid());
  unlink(path);
  setenv("COLL_HANG_REPORT", path, 1);
}

static void print_hang_report(const char *path) {
  if (path[0] == '\0') return;
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  unlink(path);
  text[n] = '\0';
  if (n > 0) fprintf(stderr, "collrun: %s\n", text);
}

/* Closed 0, 1 or 2 would be reused by our pipes and break the ranks' dup2 onto them. */
static void ensure_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null_fd >= 0 && null_fd != fd) close(null_fd); /* open() takes the lowest free fd */
  }
}

/* A fresh random token in hex, so that only this job's ranks can use its store. */
static bool random_token(char *hex, size_t cap) {
  unsigned char bytes[TOKEN_BYTES];
  if (cap < 2 * TOKEN_BYTES + 1 || getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
    return false;
  for (size_t i = 0; i < sizeof bytes; i++) snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return true;
}

static bool is_ipv4_literal(const char *addr) {
  struct in_addr parsed;
  return inet_pton(AF_INET, addr, &parsed) == 1;
}

int main(int argc, char **argv) {
  ensure_std_fds();
  options_t options;
  switch (options_parse(argc, argv, &options)) {
    case OPTIONS_HELP:
      return 0;
    case OPTIONS_USAGE_ERROR:
      return EXIT_USAGE;
    case OPTIONS_RUN:
      break;
  }
  char *path = spawn_resolve_program(options.prog_argv[0]);
  if (path == NULL) return EXIT_NOT_FOUND;
  int exit_code = JOB_EXIT_LAUNCH_FAILED;
  store_server_t *store = NULL;
  nodes_t *nodes = NULL;
  binding_t binding = {0};
  /* Before the store's thread exists, so that it inherits the blocked mask. */
  if (!job_block_signals()) {
    perror("collrun: blocking signals");
    goto cleanup;
  }
  char token_buf[2 * TOKEN_BYTES + 1];
  const char *token = options.token;
  if (token == NULL && options.nnodes == 1) {
    if (!random_token(token_buf, sizeof token_buf)) {
      perror("collrun: getrandom for the job token");
      goto cleanup;
    }
    token = token_buf;
  }
  int port = options.master_port;
  if (options.node_rank == 0) {
    /* One node: listen only where the ranks will connect. Several: on every interface,
     * since --master-addr is how the other nodes see us, maybe not a local address. */
    bool local_bind = options.nnodes == 1 && is_ipv4_literal(options.master_addr);
    store_server_options_t store_options = {
        .bind_addr = local_bind ? options.master_addr : NULL,
        .port = (uint16_t)port,
        .token = token,
    };
    if (store_server_start(&store_options, &store) != COLL_OK) {
      fprintf(stderr, "collrun: cannot start the store on %s:%d: %s\n",
              local_bind ? options.master_addr : "0.0.0.0", port, coll_last_error());
      goto cleanup;
    }
    port = store_server_port(store);
  }
  if (options.nnodes > 1) {
    /* Node 0 talks to its own store; the others wait here for node 0 to be up. */
    nodes = nodes_connect(options.node_rank == 0 ? "127.0.0.1" : options.master_addr, port, token,
                          options.node_rank, options.nnodes);
    if (nodes == NULL) goto cleanup;
  }
  if (!binding_plan(options.bind, options.nproc, &binding)) goto cleanup;
  spawn_plan_t plan = {
      .path = path,
      .argv = options.prog_argv,
      .nproc = options.nproc,
      .nnodes = options.nnodes,
      .node_rank = options.node_rank,
      .master_addr = options.master_addr,
      .master_port = port,
      .token = token,
      .binding = &binding,
  };
  job_options_t job_options = {
      .prefix = options.prefix,
      .grace_ms = options.grace_ms,
      .timeout_s = options.timeout_s,
      .nodes = nodes,
      .elastic = options.elastic,
      .replace = options.replace,
      .replace_delay_ms = options.replace_delay_ms,
  };
  char hang_path[64];
  hang_report_path(hang_path, sizeof hang_path);
  exit_code = job_run(&plan, &job_options);
  print_hang_report(hang_path);
  if (nodes != NULL) {
    nodes_report_done(nodes);
    /* The other nodes may still use the store. After a failure they only need it to see
     * the failure and stop their ranks (a second, then the grace period). */
    int linger_ms =
        exit_code == 0 ? NODES_LINGER_MS : options.grace_ms + 2 * NODES_WATCH_MS + NODES_SLACK_MS;
    if (options.node_rank == 0) nodes_wait_for_others(nodes, linger_ms);
  }
cleanup:
  binding_free(&binding);
  nodes_close(nodes);
  store_server_stop(store);
  free(path);
  return exit_code;
}
