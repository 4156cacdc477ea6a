/* Pure parsing and encoding of store frames: no I/O, no allocation, no global state, so the
 * server, the client and the libFuzzer target (fuzz/store_frame_fuzz.c) share one parser. */
#include "bootstrap/store_proto.h"

#include <string.h>

/* What one argument position holds; decides its length limits. */
typedef enum { ARG_KEY, ARG_VALUE, ARG_I64, ARG_TOKEN, ARG_MESSAGE } arg_kind_t;

typedef struct {
  const char *name;
  uint32_t min_args;
  uint32_t max_args;
  uint8_t flags_allowed;
} op_rule_t;

static const op_rule_t op_rules[STORE_OP_END] = {
    [STORE_OP_HELLO] = {.name = "hello", .min_args = 1, .max_args = 1},
    [STORE_OP_SET] = {.name = "set", .min_args = 2, .max_args = 2,
                      .flags_allowed = STORE_FLAG_OWNED},
    [STORE_OP_GET] = {.name = "get", .min_args = 1, .max_args = 1},
    [STORE_OP_ADD] = {.name = "add", .min_args = 2, .max_args = 2},
    [STORE_OP_COMPARE_SET] = {.name = "compare_set",
                              .min_args = 3,
                              .max_args = 3,
                              .flags_allowed = STORE_FLAG_ABSENT},
    [STORE_OP_WAIT] = {.name = "wait", .min_args = 1, .max_args = STORE_KEYS_MAX},
    [STORE_OP_DELETE] = {.name = "delete", .min_args = 1, .max_args = 1},
    [STORE_OP_NUM_KEYS] = {.name = "num_keys", .min_args = 0, .max_args = 0},
    [STORE_OP_CHECK] = {.name = "check", .min_args = 1, .max_args = STORE_KEYS_MAX},
};

const char *store_op_name(unsigned code) {
  if (code == 0 || code >= STORE_OP_END) return "op?";
  return op_rules[code].name;
}

void store_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t store_get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void store_put_i64(uint8_t *p, int64_t v) {
  uint64_t u = (uint64_t)v;
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(u >> (8 * i));
}

int64_t store_get_i64(const uint8_t *p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u |= (uint64_t)p[i] << (8 * i);
  return (int64_t)u;
}

static arg_kind_t arg_kind(const store_header_t *h, bool reply, uint32_t index) {
  if (reply) return h->code == STORE_REPLY_OK ? ARG_VALUE : ARG_MESSAGE;
  switch (h->code) {
    case STORE_OP_HELLO:
      return ARG_TOKEN;
    case STORE_OP_SET:
      return index == 0 ? ARG_KEY : ARG_VALUE;
    case STORE_OP_ADD:
      return index == 0 ? ARG_KEY : ARG_I64;
    case STORE_OP_COMPARE_SET:
      return index == 0 ? ARG_KEY : ARG_VALUE;
    default:
      return ARG_KEY;
  }
}

static uint32_t arg_min(arg_kind_t kind) {
  switch (kind) {
    case ARG_KEY:
      return 1;
    case ARG_I64:
      return 8;
    default:
      return 0;
  }
}

static uint32_t arg_max(arg_kind_t kind, const store_limits_t *limits) {
  switch (kind) {
    case ARG_KEY:
      return limits->key_max;
    case ARG_VALUE:
      return limits->value_max;
    case ARG_I64:
      return 8;
    case ARG_TOKEN:
      return STORE_TOKEN_MAX;
    case ARG_MESSAGE:
      return STORE_MESSAGE_MAX;
  }
  return 0;
}

static store_parse_t bad(const char **why, const char *reason) {
  if (why != NULL) *why = reason;
  return STORE_PARSE_BAD;
}

static store_parse_t check_request_header(const store_header_t *h, const store_limits_t *limits,
                                          const char **why) {
  if (h->code == 0 || h->code >= STORE_OP_END) return bad(why, "unknown operation code");
  const op_rule_t *rule = &op_rules[h->code];
  if ((h->flags & ~rule->flags_allowed) != 0)
    return bad(why, "flags not allowed for this operation");
  if (h->nargs < rule->min_args || h->nargs > rule->max_args)
    return bad(why, "wrong number of arguments for this operation");
  uint64_t min_body = 0;
  uint64_t max_body = 0;
  for (uint32_t i = 0; i < h->nargs && i < 3; i++) {
    arg_kind_t kind = arg_kind(h, false, i);
    min_body += 4u + arg_min(kind);
    max_body += 4u + (uint64_t)arg_max(kind, limits);
  }
  if (h->nargs > 3) { /* key lists: every key has the same bounds */
    min_body = (uint64_t)h->nargs * (4u + arg_min(ARG_KEY));
    max_body = (uint64_t)h->nargs * (4u + (uint64_t)limits->key_max);
    if (max_body > STORE_KEYLIST_BODY_MAX) max_body = STORE_KEYLIST_BODY_MAX;
  }
  if (h->body_len < min_body) return bad(why, "body too short for its arguments");
  if (h->body_len > max_body) return bad(why, "body longer than the limits allow");
  return STORE_PARSE_OK;
}

