/* Rank output: reassemble each rank's stdout and stderr into whole lines, write them to
 * collrun's own stdout and stderr with a "[RANK] " prefix, and keep each rank's last lines
 * for the failure message. */
#ifndef TOOLS_COLLRUN_OUTPUT_H
#define TOOLS_COLLRUN_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

enum {
  OUTPUT_LINE_MAX = 64 * 1024, /* longer lines are cut into pieces of this size */
  OUTPUT_TAIL_LINES = 5,
  OUTPUT_TAIL_WIDTH = 200, /* bytes kept of each tail line */
};

/* Where lines go: collrun's stdout or stderr, with or without prefixes. One per job; it
 * batches the lines of one read into as few write() calls as fit its buffer. */
typedef struct {
  bool prefix;
  char *scratch;
  size_t len;
  size_t cap;
  bool broken[3]; /* a write to fd 1 or 2 failed (closed pipe): drop that stream's output */
} output_sink_t;

/* The last lines a rank printed, stdout and stderr together, in arrival order. */
typedef struct {
  char lines[OUTPUT_TAIL_LINES][OUTPUT_TAIL_WIDTH];
  int next;
  int count;
} output_tail_t;

/* One pipe from a rank (its stdout or its stderr). */
typedef struct {
  int fd;     /* read end, non-blocking; -1 once closed */
  int out_fd; /* STDOUT_FILENO or STDERR_FILENO */
  int rank;   /* global rank, for the prefix */
  char *buf;  /* the unfinished line */
  size_t len;
} output_stream_t;

typedef enum {
  OUTPUT_DATA,  /* read some bytes */
  OUTPUT_AGAIN, /* nothing to read now */
  OUTPUT_EOF,   /* the writer closed the pipe: close the stream (output_stream_close) */
} output_read_t;

bool output_sink_init(output_sink_t *sink, bool prefix);
void output_sink_free(output_sink_t *sink);

/* Take ownership of the non-blocking read end fd. */
bool output_stream_init(output_stream_t *stream, int fd, int out_fd, int rank);
/* One read(); whole lines are written out and added to the tail. At EOF an unfinished
 * last line is written out too. */
output_read_t output_stream_read(output_stream_t *stream, output_sink_t *sink, output_tail_t *tail);
/* Read until the pipe is empty or at EOF (a rank that exited has written everything). */
void output_stream_drain(output_stream_t *stream, output_sink_t *sink, output_tail_t *tail);
/* Write out an unfinished last line (with a newline), close the fd, free the buffer. */
void output_stream_close(output_stream_t *stream, output_sink_t *sink, output_tail_t *tail);

/* The tail as one line: "a | b | c", or "(no output)". */
void output_tail_format(const output_tail_t *tail, char *dst, size_t cap);

#endif
