/* Rank output: whole lines only, so that lines of different ranks never mix. collrun is
 * single-threaded and is the only writer of its stdout and stderr, so writing each batch
 * of whole lines with write() is enough to keep them intact. */
#include "output.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
  PREFIX_MAX = 16, /* "[2147483647] " */
  SCRATCH_CAP = 2 * OUTPUT_LINE_MAX,
  WRITE_STALL_MS = 10000, /* a reader that takes no output for this long loses it */
};

bool output_sink_init(output_sink_t *sink, bool prefix) {
  *sink = (output_sink_t){.prefix = prefix, .scratch = malloc(SCRATCH_CAP), .cap = SCRATCH_CAP};
  return sink->scratch != NULL;
}

void output_sink_free(output_sink_t *sink) {
  free(sink->scratch);
  sink->scratch = NULL;
}

/* Write everything, waiting (bounded) if the descriptor was left non-blocking by whoever
 * started collrun. A reader that went away marks the stream broken; the job goes on. */
static void write_all(output_sink_t *sink, int fd, const char *data, size_t len) {
  while (len > 0 && !sink->broken[fd]) {
    ssize_t n = write(fd, data, len);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      if (poll(&pfd, 1, WRITE_STALL_MS) <= 0) sink->broken[fd] = true;
    } else {
      sink->broken[fd] = true;
    }
  }
}

static void sink_flush(output_sink_t *sink, int fd) {
  if (sink->len > 0) write_all(sink, fd, sink->scratch, sink->len);
  sink->len = 0;
}

static void tail_add(output_tail_t *tail, const char *line, size_t len) {
  while (len > 0 && line[len - 1] == '\r') len--;
  if (len > OUTPUT_TAIL_WIDTH - 1) len = OUTPUT_TAIL_WIDTH - 1;
  char *dst = tail->lines[tail->next];
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)line[i];
    /* The failure message is one line: no control characters from the rank in it. */
    dst[i] = (ch < 0x20 && ch != '\t') || ch == 0x7f ? '?' : (char)ch;
  }
  dst[len] = '\0';
  tail->next = (tail->next + 1) % OUTPUT_TAIL_LINES;
  if (tail->count < OUTPUT_TAIL_LINES) tail->count++;
}

/* One line without its newline: prefix + line + '\n' into the sink. */
static void emit_line(output_stream_t *stream, output_sink_t *sink, output_tail_t *tail,
                      const char *line, size_t len) {
  tail_add(tail, line, len);
  if (sink->len + PREFIX_MAX + len + 1 > sink->cap) sink_flush(sink, stream->out_fd);
  if (sink->prefix)
    sink->len += (size_t)snprintf(sink->scratch + sink->len, PREFIX_MAX, "[%d] ", stream->rank);
  memcpy(sink->scratch + sink->len, line, len);
  sink->len += len;
  sink->scratch[sink->len++] = '\n';
}

/* An unfinished last line is still a line: write it with a newline. */
static void flush_partial(output_stream_t *stream, output_sink_t *sink, output_tail_t *tail) {
  if (stream->len == 0) return;
  emit_line(stream, sink, tail, stream->buf, stream->len);
  stream->len = 0;
  sink_flush(sink, stream->out_fd);
}

bool output_stream_init(output_stream_t *stream, int fd, int out_fd, int rank) {
  *stream =
      (output_stream_t){.fd = fd, .out_fd = out_fd, .rank = rank, .buf = malloc(OUTPUT_LINE_MAX)};
  return stream->buf != NULL;
}

output_read_t output_stream_read(output_stream_t *stream, output_sink_t *sink,
                                 output_tail_t *tail) {
  if (stream->fd < 0) return OUTPUT_EOF;
  ssize_t n;
  do {
    n = read(stream->fd, stream->buf + stream->len, OUTPUT_LINE_MAX - stream->len);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return OUTPUT_AGAIN;
  if (n <= 0) { /* EOF, or an error that makes the pipe useless: the same to us */
    flush_partial(stream, sink, tail);
    return OUTPUT_EOF;
  }
  size_t scanned = stream->len; /* bytes before it were already searched */
  stream->len += (size_t)n;
  size_t start = 0;
  for (char *nl; (nl = memchr(stream->buf + scanned, '\n', stream->len - scanned)) != NULL;) {
    size_t end = (size_t)(nl - stream->buf);
    emit_line(stream, sink, tail, stream->buf + start, end - start);
    start = scanned = end + 1;
  }
  if (start == 0 && stream->len == OUTPUT_LINE_MAX) { /* no newline in a full buffer: cut */
    emit_line(stream, sink, tail, stream->buf, stream->len);
    start = stream->len;
  }
  memmove(stream->buf, stream->buf + start, stream->len - start);
  stream->len -= start;
  sink_flush(sink, stream->out_fd);
  return OUTPUT_DATA;
}

void output_stream_drain(output_stream_t *stream, output_sink_t *sink, output_tail_t *tail) {
  while (output_stream_read(stream, sink, tail) == OUTPUT_DATA) {
  }
}

void output_stream_close(output_stream_t *stream, output_sink_t *sink, output_tail_t *tail) {
  flush_partial(stream, sink, tail);
  if (stream->fd >= 0) close(stream->fd);
  stream->fd = -1;
  free(stream->buf);
  stream->buf = NULL;
}

void output_tail_format(const output_tail_t *tail, char *dst, size_t cap) {
  if (cap == 0) return;
  dst[0] = '\0';
  if (tail->count == 0) {
    snprintf(dst, cap, "(no output)");
    return;
  }
  size_t used = 0;
  int first = (tail->next - tail->count + OUTPUT_TAIL_LINES) % OUTPUT_TAIL_LINES;
  for (int i = 0; i < tail->count && used < cap; i++) {
    const char *line = tail->lines[(first + i) % OUTPUT_TAIL_LINES];
    int n = snprintf(dst + used, cap - used, "%s%s", i == 0 ? "" : " | ", line);
    if (n < 0) break;
    used += (size_t)n;
  }
}
