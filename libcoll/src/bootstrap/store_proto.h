/* Wire format of the TCP store (docs/store-protocol.md): frame layout, operation codes and
 * the pure parsing and encoding functions shared by server, client and the fuzz target. */
#ifndef COLL_BOOTSTRAP_STORE_PROTO_H
#define COLL_BOOTSTRAP_STORE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_PROTO_VERSION 1u
#define STORE_HEADER_SIZE 16u
/* Most keys one wait/check may name, and the most bytes such a key list may take. */
#define STORE_KEYS_MAX 65536u
#define STORE_KEYLIST_BODY_MAX (16u * 1024u * 1024u)
/* Longest job token and longest error message carried in a frame. */
#define STORE_TOKEN_MAX 1024u
#define STORE_MESSAGE_MAX 1024u
/* Most arguments of an OK reply (compare_set answers with the current value). */
#define STORE_REPLY_ARGS_MAX 3u

/* Request operation codes (byte 1 of a request header). */
typedef enum {
  STORE_OP_HELLO = 1,
  STORE_OP_SET = 2,
  STORE_OP_GET = 3,
  STORE_OP_ADD = 4,
  STORE_OP_COMPARE_SET = 5,
  STORE_OP_WAIT = 6,
  STORE_OP_DELETE = 7,
  STORE_OP_NUM_KEYS = 8,
  STORE_OP_CHECK = 9,
  STORE_OP_END /* one past the last code */
} store_op_t;

/* Reply status codes (byte 1 of a reply header). Every status but OK carries exactly one
 * argument: a human-readable message. */
typedef enum {
  STORE_REPLY_OK = 0,
  STORE_REPLY_TIMEOUT = 1,
  STORE_REPLY_REFUSED = 2,
  STORE_REPLY_INVALID = 3,
  STORE_REPLY_PROTOCOL = 4,
  STORE_REPLY_END
} store_reply_t;

/* compare_set request: the expected state is "key absent" (the expected argument is empty).
 * compare_set reply: the key is absent after the call (the value argument is empty). */
#define STORE_FLAG_ABSENT 0x01u
/* set request: the key belongs to this connection and is deleted when it closes (a
 * process that dies loses its keys: how the elastic agreement sees a dead rank). */
#define STORE_FLAG_OWNED 0x02u

typedef struct {
  uint8_t version;
  uint8_t code; /* store_op_t in a request, store_reply_t in a reply */
  uint8_t flags;
  uint8_t reserved;
  uint32_t nargs;
  uint32_t timeout_ms; /* get/wait: how long the server may park the request */
  uint32_t body_len;
} store_header_t;

/* One argument: a view into the frame's body. */
typedef struct {
  const uint8_t *data;
  uint32_t len;
} store_arg_t;

/* Size limits a parser enforces (the server's; the client learns them from the hello). */
typedef struct {
  uint32_t key_max;
  uint32_t value_max;
} store_limits_t;

typedef enum {
  STORE_PARSE_BAD = -1,
  STORE_PARSE_OK = 0,
  STORE_PARSE_NEED_MORE = 1,
} store_parse_t;

/* Resumable position of a body scan, so bytes arriving in pieces are checked as they come
 * (an oversized argument is refused as soon as its length prefix arrives). Zero-initialise. */
typedef struct {
  size_t offset;
  uint32_t index;
} store_scan_t;

/* Decode and validate a header from the first `len` bytes of buf. NEED_MORE until
 * STORE_HEADER_SIZE bytes are there; BAD with *why (a static string) when the version,
 * code, flags, argument count or body length cannot be right for the operation. */
store_parse_t store_proto_header(const uint8_t *buf, size_t len, bool reply,
                                 const store_limits_t *limits, store_header_t *header,
                                 const char **why);

/* Scan the `have` bytes of a body received so far (have <= header->body_len), resuming at
 * *scan. Returns NEED_MORE while every complete argument prefix is valid but the body is
 * incomplete, OK once the body is complete and its arguments fill it exactly, BAD with *why
 * otherwise. When args is not NULL (capacity header->nargs) and the result is OK, it holds
 * every argument; pass a fresh scan to fill it. */
store_parse_t store_proto_body(const store_header_t *header, bool reply, const uint8_t *body,
                               size_t have, const store_limits_t *limits, store_scan_t *scan,
                               store_arg_t *args, const char **why);

/* Parse one whole frame in buf (header and body). On OK *frame_len is its size and args
 * (capacity args_cap) its arguments; BAD also when nargs > args_cap. For the fuzz target and
 * tests. */
store_parse_t store_proto_frame(const uint8_t *buf, size_t len, bool reply,
                                const store_limits_t *limits, store_header_t *header,
                                store_arg_t *args, size_t args_cap, size_t *frame_len,
                                const char **why);

/* Bytes needed to encode a frame with these argument lengths. */
size_t store_proto_frame_size(const uint32_t *lens, uint32_t nargs);
/* Encode header and arguments into out (store_proto_frame_size bytes); header->nargs and
 * header->body_len are filled in here. Returns the number of bytes written. */
size_t store_proto_encode(uint8_t *out, store_header_t *header, const store_arg_t *args,
                          uint32_t nargs);

/* Little-endian helpers for fixed-size arguments (int64 deltas and counters, limits). */
void store_put_u32(uint8_t *p, uint32_t v);
uint32_t store_get_u32(const uint8_t *p);
void store_put_i64(uint8_t *p, int64_t v);
int64_t store_get_i64(const uint8_t *p);

/* "set", "get", ... for log lines; "op?" for unknown codes. */
const char *store_op_name(unsigned code);

#endif
