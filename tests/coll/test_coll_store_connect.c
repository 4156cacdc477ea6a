/* coll_store_connect: libcoll's own store handed to a program as the store interface's
 * table (what torch_coll.launcher_store stands on). A real store server in a helper
 * process (tp_util.h), reached at an address given or through the launcher's environment;
 * every call of the table, and the errors that name what is wrong. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "multiproc.h"
#include "suite_run.h"
#include "tp_util.h"

#define TOKEN "store-connect-token"
enum { CALL_MS = 5000 };

static tp_store_host_t host;

static void start_store(void) { ck_assert(tp_store_start_token(&host, TOKEN)); }
static void stop_store(void) { tp_store_stop(&host); }

/* The value at key, as a string ("" when absent after check says so). */
static char *get_text(const coll_store_ops_t *ops, void *store, const char *key) {
  void *value = NULL;
  size_t len = 0;
  ck_assert_msg(ops->get(store, key, &value, &len, CALL_MS) == COLL_OK, "get %s: %s", key,
                coll_last_error());
  char *text = malloc(len + 1);
  ck_assert_ptr_nonnull(text);
  memcpy(text, value, len);
  text[len] = '\0';
  free(value);
  return text;
}

static void assert_text(const coll_store_ops_t *ops, void *store, const char *key,
                        const char *want) {
  char *got = get_text(ops, store, key);
  ck_assert_str_eq(got, want);
  free(got);
}

/* compare_set, returning what the store says is there now ("<absent>" for none). */
static char *compare_set(const coll_store_ops_t *ops, void *store, const char *key,
                         const char *expected, const char *desired) {
  void *now = NULL;
  size_t len = 0;
  ck_assert_msg(ops->compare_set(store, key, expected, expected ? strlen(expected) : 0, desired,
                                 strlen(desired), &now, &len, CALL_MS) == COLL_OK,
                "compare_set %s: %s", key, coll_last_error());
  if (now == NULL) return strdup("<absent>");
  char *text = malloc(len + 1);
  memcpy(text, now, len);
  text[len] = '\0';
  free(now);
  return text;
}

static int exists(const coll_store_ops_t *ops, void *store, const char *key) {
  int all = -1;
  const char *keys[] = {key};
  ck_assert_int_eq(ops->check(store, keys, 1, &all, CALL_MS), COLL_OK);
  return all;
}

START_TEST(every_call_of_the_table_works_on_the_store_at_a_given_address) {
  const coll_store_ops_t *ops = NULL;
  void *store = NULL;
  ck_assert_msg(coll_store_connect("127.0.0.1", host.port, TOKEN, 5000, &ops, &store) == COLL_OK,
                "%s", coll_last_error());
  ck_assert_ptr_nonnull(ops);
  ck_assert_ptr_nonnull(store);
  ck_assert_int_eq(ops->version, COLL_STORE_OPS_VERSION);
  ck_assert(ops->set_owned != NULL && ops->interrupt != NULL && ops->describe != NULL &&
            ops->wait != NULL && ops->num_keys != NULL);
  ck_assert_ptr_nonnull(strstr(ops->describe(store), "127.0.0.1"));

  int64_t keys_before = -1;
  ck_assert_int_eq(ops->num_keys(store, &keys_before, CALL_MS), COLL_OK);
  ck_assert_int_eq(ops->set(store, "app/a", "alpha", 5, CALL_MS), COLL_OK);
  assert_text(ops, store, "app/a", "alpha");
  int64_t n = 0;
  ck_assert_int_eq(ops->add(store, "app/n", 5, &n, CALL_MS), COLL_OK);
  ck_assert_int_eq(n, 5);
  ck_assert_int_eq(ops->add(store, "app/n", -2, &n, CALL_MS), COLL_OK);
  ck_assert_int_eq(n, 3);
  assert_text(ops, store, "app/n", "3");

  /* compare_set: absent -> set; wrong expectation -> unchanged; right one -> swapped. */
  char *now = compare_set(ops, store, "app/c", NULL, "one");
  ck_assert_str_eq(now, "one");
  free(now);
  now = compare_set(ops, store, "app/c", "zero", "two");
  ck_assert_str_eq(now, "one");
  free(now);
  now = compare_set(ops, store, "app/c", "one", "two");
  ck_assert_str_eq(now, "two");
  free(now);
  now = compare_set(ops, store, "app/never", "x", "y");
  ck_assert_str_eq(now, "<absent>");
  free(now);
  ck_assert_int_eq(exists(ops, store, "app/never"), 0);

  ck_assert_int_eq(exists(ops, store, "app/a"), 1);
  const char *both[] = {"app/a", "app/n"};
  ck_assert_int_eq(ops->wait(store, both, 2, CALL_MS), COLL_OK);
  int deleted = -1;
  ck_assert_int_eq(ops->delete_key(store, "app/a", &deleted, CALL_MS), COLL_OK);
  ck_assert_int_eq(deleted, 1);
  ck_assert_int_eq(ops->delete_key(store, "app/a", &deleted, CALL_MS), COLL_OK);
  ck_assert_int_eq(deleted, 0);
  ck_assert_int_eq(exists(ops, store, "app/a"), 0);
  ck_assert_int_eq(ops->num_keys(store, &n, CALL_MS), COLL_OK);
  ck_assert_int_eq(n, keys_before + 2); /* app/n, app/c */

  /* A get of an absent key waits its deadline, then says so. */
  void *value = NULL;
  size_t len = 0;
  ck_assert_int_eq(ops->get(store, "app/absent", &value, &len, 200), COLL_ERR_TIMEOUT);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "app/absent"));

  /* A clone is another connection: it sees the keys, and its owned key goes with it. */
  void *copy = NULL;
  ck_assert_int_eq(ops->clone(store, CALL_MS, &copy), COLL_OK);
  assert_text(ops, copy, "app/c", "two");
  ck_assert_int_eq(ops->set_owned(copy, "app/owned", "x", 1, CALL_MS), COLL_OK);
  ck_assert_int_eq(exists(ops, store, "app/owned"), 1);
  ops->release(copy);
  int gone = 0;
  for (int i = 0; i < 200 && !gone; i++) {
    gone = !exists(ops, store, "app/owned");
    if (!gone) usleep(5000);
  }
  ck_assert_msg(gone, "a released clone's owned key is still there after 1 s");
  ops->release(store);
}
END_TEST

