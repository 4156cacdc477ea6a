/* Slurm host-list parsing: each item is split into literal text and bracket groups, and
 * the n-th host is found by mixed-radix counting over the groups, so a list of a million
 * hosts costs nothing to check and "the first host" never expands the rest. */
#include "launch/hostlist.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

enum {
  MAX_GROUPS = 8,  /* bracket groups in one item */
  MAX_DIGITS = 18, /* fits in uint64_t with room to add one */
};

/* One bracket group: the text between "[" and "]" and how many numbers it names. */
typedef struct {
  size_t open;  /* index of "[" in the list */
  size_t close; /* index of "]" */
  uint64_t count;
} group_t;

typedef struct {
  size_t start, end; /* [start, end) in the list */
  group_t groups[MAX_GROUPS];
  int ngroups;
  uint64_t count;
} item_t;

/* One "lo" or "lo-hi" range inside brackets. */
typedef struct {
  uint64_t lo, hi;
  int width; /* digits of lo: the zero-padding of every number of the range */
} range_t;

static coll_status_t malformed(const char *list, size_t pos, const char *why) {
  return coll_error(COLL_ERR_INVALID_ARGUMENT,
                    "malformed host list '%.120s%s': %s at character %zu", list,
                    strlen(list) > 120 ? "..." : "", why, pos + 1);
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Digits at list[*pos]; advances *pos. */
static coll_status_t parse_number(const char *list, size_t *pos, uint64_t *value, int *width) {
  size_t p = *pos;
  uint64_t v = 0;
  int n = 0;
  while (is_digit(list[p])) {
    if (++n > MAX_DIGITS) return malformed(list, p, "number too long in brackets");
    v = v * 10 + (uint64_t)(list[p] - '0');
    p++;
  }
  if (n == 0)
    return list[p] == '\0' ? malformed(list, p, "'[' is never closed")
                           : malformed(list, p, "expected a number in brackets");
  *pos = p;
  *value = v;
  *width = n;
  return COLL_OK;
}

/* One range starting at list[*pos]; stops before "," or "]". */
static coll_status_t parse_range(const char *list, size_t *pos, range_t *r) {
  coll_status_t st = parse_number(list, pos, &r->lo, &r->width);
  if (st != COLL_OK) return st;
  r->hi = r->lo;
  if (list[*pos] == '-') {
    (*pos)++;
    int hi_width;
    size_t hi_at = *pos;
    st = parse_number(list, pos, &r->hi, &hi_width);
    if (st != COLL_OK) return st;
    if (r->hi < r->lo) return malformed(list, hi_at, "range goes down");
  }
  if (list[*pos] != ',' && list[*pos] != ']')
    return list[*pos] == '\0' ? malformed(list, *pos, "'[' is never closed")
                              : malformed(list, *pos, "unexpected character in brackets");
  return COLL_OK;
}

/* The group whose "[" is at list[*pos]; leaves *pos after its "]". */
static coll_status_t parse_group(const char *list, size_t *pos, group_t *g) {
  g->open = *pos;
  g->count = 0;
  size_t p = *pos + 1;
  if (list[p] == ']') return malformed(list, p, "empty brackets");
  for (;;) {
    range_t r = {0}; /* set by parse_range; zeroed for gcc -O3 maybe-uninitialized */
    coll_status_t st = parse_range(list, &p, &r);
    if (st != COLL_OK) return st;
    g->count += r.hi - r.lo + 1;
    if (g->count > HOSTLIST_MAX) return malformed(list, p, "more hosts than the limit");
    if (list[p] == ']') break;
    p++; /* "," */
  }
  g->close = p;
  *pos = p + 1;
  return COLL_OK;
}

/* The item starting at list[*pos]; leaves *pos at the "," or NUL after it. */
static coll_status_t parse_item(const char *list, size_t *pos, item_t *it) {
  memset(it, 0, sizeof *it);
  it->start = *pos;
  it->count = 1;
  size_t p = *pos;
  while (list[p] != '\0' && list[p] != ',') {
    char c = list[p];
    if (c == '[') {
      if (it->ngroups == MAX_GROUPS) return malformed(list, p, "too many bracket groups");
      group_t *g = &it->groups[it->ngroups++];
      coll_status_t st = parse_group(list, &p, g);
      if (st != COLL_OK) return st;
      it->count *= g->count; /* both <= HOSTLIST_MAX: no overflow */
      if (it->count > HOSTLIST_MAX) return malformed(list, p - 1, "more hosts than the limit");
    } else if (c == ']') {
      return malformed(list, p, "']' without '['");
    } else if ((unsigned char)c <= ' ' || c == 0x7f) {
      return malformed(list, p, "space or control character");
    } else {
      p++;
    }
  }
  if (p == it->start) return malformed(list, p, "empty host name");
  it->end = p;
  *pos = p;
  return COLL_OK;
}

/* Checks every item of the list and adds up their hosts. */
static coll_status_t walk(const char *list, uint64_t *total) {
  if (list == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "host list is NULL");
  if (list[0] == '\0') return coll_error(COLL_ERR_INVALID_ARGUMENT, "host list is empty");
  size_t pos = 0;
  *total = 0;
  for (;;) {
    item_t it;
    coll_status_t st = parse_item(list, &pos, &it);
    if (st != COLL_OK) return st;
    *total += it.count;
    if (*total > HOSTLIST_MAX) return malformed(list, pos, "more hosts than the limit");
    if (list[pos] == '\0') return COLL_OK;
    pos++; /* "," */
  }
}

coll_status_t hostlist_count(const char *list, size_t *count) {
  uint64_t total;
  coll_status_t st = walk(list, &total);
  if (st != COLL_OK) return st;
  *count = (size_t)total;
  return COLL_OK;
}

/* The index-th number (from 0) named by group g, with its zero-padding width. */
static void group_number(const char *list, const group_t *g, uint64_t index, uint64_t *value,
                         int *width) {
  size_t p = g->open + 1;
  for (;;) {
    range_t r = {0}; /* set by parse_range; zeroed for gcc -O3 maybe-uninitialized */
    coll_status_t st = parse_range(list, &p, &r);
    (void)st; /* the list was checked by walk() */
    uint64_t n = r.hi - r.lo + 1;
    if (index < n) {
      *value = r.lo + index;
      *width = r.width;
      return;
    }
    index -= n;
    p++;
  }
}

/* Write host `index` of item `it` into out[cap]. */
static coll_status_t item_name(const char *list, const item_t *it, uint64_t index, char *out,
                               size_t cap) {
  uint64_t digit[MAX_GROUPS];
  for (int g = it->ngroups - 1; g >= 0; g--) { /* rightmost group varies fastest */
    digit[g] = index % it->groups[g].count;
    index /= it->groups[g].count;
  }
  size_t len = 0;
  size_t p = it->start;
  char piece[HOSTLIST_NAME_MAX];
  for (int g = 0; g <= it->ngroups; g++) {
    size_t lit_end = g < it->ngroups ? it->groups[g].open : it->end;
    int n = snprintf(piece, sizeof piece, "%.*s", (int)(lit_end - p), list + p);
    if (g < it->ngroups) {
      uint64_t value;
      int width;
      group_number(list, &it->groups[g], digit[g], &value, &width);
      if (n >= 0 && (size_t)n < sizeof piece)
        n += snprintf(piece + n, sizeof piece - (size_t)n, "%0*llu", width,
                      (unsigned long long)value);
      p = it->groups[g].close + 1;
    }
    if (n < 0 || (size_t)n >= sizeof piece || len + (size_t)n >= cap ||
        len + (size_t)n >= HOSTLIST_NAME_MAX)
      return malformed(list, it->start, "host name too long");
    memcpy(out + len, piece, (size_t)n);
    len += (size_t)n;
    out[len] = '\0';
  }
  return COLL_OK;
}

coll_status_t hostlist_nth(const char *list, size_t index, char *out, size_t cap) {
  if (out == NULL || cap == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "hostlist_nth: no output buffer");
  out[0] = '\0';
  uint64_t total;
  coll_status_t st = walk(list, &total);
  if (st != COLL_OK) return st;
  if (index >= total)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "host list '%.120s' has %llu hosts, not %zu", list,
                      (unsigned long long)total, index + 1);
  size_t pos = 0;
  uint64_t left = index;
  for (;;) {
    item_t it;
    st = parse_item(list, &pos, &it);
    if (st != COLL_OK) return st;
    if (left < it.count) return item_name(list, &it, left, out, cap);
    left -= it.count;
    pos++;
  }
}
