/* Unit tests of what ranks derive alone from a launcher's environment: Slurm host lists
 * (well-formed and malformed), the store port from job ids, Open MPI's HNP URI. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "launch/hostlist.h"
#include "launch/launch_port.h"
#include "suite_run.h"

/* The list expanded as "a b c" (space-separated), or "ERROR: <message>". */
static void expand(const char *list, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  if (hostlist_count(list, &n) != COLL_OK) {
    snprintf(out, cap, "ERROR: %s", coll_last_error());
    return;
  }
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    char name[HOSTLIST_NAME_MAX];
    ck_assert_int_eq(hostlist_nth(list, i, name, sizeof name), COLL_OK);
    len += (size_t)snprintf(out + len, cap - len, "%s%s", i > 0 ? " " : "", name);
    ck_assert_uint_lt(len, cap);
  }
}

START_TEST(hostlist_expands_slurm_syntax) {
  static const struct {
    const char *list, *want;
  } cases[] = {
      {"node1", "node1"},
      {"node[1-3,7]", "node1 node2 node3 node7"},
      {"n[01-10]-ib,login1",
       "n01-ib n02-ib n03-ib n04-ib n05-ib n06-ib n07-ib n08-ib n09-ib "
       "n10-ib login1"},
      {"rack[1-2]-n[1-3]", "rack1-n1 rack1-n2 rack1-n3 rack2-n1 rack2-n2 rack2-n3"},
      {"a,b[2],c", "a b2 c"},
      {"n[8-11]", "n8 n9 n10 n11"},
      {"n[098-101]", "n098 n099 n100 n101"},
      {"[1-2]x", "1x 2x"},
      {"gpu-a100-[3,5-6].cluster.org",
       "gpu-a100-3.cluster.org gpu-a100-5.cluster.org "
       "gpu-a100-6.cluster.org"},
      {"node1,node1", "node1 node1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char got[1024];
    expand(cases[i].list, got, sizeof got);
    ck_assert_msg(strcmp(got, cases[i].want) == 0, "'%s' expanded to '%s', want '%s'",
                  cases[i].list, got, cases[i].want);
  }
}
END_TEST

START_TEST(hostlist_rejects_malformed_lists_with_a_message) {
  static const struct {
    const char *list, *needle;
  } cases[] = {
      {"", "empty"},
      {"node[1-3", "never closed"},
      {"node[", "never closed"},
      {"node1]", "']' without '['"},
      {"node[]", "empty brackets"},
      {"node[3-1]", "range goes down"},
      {"node[a-b]", "expected a number"},
      {"node[1-]", "expected a number"},
      {"node[1,,2]", "expected a number"},
      {"node[1-2x]", "unexpected character"},
      {"node[[1]]", "expected a number"},
      {"a,,b", "empty host name"},
      {"a,", "empty host name"},
      {",a", "empty host name"},
      {"a b", "space"},
      {"n[1-1000000000]", "limit"},
      {"n[1-1000][1-1000][1-1000]", "limit"},
      {"n[1234567890123456789]", "number too long"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = 99;
    coll_status_t st = hostlist_count(cases[i].list, &n);
    ck_assert_msg(st == COLL_ERR_INVALID_ARGUMENT, "'%s' was accepted (%zu hosts)", cases[i].list,
                  n);
    ck_assert_msg(strstr(coll_last_error(), cases[i].needle) != NULL,
                  "'%s': message '%s' lacks '%s'", cases[i].list, coll_last_error(),
                  cases[i].needle);
    char name[HOSTLIST_NAME_MAX] = "x";
    ck_assert_int_eq(hostlist_nth(cases[i].list, 0, name, sizeof name), COLL_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(name, "");
  }
  ck_assert_int_eq(hostlist_count(NULL, &(size_t){0}), COLL_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(hostlist_first_host_of_a_huge_list_costs_nothing) {
  size_t n = 0;
  ck_assert_int_eq(hostlist_count("n[000001-100000],m[1-9]", &n), COLL_OK);
  ck_assert_uint_eq(n, 100009);
  char name[HOSTLIST_NAME_MAX];
  ck_assert_int_eq(hostlist_nth("n[000001-100000],m[1-9]", 0, name, sizeof name), COLL_OK);
  ck_assert_str_eq(name, "n000001");
  ck_assert_int_eq(hostlist_nth("n[000001-100000],m[1-9]", 100008, name, sizeof name), COLL_OK);
  ck_assert_str_eq(name, "m9");
  ck_assert_int_eq(hostlist_nth("n[1-3]", 3, name, sizeof name), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "has 3 hosts"));
  /* A malformed tail is an error even for the first host. */
  ck_assert_int_eq(hostlist_nth("node1,node[2", 0, name, sizeof name), COLL_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(hostlist_names_longer_than_the_limit_are_errors) {
  char list[600];
  memset(list, 'x', 300);
  snprintf(list + 300, sizeof list - 300, "[1-2]");
  char name[HOSTLIST_NAME_MAX];
  ck_assert_int_eq(hostlist_nth(list, 0, name, sizeof name), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "too long"));
  /* A small output buffer is an error too, never a truncated name. */
  char small[4];
  ck_assert_int_eq(hostlist_nth("node12", 0, small, sizeof small), COLL_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(port_is_derived_in_the_documented_range_and_differs_between_steps) {
  int seen_low = 0, seen_high = 0;
  for (int job = 1; job <= 2000; job++) {
    char j[16];
    snprintf(j, sizeof j, "%d", job);
    int p = launch_port_derive(j, "0");
    ck_assert_int_ge(p, LAUNCH_PORT_BASE);
    ck_assert_int_lt(p, LAUNCH_PORT_BASE + LAUNCH_PORT_SPAN);
    ck_assert_int_lt(p, 32768); /* below Linux's ephemeral ports */
    seen_low += p < LAUNCH_PORT_BASE + LAUNCH_PORT_SPAN / 2;
    seen_high += p >= LAUNCH_PORT_BASE + LAUNCH_PORT_SPAN / 2;
  }
  /* Spread over the range, not clustered. */
  ck_assert_int_gt(seen_low, 800);
  ck_assert_int_gt(seen_high, 800);
  /* Same ids, same port on every rank; another step or job, another port. */
  ck_assert_int_eq(launch_port_derive("4242", "3"), launch_port_derive("4242", "3"));
  ck_assert_int_ne(launch_port_derive("4242", "0"), launch_port_derive("4242", "1"));
  ck_assert_int_ne(launch_port_derive("4242", "0"), launch_port_derive("4243", "0"));
  /* "12" "3" and "1" "23" must not meet. */
  ck_assert_int_ne(launch_port_derive("12", "3"), launch_port_derive("1", "23"));
  ck_assert_int_eq(launch_port_derive("7", NULL), launch_port_derive("7", ""));
}
END_TEST

START_TEST(ompi_uri_gives_mpirun_hosts_ipv4_addresses) {
  char addrs[LAUNCH_ADDRS_MAX][LAUNCH_ADDR_LEN];
  int n = -1;
  ck_assert_int_eq(launch_uri_ipv4("1112997888.0;tcp://192.0.2.2:41421;tcp6://[fd00::2]:35185",
                                   addrs, LAUNCH_ADDRS_MAX, &n),
                   COLL_OK);
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(addrs[0], "192.0.2.2");
  ck_assert_int_eq(
      launch_uri_ipv4("5.0;tcp://10.1.2.3,172.17.0.1,127.0.0.1:1", addrs, LAUNCH_ADDRS_MAX, &n),
      COLL_OK);
  ck_assert_int_eq(n, 3);
  ck_assert_str_eq(addrs[1], "172.17.0.1");
  ck_assert_str_eq(addrs[2], "127.0.0.1");
  /* Loopback is never picked while another address is there. */
  ck_assert_int_eq(
      launch_uri_ipv4("5.0;tcp://127.0.0.1,198.51.100.9:1", addrs, LAUNCH_ADDRS_MAX, &n), COLL_OK);
  ck_assert_int_eq(launch_pick_reachable(addrs, n), 1);
  /* The loopback address is local, a TEST-NET address is not. */
  ck_assert(launch_addr_is_local("127.0.0.1"));
  ck_assert(!launch_addr_is_local("198.51.100.77"));
  ck_assert(!launch_addr_is_local("not-an-address"));
  ck_assert_int_eq(launch_uri_ipv4(NULL, addrs, LAUNCH_ADDRS_MAX, &n), COLL_OK);
  ck_assert_int_eq(n, 0);
  ck_assert_int_eq(launch_uri_ipv4("1.0;tcp6://[::1]:5", addrs, LAUNCH_ADDRS_MAX, &n), COLL_OK);
  ck_assert_int_eq(n, 0);
  ck_assert_int_eq(launch_uri_ipv4("1.0;tcp://10.0.0.300:5", addrs, LAUNCH_ADDRS_MAX, &n),
                   COLL_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "10.0.0.300"));
  ck_assert_int_eq(launch_uri_ipv4("1.0;tcp://10.0.0.3", addrs, LAUNCH_ADDRS_MAX, &n),
                   COLL_ERR_INVALID_ARGUMENT);
}
END_TEST

SUITE_MAIN("cluster_units",
           suite_tests("derived", 0, hostlist_expands_slurm_syntax,
                       hostlist_rejects_malformed_lists_with_a_message,
                       hostlist_first_host_of_a_huge_list_costs_nothing,
                       hostlist_names_longer_than_the_limit_are_errors,
                       port_is_derived_in_the_documented_range_and_differs_between_steps,
                       ompi_uri_gives_mpirun_hosts_ipv4_addresses))
