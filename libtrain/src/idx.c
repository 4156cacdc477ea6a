/* IDX files (the MNIST format): big-endian header, then unsigned bytes. Read through
 * zlib, which passes plain files through unchanged, so .gz and raw files both work.
 * Every malformed input is an error naming the file and what is wrong with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "error.h"

/* Larger inputs are refused rather than trusted: a corrupt size must not make us
 * allocate gigabytes. */
#define IDX_MAX_BYTES ((size_t)1 << 31)

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read exactly n bytes; returns the count read, or -1 with *msg set on a zlib error. */
static long read_full(gzFile f, void *buf, size_t n, const char **msg) {
  size_t got = 0;
  while (got < n) {
    size_t chunk = n - got > (1u << 30) ? (1u << 30) : n - got;
    int r = gzread(f, (char *)buf + got, (unsigned)chunk);
    if (r < 0) {
      int code;
      *msg = gzerror(f, &code);
      return -1;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  return (long)got;
}

train_status_t train_idx_read(const char *path, int want_dims, uint32_t dims[3], uint8_t **data,
                              size_t *bytes) {
  *data = NULL;
  *bytes = 0;
  if (want_dims < 1 || want_dims > 3)
    return train_error(TRAIN_ERR_INVALID, "%s: asked for %d dimensions (1..3)", path, want_dims);
  gzFile f = gzopen(path, "rb");
  if (f == NULL)
    return train_error(TRAIN_ERR_IO, "%s: cannot open: %s", path,
                       errno ? strerror(errno) : "out of memory");
  train_status_t st = TRAIN_OK;
  const char *zmsg = NULL;
  unsigned char hdr[16];
  uint8_t *buf = NULL;
  long got = read_full(f, hdr, 4, &zmsg);
  if (got < 0) {
    st = train_error(TRAIN_ERR_FORMAT, "%s: corrupt compressed data: %s", path, zmsg);
    goto done;
  }
  if (got < 4) {
    st =
        train_error(TRAIN_ERR_FORMAT, "%s: truncated: %ld bytes, an IDX header needs 4", path, got);
    goto done;
  }
  if (hdr[0] != 0 || hdr[1] != 0) {
    st = train_error(TRAIN_ERR_FORMAT, "%s: not an IDX file (magic %02x%02x%02x%02x)", path, hdr[0],
                     hdr[1], hdr[2], hdr[3]);
    goto done;
  }
  if (hdr[2] != 0x08) {
    st = train_error(TRAIN_ERR_FORMAT,
                     "%s: element type 0x%02x, only unsigned bytes (0x08) are supported", path,
                     hdr[2]);
    goto done;
  }
  if (hdr[3] != want_dims) {
    st = train_error(TRAIN_ERR_FORMAT, "%s: %d dimensions, expected %d (%s)", path, hdr[3],
                     want_dims, want_dims == 1 ? "labels" : "images");
    goto done;
  }
  got = read_full(f, hdr + 4, 4 * (size_t)want_dims, &zmsg);
  if (got < 0) {
    st = train_error(TRAIN_ERR_FORMAT, "%s: corrupt compressed data: %s", path, zmsg);
    goto done;
  }
  if (got < 4 * want_dims) {
    st = train_error(TRAIN_ERR_FORMAT, "%s: truncated in the header (dimension sizes)", path);
    goto done;
  }
  size_t total = 1;
  for (int d = 0; d < want_dims; d++) {
    dims[d] = be32(hdr + 4 + 4 * d);
    if (dims[d] == 0) {
      st = train_error(TRAIN_ERR_FORMAT, "%s: dimension %d has size 0", path, d);
      goto done;
    }
    total *= dims[d];
    if (total > IDX_MAX_BYTES) {
      st = train_error(TRAIN_ERR_FORMAT, "%s: sizes claim more than %zu bytes of data", path,
                       IDX_MAX_BYTES);
      goto done;
    }
  }
  buf = malloc(total);
  if (buf == NULL) {
    st = train_error(TRAIN_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes", path, total);
    goto done;
  }
  got = read_full(f, buf, total, &zmsg);
  if (got < 0) {
    st = train_error(TRAIN_ERR_FORMAT, "%s: corrupt compressed data: %s", path, zmsg);
    goto done;
  }
  if ((size_t)got < total) {
    st = train_error(TRAIN_ERR_FORMAT,
                     "%s: truncated: the header promises %zu bytes of data, "
                     "the file has %ld",
                     path, total, got);
    goto done;
  }
  unsigned char extra;
  got = read_full(f, &extra, 1, &zmsg);
  if (got != 0) {
    st = train_error(TRAIN_ERR_FORMAT, "%s: %s after the %zu bytes the header promises", path,
                     got < 0 ? "corrupt compressed data" : "unexpected bytes", total);
    goto done;
  }
  *data = buf;
  *bytes = total;
  buf = NULL;
done:
  free(buf);
  gzclose(f);
  return st;
}

/* "<dir>/<name>.gz" if it exists, else "<dir>/<name>". */
static train_status_t find_file(const char *dir, const char *name, char *path, size_t size) {
  snprintf(path, size, "%s/%s.gz", dir, name);
  if (access(path, F_OK) == 0) return TRAIN_OK;
  snprintf(path, size, "%s/%s", dir, name);
  if (access(path, F_OK) == 0) return TRAIN_OK;
  return train_error(TRAIN_ERR_IO,
                     "%s: no %s or %s.gz there (an MNIST-format folder is "
                     "needed; see --data)",
                     dir, name, name);
}

train_status_t train_dataset_load(const char *dir, const char *prefix, train_dataset_t *ds) {
  memset(ds, 0, sizeof *ds);
  char name[256], img_path[4096], lbl_path[4096];
  uint32_t idims[3], ldims[3];
  size_t ibytes, lbytes;
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
  train_status_t st = find_file(dir, name, img_path, sizeof img_path);
  if (st != TRAIN_OK) return st;
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
  st = find_file(dir, name, lbl_path, sizeof lbl_path);
  if (st != TRAIN_OK) return st;
  st = train_idx_read(img_path, 3, idims, &ds->images, &ibytes);
  if (st != TRAIN_OK) return st;
  st = train_idx_read(lbl_path, 1, ldims, &ds->labels, &lbytes);
  if (st != TRAIN_OK) {
    train_dataset_free(ds);
    return st;
  }
  if (idims[0] != ldims[0]) {
    train_dataset_free(ds);
    return train_error(TRAIN_ERR_FORMAT, "%s has %u images but %s has %u labels", img_path,
                       idims[0], lbl_path, ldims[0]);
  }
  for (size_t i = 0; i < lbytes; i++) {
    if (ds->labels[i] >= 10) {
      unsigned bad = ds->labels[i];
      train_dataset_free(ds);
      return train_error(TRAIN_ERR_FORMAT, "%s: label %u of sample %zu is not a class 0..9",
                         lbl_path, bad, i);
    }
  }
  ds->count = idims[0];
  ds->rows = idims[1];
  ds->cols = idims[2];
  return TRAIN_OK;
}

void train_dataset_free(train_dataset_t *ds) {
  free(ds->images);
  free(ds->labels);
  memset(ds, 0, sizeof *ds);
}

/* Fashion-MNIST's pixel mean and standard deviation (after /255), the usual
 * transforms.Normalize constants; the PyTorch comparison uses the same. */
#define PIXEL_MEAN 0.2860f
#define PIXEL_STD 0.3530f

void train_dataset_gather(const train_dataset_t *ds, const uint32_t *indices, size_t n,
                          float *restrict x, uint8_t *restrict labels) {
  /* x = v * scale + shift: a multiply-add the compiler vectorises (a table lookup does
   * not), the same value as (v / 255 - mean) / std up to rounding. */
  const float scale = 1.0f / (255.0f * PIXEL_STD), shift = -PIXEL_MEAN / PIXEL_STD;
  size_t dim = ds->rows * ds->cols;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *restrict src = ds->images + (size_t)indices[i] * dim;
    float *restrict dst = x + i * dim;
    for (size_t k = 0; k < dim; k++) dst[k] = (float)src[k] * scale + shift;
    labels[i] = ds->labels[indices[i]];
  }
}
