/* The store keys of failure detection and membership (the key space is drawn in
 * store_keys.h). Each function spells one key; a key that does not fit is cut, which the
 * store then never matches: prefixes are bounded (BASE_KEY_PREFIX_MAX) so that none is. */
#include "base/store_keys.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

static store_key_t key_format(const char *format, ...) __attribute__((format(printf, 1, 2)));

static store_key_t key_format(const char *format, ...) {
  store_key_t key;
  va_list ap;
  va_start(ap, format);
  vsnprintf(key.text, sizeof key.text, format, ap);
  va_end(ap);
  return key;
}

store_key_t key_comm_counter(int rank) { return key_format("coll/comms/%d", rank); }

void key_comm_prefix(int64_t k, char *out, size_t cap) {
  snprintf(out, cap, "coll/c%" PRId64 "/", k);
}

store_key_t key_failure(const char *prefix) { return key_format("%sfailure", prefix); }

store_key_t key_dead(const char *prefix, int rank) { return key_format("%sdead/%d", prefix, rank); }

store_key_t key_alive(const char *prefix, int rank) {
  return key_format("%salive/%d", prefix, rank);
}

store_key_t key_done(const char *prefix, int rank) { return key_format("%sdone/%d", prefix, rank); }

store_key_t key_left(const char *prefix, int rank) { return key_format("%sleft/%d", prefix, rank); }

store_key_t key_hang(const char *prefix, const char *what) {
  return key_format("%shang/%s", prefix, what);
}

store_key_t key_agree_in(const char *prefix, uint64_t epoch, int rank) {
  return key_format("%sagree/%" PRIu64 "/in/%d", prefix, epoch, rank);
}

store_key_t key_agree_count(const char *prefix, uint64_t epoch) {
  return key_format("%sagree/%" PRIu64 "/n", prefix, epoch);
}

store_key_t key_agree_decision(const char *prefix, uint64_t epoch) {
  return key_format("%sagree/%" PRIu64 "/decision", prefix, epoch);
}

store_key_t key_shrink_record(const char *prefix, uint64_t k) {
  return key_format("%sshrink/%" PRIu64, prefix, k);
}

store_key_t key_grow_record(const char *prefix, uint64_t k) {
  return key_format("%sgrow/%" PRIu64, prefix, k);
}

store_key_t key_lineage_gen(const char *root) { return key_format("%sgen", root); }

store_key_t key_lineage_joiners(const char *root) { return key_format("%sjoiners", root); }

store_key_t key_lineage_served(const char *root) { return key_format("%sserved", root); }

store_key_t key_lineage_ticket(const char *root, int64_t ticket) {
  return key_format("%sticket/%" PRId64, root, ticket);
}

bool key_generation_prefix(const char *root, int64_t gen, char *out, size_t cap) {
  int len = snprintf(out, cap, "%sG%" PRId64 "/", root, gen);
  return len >= 0 && (size_t)len < cap;
}
