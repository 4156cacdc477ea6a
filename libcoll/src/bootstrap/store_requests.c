/* What each store request means: set/get/add/compare_set/wait/delete/num_keys/check on
 * the server's table, parking get/wait until their keys appear or their deadline passes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store_server_internal.h"
#include "common/clock.h"

static store_arg_t key_arg(const conn_t *c, uint32_t i) { return c->args[i]; }

static store_entry_t *find(store_server_t *s, store_arg_t key) {
  return store_table_find(&s->table, key.data, key.len);
}

/* First key of a parked wait that is still missing, and how many are. */
static uint32_t missing_keys(store_server_t *s, const conn_t *c, uint32_t *first) {
  uint32_t missing = 0;
  for (uint32_t i = 0; i < c->header.nargs; i++) {
    if (find(s, key_arg(c, i)) != NULL) continue;
    if (missing == 0) *first = i;
    missing++;
  }
  return missing;
}

/* Index of the first missing key at or after `from`; nargs when there is none. */
static uint32_t first_missing_from(store_server_t *s, const conn_t *c, uint32_t from) {
  while (from < c->header.nargs && find(s, key_arg(c, from)) != NULL) from++;
  return from;
}

/* Answer a get/wait whose keys all exist; false when the connection was dropped. */
static bool answer_ready(store_server_t *s, conn_t *c) {
  bool ok;
  if (c->header.code == STORE_OP_GET) {
    store_entry_t *e = find(s, key_arg(c, 0));
    store_arg_t value = {.data = e->value, .len = (uint32_t)e->value_len};
    ok = store_conn_reply(s, c, STORE_REPLY_OK, 0, &value, 1);
  } else {
    ok = store_conn_reply(s, c, STORE_REPLY_OK, 0, NULL, 0);
  }
  if (ok) store_conn_reset_frame(c);
  return ok;
}

static void park(store_server_t *s, conn_t *c) {
  int64_t now = coll_now_ns();
  c->parked = true;
  c->park_deadline_ns = now + (int64_t)c->header.timeout_ms * 1000000LL;
  c->wait_cursor = first_missing_from(s, c, 0);
  c->park_prev = NULL;
  c->park_next = s->parked;
  if (s->parked != NULL) s->parked->park_prev = c;
  s->parked = c;
  store_conn_set_interest(s, c);
}

void store_serve_timeout(store_server_t *s, conn_t *c) {
  uint32_t first = 0;
  uint32_t missing = missing_keys(s, c, &first);
  store_arg_t key = key_arg(c, first);
  int shown = key.len > 200 ? 200 : (int)key.len;
  store_conn_unpark(s, c);
  bool ok = store_conn_reply_message(s, c, STORE_REPLY_TIMEOUT,
                                     "%u of %u keys still missing, first '%.*s'", (unsigned)missing,
                                     (unsigned)c->header.nargs, shown, (const char *)key.data);
  if (ok) store_conn_reset_frame(c);
}

/* A key was created: answer every parked request that no longer has to wait. Each waiter
 * watches only its first missing key (its cursor), so a set costs one comparison per
 * waiter, and a wait on n keys costs O(n) lookups over its life, not O(n) per set: the
 * rendezvous pattern of every rank waiting for every rank's key stays cheap. */
static void key_appeared(store_server_t *s, const uint8_t *key, size_t key_len) {
  conn_t *c = s->parked;
  while (c != NULL) {
    conn_t *next = c->park_next;
    store_arg_t watched = key_arg(c, c->wait_cursor);
    if (watched.len == key_len && memcmp(watched.data, key, key_len) == 0) {
      c->wait_cursor = first_missing_from(s, c, c->wait_cursor);
      /* Keys before the cursor may have been deleted since: check them once at the end. */
      if (c->wait_cursor == c->header.nargs) c->wait_cursor = first_missing_from(s, c, 0);
      if (c->wait_cursor == c->header.nargs) {
        store_conn_unpark(s, c);
        answer_ready(s, c);
      }
    }
    c = next;
  }
}