START_TEST(null_host_reads_master_addr_master_port_and_the_job_token) {
  char port[16];
  snprintf(port, sizeof port, "%u", (unsigned)host.port);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", port, 1);
  setenv("COLL_JOB_TOKEN", TOKEN, 1);
  const coll_store_ops_t *ops = NULL;
  void *store = NULL;
  /* port is not used with host NULL */
  ck_assert_msg(coll_store_connect(NULL, 0, NULL, 0, &ops, &store) == COLL_OK, "%s",
                coll_last_error());
  ck_assert_int_eq(ops->set(store, "env/k", "v", 1, CALL_MS), COLL_OK);
  /* a second handle, made the same way, sees it */
  const coll_store_ops_t *ops2 = NULL;
  void *other = NULL;
  ck_assert_int_eq(coll_store_connect(NULL, 0, NULL, 1000, &ops2, &other), COLL_OK);
  assert_text(ops2, other, "env/k", "v");
  ops2->release(other);
  ops->release(store);
  /* MASTER_ADDR unset: 127.0.0.1 */
  unsetenv("MASTER_ADDR");
  ck_assert_msg(coll_store_connect(NULL, 0, NULL, 1000, &ops, &store) == COLL_OK, "%s",
                coll_last_error());
  ops->release(store);
}
END_TEST

static void assert_refused(coll_status_t got, coll_status_t want, const char *needle) {
  ck_assert_msg(got == want, "got %s, want %s (%s)", coll_status_name(got), coll_status_name(want),
                coll_last_error());
  ck_assert_msg(strstr(coll_last_error(), needle) != NULL, "the message '%s' does not name '%s'",
                coll_last_error(), needle);
}

START_TEST(errors_name_what_is_wrong) {
  const coll_store_ops_t *ops = (const coll_store_ops_t *)1;
  void *store = (void *)1;
  unsetenv("MASTER_PORT");
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  assert_refused(coll_store_connect(NULL, 0, NULL, 1000, &ops, &store), COLL_ERR_INVALID_ARGUMENT,
                 "MASTER_PORT is not set");
  ck_assert_ptr_null(ops);
  ck_assert_ptr_null(store);
  setenv("MASTER_PORT", "29x", 1);
  assert_refused(coll_store_connect(NULL, 0, NULL, 1000, &ops, &store), COLL_ERR_INVALID_ARGUMENT,
                 "MASTER_PORT");
  setenv("MASTER_PORT", "70000", 1);
  assert_refused(coll_store_connect(NULL, 0, NULL, 1000, &ops, &store), COLL_ERR_INVALID_ARGUMENT,
                 "MASTER_PORT");
  assert_refused(coll_store_connect("127.0.0.1", 0, TOKEN, 1000, &ops, &store),
                 COLL_ERR_INVALID_ARGUMENT, "port 0");
  assert_refused(coll_store_connect("", host.port, TOKEN, 1000, &ops, &store),
                 COLL_ERR_INVALID_ARGUMENT, "host is empty");
  assert_refused(coll_store_connect("127.0.0.1", host.port, TOKEN, -1, &ops, &store),
                 COLL_ERR_INVALID_ARGUMENT, "timeout_ms");
  assert_refused(coll_store_connect("127.0.0.1", host.port, TOKEN, 1000, NULL, &store),
                 COLL_ERR_INVALID_ARGUMENT, "ops or store is NULL");
  assert_refused(coll_store_connect("127.0.0.1", host.port, "another-token", 1000, &ops, &store),
                 COLL_ERR_REFUSED, "COLL_JOB_TOKEN");
  /* nothing listening: the deadline, and the address it tried */
  char port[16];
  uint16_t nobody = mp_free_port();
  snprintf(port, sizeof port, "%u", (unsigned)nobody);
  setenv("MASTER_PORT", port, 1);
  char where[64];
  snprintf(where, sizeof where, "127.0.0.1:%u", (unsigned)nobody);
  assert_refused(coll_store_connect(NULL, 0, TOKEN, 300, &ops, &store), COLL_ERR_TIMEOUT, where);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "nothing answered"));
  ck_assert_ptr_null(store);
}
END_TEST

SUITE_MAIN("coll_store_connect",
           suite_fixture_tests("store_connect", 60, start_store, stop_store,
                               every_call_of_the_table_works_on_the_store_at_a_given_address,
                               null_host_reads_master_addr_master_port_and_the_job_token,
                               errors_name_what_is_wrong))
