/* Checkpoints: header, parameters and optimizer state in one file with a CRC-32 trailer,
 * written to <path>.tmp, fsync'ed and renamed over <path>, so a crash leaves either the
 * old or the new checkpoint, never half of one. Numbers are in host byte order. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "error.h"

static const char MAGIC[8] = {'L', 'T', 'C', 'K', 'P', 'T', '0', '1'};

/* Fixed part of the file after the magic: header fields, then the sizes. */
typedef struct {
  train_ckpt_header_t hdr;
  uint64_t n_params;
  uint32_t n_state;
} fixed_t;

static train_status_t write_all(int fd, const void *buf, size_t n, uLong *crc, const char *path) {
  const char *p = buf;
  *crc = crc32(*crc, buf, (uInt)n);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return train_error(TRAIN_ERR_IO, "%s: write: %s", path, strerror(errno));
    p += w;
    n -= (size_t)w;
  }
  return TRAIN_OK;
}

train_status_t train_checkpoint_write(const char *path, const train_ckpt_header_t *hdr,
                                      const float *params, size_t n_params, float *const *state,
                                      int n_state) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return train_error(TRAIN_ERR_INVALID, "checkpoint path too long");
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return train_error(TRAIN_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
  fixed_t fixed;
  memset(&fixed, 0, sizeof fixed); /* padding bytes go into the CRC: make them zero */
  fixed.hdr = *hdr;
  fixed.n_params = n_params;
  fixed.n_state = (uint32_t)n_state;
  uLong crc = crc32(0L, Z_NULL, 0);
  train_status_t st = write_all(fd, MAGIC, sizeof MAGIC, &crc, tmp);
  if (st == TRAIN_OK) st = write_all(fd, &fixed, sizeof fixed, &crc, tmp);
  if (st == TRAIN_OK) st = write_all(fd, params, n_params * sizeof(float), &crc, tmp);
  for (int i = 0; st == TRAIN_OK && i < n_state; i++)
    st = write_all(fd, state[i], n_params * sizeof(float), &crc, tmp);
  uint32_t trailer = (uint32_t)crc;
  uLong ignored = 0;
  if (st == TRAIN_OK) st = write_all(fd, &trailer, sizeof trailer, &ignored, tmp);
  if (st == TRAIN_OK && fsync(fd) != 0)
    st = train_error(TRAIN_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
  if (close(fd) != 0 && st == TRAIN_OK)
    st = train_error(TRAIN_ERR_IO, "%s: close: %s", tmp, strerror(errno));
  if (st == TRAIN_OK && rename(tmp, path) != 0)
    st = train_error(TRAIN_ERR_IO, "rename %s -> %s: %s", tmp, path, strerror(errno));
  if (st != TRAIN_OK) {
    unlink(tmp);
    return st;
  }
  /* The rename itself is durable only once the directory is synced. */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return TRAIN_OK;
}

static train_status_t read_exact(FILE *f, void *buf, size_t n, uLong *crc, const char *path,
                                 const char *what) {
  if (fread(buf, 1, n, f) != n)
    return train_error(TRAIN_ERR_FORMAT, "%s: truncated checkpoint (in the %s)", path, what);
  if (crc != NULL) *crc = crc32(*crc, buf, (uInt)n);
  return TRAIN_OK;
}

static train_status_t read_fixed(FILE *f, const char *path, fixed_t *fixed, uLong *crc) {
  char magic[sizeof MAGIC];
  train_status_t st = read_exact(f, magic, sizeof magic, crc, path, "magic");
  if (st != TRAIN_OK) return st;
  if (memcmp(magic, MAGIC, sizeof MAGIC) != 0)
    return train_error(TRAIN_ERR_FORMAT, "%s: not a libtrain checkpoint (bad magic)", path);
  st = read_exact(f, fixed, sizeof *fixed, crc, path, "header");
  if (st == TRAIN_OK && (fixed->n_state > 2 || fixed->hdr.n_layers > TRAIN_MAX_HIDDEN + 1))
    st = train_error(TRAIN_ERR_FORMAT, "%s: corrupt checkpoint header", path);
  return st;
}

train_status_t train_checkpoint_peek(const char *path, train_ckpt_header_t *hdr, size_t *n_params,
                                     int *n_state) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return train_error(TRAIN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  fixed_t fixed;
  train_status_t st = read_fixed(f, path, &fixed, NULL);
  fclose(f);
  if (st != TRAIN_OK) return st;
  if (hdr != NULL) *hdr = fixed.hdr;
  if (n_params != NULL) *n_params = fixed.n_params;
  if (n_state != NULL) *n_state = (int)fixed.n_state;
  return TRAIN_OK;
}

train_status_t train_checkpoint_read(const char *path, train_ckpt_header_t *hdr, float *params,
                                     size_t n_params, float *const *state, int n_state) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return train_error(TRAIN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  uLong crc = crc32(0L, Z_NULL, 0);
  fixed_t fixed;
  float *scratch = NULL;
  train_status_t st = read_fixed(f, path, &fixed, &crc);
  if (st != TRAIN_OK) goto done;
  if (fixed.n_params != n_params || (int)fixed.n_state != n_state) {
    st = train_error(TRAIN_ERR_FORMAT,
                     "%s: checkpoint of another model or optimizer (%llu parameters and %u "
                     "state arrays; this run has %zu and %d)",
                     path, (unsigned long long)fixed.n_params, fixed.n_state, n_params, n_state);
    goto done;
  }
  /* Read into scratch first: a corrupt file must not leave half-loaded parameters. */
  size_t floats = n_params * (1 + (size_t)n_state);
  scratch = malloc(floats * sizeof(float));
  if (scratch == NULL) {
    st = train_error(TRAIN_ERR_NO_MEMORY, "%s: cannot allocate %zu floats", path, floats);
    goto done;
  }
  st = read_exact(f, scratch, floats * sizeof(float), &crc, path, "parameters");
  uint32_t trailer;
  if (st == TRAIN_OK) st = read_exact(f, &trailer, sizeof trailer, NULL, path, "checksum");
  if (st == TRAIN_OK && trailer != (uint32_t)crc)
    st = train_error(TRAIN_ERR_FORMAT, "%s: checksum mismatch: the checkpoint is corrupt", path);
  if (st == TRAIN_OK && fgetc(f) != EOF)
    st = train_error(TRAIN_ERR_FORMAT, "%s: unexpected bytes after the checkpoint", path);
  if (st != TRAIN_OK) goto done;
  if (hdr != NULL) *hdr = fixed.hdr;
  if (params != NULL) memcpy(params, scratch, n_params * sizeof(float));
  for (int i = 0; i < n_state; i++)
    if (state != NULL && state[i] != NULL)
      memcpy(state[i], scratch + n_params * (size_t)(i + 1), n_params * sizeof(float));
done:
  free(scratch);
  fclose(f);
  return st;
}
