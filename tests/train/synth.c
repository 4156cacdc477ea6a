/* Synthetic IDX files for the train tests (see synth.h). */
#include "synth.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "train.h"

void synth_tmpdir(char *dir, size_t size) {
  const char *base = getenv("TMPDIR");
  snprintf(dir, size, "%s/train-test-XXXXXX", base != NULL && *base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

void synth_rmdir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

void synth_write_raw(const char *path, const void *data, size_t bytes) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, bytes, f), bytes);
  ck_assert_int_eq(fclose(f), 0);
}

void synth_write_idx(const char *path, int ndims, const uint32_t *dims, const uint8_t *data,
                     size_t bytes, bool gz) {
  size_t hdr_len = 4 + 4 * (size_t)ndims;
  uint8_t *buf = malloc(hdr_len + bytes + 1);
  ck_assert_ptr_nonnull(buf);
  buf[0] = 0;
  buf[1] = 0;
  buf[2] = 0x08;
  buf[3] = (uint8_t)ndims;
  for (int d = 0; d < ndims; d++) {
    buf[4 + 4 * d] = (uint8_t)(dims[d] >> 24);
    buf[5 + 4 * d] = (uint8_t)(dims[d] >> 16);
    buf[6 + 4 * d] = (uint8_t)(dims[d] >> 8);
    buf[7 + 4 * d] = (uint8_t)dims[d];
  }
  if (bytes > 0) memcpy(buf + hdr_len, data, bytes);
  if (gz) {
    gzFile f = gzopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gzwrite(f, buf, (unsigned)(hdr_len + bytes)), (int)(hdr_len + bytes));
    ck_assert_int_eq(gzclose(f), Z_OK);
  } else {
    synth_write_raw(path, buf, hdr_len + bytes);
  }
  free(buf);
}

void synth_dataset(const char *dir, const char *prefix, uint32_t count, uint32_t side,
                   uint64_t seed, bool gz) {
  size_t dim = (size_t)side * side;
  uint8_t *images = malloc((size_t)count * dim);
  uint8_t *labels = malloc(count);
  ck_assert_ptr_nonnull(images);
  ck_assert_ptr_nonnull(labels);
  train_rng_t rng;
  train_rng_seed(&rng, seed);
  for (uint32_t i = 0; i < count; i++) {
    uint8_t label = (uint8_t)train_rng_below(&rng, 10);
    labels[i] = label;
    for (size_t k = 0; k < dim; k++) {
      /* Class c brightens the pixels whose index falls in band c of ten. */
      bool band = k * 10 / dim == label;
      uint64_t noise = train_rng_below(&rng, 96);
      images[i * dim + k] = (uint8_t)(band ? 150 + noise : noise);
    }
  }
  char path[4096];
  uint32_t idims[3] = {count, side, side};
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
  synth_write_idx(path, 3, idims, images, (size_t)count * dim, gz);
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
  synth_write_idx(path, 1, &count, labels, count, gz);
  free(images);
  free(labels);
}