static bool parse_counter(const store_entry_t *e, int64_t *value) {
  char text[32];
  if (e->value_len == 0 || e->value_len >= sizeof text) return false;
  memcpy(text, e->value, e->value_len);
  text[e->value_len] = '\0';
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || end == text) return false;
  *value = v;
  return true;
}

static void op_add(store_server_t *s, conn_t *c) {
  store_arg_t key = key_arg(c, 0);
  int64_t delta = store_get_i64(c->args[1].data);
  int64_t value = 0;
  store_entry_t *e = find(s, key);
  int shown = key.len > 200 ? 200 : (int)key.len;
  if (e != NULL && !parse_counter(e, &value)) {
    store_conn_reply_message(s, c, STORE_REPLY_INVALID,
                             "add: the value of key '%.*s' is not an integer", shown,
                             (const char *)key.data);
    return;
  }
  if (__builtin_add_overflow(value, delta, &value)) {
    store_conn_reply_message(s, c, STORE_REPLY_INVALID, "add: counter '%.*s' would overflow", shown,
                             (const char *)key.data);
    return;
  }
  char text[32];
  int n = snprintf(text, sizeof text, "%lld", (long long)value);
  if (store_table_put(&s->table, key.data, key.len, (const uint8_t *)text, (size_t)n) == NULL) {
    store_conn_reply_message(s, c, STORE_REPLY_INVALID, "add: store server out of memory");
    return;
  }
  uint8_t raw[8];
  store_put_i64(raw, value);
  store_arg_t result = {.data = raw, .len = 8};
  /* Waiters first: the key lives in c's frame, which a failed reply would free. */
  if (e == NULL) key_appeared(s, key.data, key.len);
  store_conn_reply(s, c, STORE_REPLY_OK, 0, &result, 1);
}

static void op_compare_set(store_server_t *s, conn_t *c) {
  store_arg_t key = key_arg(c, 0), expected = c->args[1], desired = c->args[2];
  store_entry_t *e = find(s, key);
  bool want_absent = (c->header.flags & STORE_FLAG_ABSENT) != 0;
  bool match = want_absent
                   ? e == NULL
                   : e != NULL && e->value_len == expected.len &&
                         (expected.len == 0 || memcmp(e->value, expected.data, expected.len) == 0);
  if (match) {
    e = store_table_put(&s->table, key.data, key.len, desired.data, desired.len);
    if (e == NULL) {
      store_conn_reply_message(s, c, STORE_REPLY_INVALID,
                               "compare_set: store server out of memory");
      return;
    }
    if (want_absent) key_appeared(s, key.data, key.len);
    store_conn_reply(s, c, STORE_REPLY_OK, 0, &desired, 1);
    return;
  }
  if (e == NULL) {
    store_arg_t none = {.data = NULL, .len = 0};
    store_conn_reply(s, c, STORE_REPLY_OK, STORE_FLAG_ABSENT, &none, 1);
    return;
  }
  store_arg_t current = {.data = e->value, .len = (uint32_t)e->value_len};
  store_conn_reply(s, c, STORE_REPLY_OK, 0, &current, 1);
}

static void op_hello(store_server_t *s, conn_t *c) {
  store_arg_t token = c->args[0];
  if (s->token != NULL &&
      (token.len != s->token_len || memcmp(token.data, s->token, s->token_len) != 0)) {
    const char *why =
        token.len == 0 ? "this store requires a job token and none was sent" : "job token mismatch";
    store_conn_reply_message(s, c, STORE_REPLY_REFUSED, "%s", why);
    store_conn_drop(s, c, COLL_LOG_WARN, "refused: %s", why);
    return;
  }
  c->greeted = true;
  uint8_t raw[8];
  store_put_u32(raw, s->limits.key_max);
  store_put_u32(raw + 4, s->limits.value_max);
  store_arg_t limits = {.data = raw, .len = 8};
  store_conn_reply(s, c, STORE_REPLY_OK, 0, &limits, 1);
}

/* Serve the complete request in c->args. */
/* Forget that any connection but c owns key: the last owned set wins, so a client that
 * reconnected keeps its key when the server sees its old connection close afterwards. */
