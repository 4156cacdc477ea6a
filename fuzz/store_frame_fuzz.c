/* libFuzzer target for the store's frame parser (store_proto.c): any bytes, as request or
 * reply, under small or default limits. Besides "no crash, no sanitizer report" it checks
 * that parsing in pieces agrees with parsing at once, and that a parsed frame re-encodes to
 * the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store.h"
#include "bootstrap/store_proto.h"

enum { ARGS_CAP = 64 };

#define REQUIRE(cond)     \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

/* Feed the frame as the server does: header bytes, then the body in pieces of 1..16 bytes,
 * scanning after each piece. Returns the final outcome. */
static store_parse_t parse_in_pieces(const uint8_t *buf, size_t len, bool reply,
                                     const store_limits_t *limits, uint8_t piece_seed) {
  store_header_t h;
  const char *why = NULL;
  size_t have = 0;
  store_parse_t rc = STORE_PARSE_NEED_MORE;
  while (rc == STORE_PARSE_NEED_MORE && have < len && have < STORE_HEADER_SIZE) {
    have++;
    rc = store_proto_header(buf, have, reply, limits, &h, &why);
  }
  if (rc != STORE_PARSE_OK) {
    REQUIRE(rc != STORE_PARSE_BAD || why != NULL);
    return rc;
  }
  const uint8_t *body = buf + STORE_HEADER_SIZE;
  size_t avail = len - STORE_HEADER_SIZE;
  if (avail > h.body_len) avail = h.body_len;
  store_scan_t scan = {0};
  size_t got = 0;
  size_t step = 1 + (piece_seed % 16);
  for (;;) {
    rc = store_proto_body(&h, reply, body, got, limits, &scan, NULL, &why);
    REQUIRE(scan.offset <= got && scan.index <= h.nargs);
    if (rc != STORE_PARSE_NEED_MORE || got == avail) break;
    got = got + step < avail ? got + step : avail;
  }
  REQUIRE(rc != STORE_PARSE_BAD || why != NULL);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  bool reply = (data[0] & 1) != 0;
  uint8_t piece_seed = (uint8_t)(data[0] >> 1);
  /* Small limits reach the edge cases quickly; default ones check the real configuration. */
  store_limits_t limits = {.key_max = STORE_KEY_MAX, .value_max = STORE_VALUE_MAX};
  if ((data[1] & 0x80) == 0) {
    limits.key_max = 1u + (data[1] & 0x0F);
    limits.value_max = (uint32_t)((data[1] >> 4) & 0x07) * 9u;
  }
  const uint8_t *buf = data + 2;
  size_t len = size - 2;

  store_header_t h;
  store_arg_t args[ARGS_CAP];
  size_t frame_len = 0;
  const char *why = NULL;
  store_parse_t whole =
      store_proto_frame(buf, len, reply, &limits, &h, args, ARGS_CAP, &frame_len, &why);
  REQUIRE(whole != STORE_PARSE_BAD || why != NULL);
  store_parse_t pieces = parse_in_pieces(buf, len, reply, &limits, piece_seed);
  bool too_many_args =
      whole == STORE_PARSE_BAD && strcmp(why, "more arguments than the caller can hold") == 0;
  if (!too_many_args) REQUIRE(whole == pieces);

  if (whole == STORE_PARSE_OK) {
    REQUIRE(frame_len <= len && frame_len == STORE_HEADER_SIZE + (size_t)h.body_len);
    uint32_t lens[ARGS_CAP];
    for (uint32_t i = 0; i < h.nargs; i++) {
      REQUIRE(args[i].data >= buf + STORE_HEADER_SIZE);
      REQUIRE(args[i].data + args[i].len <= buf + frame_len);
      lens[i] = args[i].len;
    }
    size_t again_len = store_proto_frame_size(lens, h.nargs);
    REQUIRE(again_len == frame_len);
    uint8_t *again = malloc(again_len);
    REQUIRE(again != NULL);
    store_header_t copy = h;
    REQUIRE(store_proto_encode(again, &copy, args, h.nargs) == frame_len);
    REQUIRE(memcmp(again, buf, frame_len) == 0);
    free(again);
  }
  return 0;
}