static store_parse_t check_reply_header(const store_header_t *h, const store_limits_t *limits,
                                        const char **why) {
  if (h->code >= STORE_REPLY_END) return bad(why, "unknown reply status");
  if ((h->flags & ~STORE_FLAG_ABSENT) != 0) return bad(why, "unknown reply flags");
  if (h->timeout_ms != 0) return bad(why, "reply timeout field not zero");
  uint32_t max_args = h->code == STORE_REPLY_OK ? STORE_REPLY_ARGS_MAX : 1;
  uint32_t min_args = h->code == STORE_REPLY_OK ? 0 : 1;
  if (h->nargs < min_args || h->nargs > max_args)
    return bad(why, "wrong number of reply arguments");
  uint64_t per_arg = 4u + (uint64_t)arg_max(arg_kind(h, true, 0), limits);
  if (h->body_len < 4ull * h->nargs) return bad(why, "body too short for its arguments");
  if (h->body_len > per_arg * h->nargs) return bad(why, "body longer than the limits allow");
  return STORE_PARSE_OK;
}

store_parse_t store_proto_header(const uint8_t *buf, size_t len, bool reply,
                                 const store_limits_t *limits, store_header_t *header,
                                 const char **why) {
  if (len < 1) return STORE_PARSE_NEED_MORE;
  /* The version is judged on the first byte, so a peer speaking something else entirely
   * is turned away before we wait for a whole header from it. */
  if (buf[0] != STORE_PROTO_VERSION) return bad(why, "unsupported protocol version");
  if (len < STORE_HEADER_SIZE) return STORE_PARSE_NEED_MORE;
  store_header_t h = {
      .version = buf[0],
      .code = buf[1],
      .flags = buf[2],
      .reserved = buf[3],
      .nargs = store_get_u32(buf + 4),
      .timeout_ms = store_get_u32(buf + 8),
      .body_len = store_get_u32(buf + 12),
  };
  if (h.reserved != 0) return bad(why, "reserved header byte not zero");
  store_parse_t rc =
      reply ? check_reply_header(&h, limits, why) : check_request_header(&h, limits, why);
  if (rc != STORE_PARSE_OK) return rc;
  *header = h;
  return STORE_PARSE_OK;
}

store_parse_t store_proto_body(const store_header_t *header, bool reply, const uint8_t *body,
                               size_t have, const store_limits_t *limits, store_scan_t *scan,
                               store_arg_t *args, const char **why) {
  if (have > header->body_len) return bad(why, "more body bytes than the header announced");
  while (scan->index < header->nargs) {
    size_t left_in_body = header->body_len - scan->offset;
    if (left_in_body < 4) return bad(why, "argument runs past the end of the body");
    if (have - scan->offset < 4) return STORE_PARSE_NEED_MORE;
    uint32_t len = store_get_u32(body + scan->offset);
    arg_kind_t kind = arg_kind(header, reply, scan->index);
    if (len < arg_min(kind)) return bad(why, "argument shorter than allowed");
    if (len > arg_max(kind, limits)) {
      return bad(why, kind == ARG_KEY     ? "key longer than the limit"
                      : kind == ARG_VALUE ? "value longer than the limit"
                                          : "argument longer than the limit");
    }
    if (len > left_in_body - 4) return bad(why, "argument runs past the end of the body");
    if (have - scan->offset - 4 < len) return STORE_PARSE_NEED_MORE;
    const uint8_t *data = body + scan->offset + 4;
    if (kind == ARG_KEY && memchr(data, '\0', len) != NULL)
      return bad(why, "key contains a NUL byte");
    if (!reply && header->code == STORE_OP_COMPARE_SET && scan->index == 1 &&
        (header->flags & STORE_FLAG_ABSENT) && len != 0)
      return bad(why, "compare_set expects an absent key but carries an expected value");
    if (args != NULL) args[scan->index] = (store_arg_t){.data = data, .len = len};
    scan->offset += 4u + (size_t)len;
    scan->index++;
  }
  if (scan->offset != header->body_len) return bad(why, "bytes left over after the last argument");
  return have == header->body_len ? STORE_PARSE_OK : STORE_PARSE_NEED_MORE;
}

store_parse_t store_proto_frame(const uint8_t *buf, size_t len, bool reply,
                                const store_limits_t *limits, store_header_t *header,
                                store_arg_t *args, size_t args_cap, size_t *frame_len,
                                const char **why) {
  store_parse_t rc = store_proto_header(buf, len, reply, limits, header, why);
  if (rc != STORE_PARSE_OK) return rc;
  if (header->nargs > args_cap) return bad(why, "more arguments than the caller can hold");
  size_t have = len - STORE_HEADER_SIZE;
  if (have > header->body_len) have = header->body_len;
  store_scan_t scan = {0};
  rc = store_proto_body(header, reply, buf + STORE_HEADER_SIZE, have, limits, &scan, args, why);
  if (rc == STORE_PARSE_OK) *frame_len = STORE_HEADER_SIZE + (size_t)header->body_len;
  return rc;
}

size_t store_proto_frame_size(const uint32_t *lens, uint32_t nargs) {
  size_t size = STORE_HEADER_SIZE;
  for (uint32_t i = 0; i < nargs; i++) size += 4u + (size_t)lens[i];
  return size;
}

size_t store_proto_encode(uint8_t *out, store_header_t *header, const store_arg_t *args,
                          uint32_t nargs) {
  size_t off = STORE_HEADER_SIZE;
  for (uint32_t i = 0; i < nargs; i++) {
    store_put_u32(out + off, args[i].len);
    if (args[i].len > 0) memcpy(out + off + 4, args[i].data, args[i].len);
    off += 4u + (size_t)args[i].len;
  }
  header->nargs = nargs;
  header->body_len = (uint32_t)(off - STORE_HEADER_SIZE);
  out[0] = header->version;
  out[1] = header->code;
  out[2] = header->flags;
  out[3] = header->reserved;
  store_put_u32(out + 4, header->nargs);
  store_put_u32(out + 8, header->timeout_ms);
  store_put_u32(out + 12, header->body_len);
  return off;
}