static void disown_others(store_server_t *s, conn_t *c, store_arg_t key) {
  for (conn_t *o = s->conns; o != NULL; o = o->next) {
    if (o == c) continue;
    for (size_t i = 0; i < o->owned_n; i++)
      if (strlen(o->owned[i]) == key.len && memcmp(o->owned[i], key.data, key.len) == 0) {
        free(o->owned[i]);
        o->owned[i] = o->owned[--o->owned_n];
        break;
      }
  }
}

/* Remember that c owns key (once). false when out of memory. */
static bool own(store_server_t *s, conn_t *c, store_arg_t key) {
  disown_others(s, c, key);
  for (size_t i = 0; i < c->owned_n; i++)
    if (strlen(c->owned[i]) == key.len && memcmp(c->owned[i], key.data, key.len) == 0) return true;
  if (c->owned_n == c->owned_cap) {
    size_t cap = c->owned_cap ? 2 * c->owned_cap : 4;
    char **grown = realloc(c->owned, cap * sizeof *grown);
    if (grown == NULL) return false;
    c->owned = grown;
    c->owned_cap = cap;
  }
  char *copy = malloc(key.len + 1);
  if (copy == NULL) return false;
  memcpy(copy, key.data, key.len);
  copy[key.len] = '\0';
  c->owned[c->owned_n++] = copy;
  return true;
}

void store_conn_forget_owned(store_server_t *s, conn_t *c) {
  for (size_t i = 0; i < c->owned_n; i++) {
    store_table_delete(&s->table, (const uint8_t *)c->owned[i], strlen(c->owned[i]));
    free(c->owned[i]);
  }
  free(c->owned);
  c->owned = NULL;
  c->owned_n = c->owned_cap = 0;
}

void store_serve(store_server_t *s, conn_t *c) {
  store_arg_t key = c->header.nargs > 0 ? key_arg(c, 0) : (store_arg_t){0};
  switch ((store_op_t)c->header.code) {
    case STORE_OP_HELLO:
      op_hello(s, c);
      break;
    case STORE_OP_SET: {
      bool existed = find(s, key) != NULL;
      if (store_table_put(&s->table, key.data, key.len, c->args[1].data, c->args[1].len) == NULL) {
        store_conn_reply_message(s, c, STORE_REPLY_INVALID, "set: store server out of memory");
        break;
      }
      if (!existed) key_appeared(s, key.data, key.len);
      if ((c->header.flags & STORE_FLAG_OWNED) != 0 && !own(s, c, key)) {
        store_conn_reply_message(s, c, STORE_REPLY_INVALID, "set: store server out of memory");
        break;
      }
      store_conn_reply(s, c, STORE_REPLY_OK, 0, NULL, 0);
      break;
    }
    case STORE_OP_GET:
    case STORE_OP_WAIT: {
      uint32_t first;
      if (missing_keys(s, c, &first) == 0) {
        answer_ready(s, c);
        return; /* answer_ready reset the frame */
      }
      park(s, c);
      if (c->header.timeout_ms == 0) store_serve_timeout(s, c);
      return; /* the frame stays until the request is answered */
    }
    case STORE_OP_ADD:
      op_add(s, c);
      break;
    case STORE_OP_COMPARE_SET:
      op_compare_set(s, c);
      break;
    case STORE_OP_DELETE: {
      uint8_t deleted = store_table_delete(&s->table, key.data, key.len) ? 1 : 0;
      store_arg_t result = {.data = &deleted, .len = 1};
      store_conn_reply(s, c, STORE_REPLY_OK, 0, &result, 1);
      break;
    }
    case STORE_OP_NUM_KEYS: {
      uint8_t raw[8];
      store_put_i64(raw, (int64_t)s->table.count);
      store_arg_t result = {.data = raw, .len = 8};
      store_conn_reply(s, c, STORE_REPLY_OK, 0, &result, 1);
      break;
    }
    case STORE_OP_CHECK: {
      uint32_t first;
      uint8_t all = missing_keys(s, c, &first) == 0 ? 1 : 0;
      store_arg_t result = {.data = &all, .len = 1};
      store_conn_reply(s, c, STORE_REPLY_OK, 0, &result, 1);
      break;
    }
    case STORE_OP_END:
      break; /* the parser never lets it through */
  }
  if (!c->dead) store_conn_reset_frame(c);
}
