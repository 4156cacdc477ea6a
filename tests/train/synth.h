/* Synthetic MNIST-format data sets for the train tests: small IDX files (plain or gzip)
 * in a temporary folder, and helpers to make broken ones. */
#ifndef TESTS_TRAIN_SYNTH_H
#define TESTS_TRAIN_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* mkdtemp under $TMPDIR (or /tmp); returns the path in `dir` (at least 256 bytes). */
void synth_tmpdir(char *dir, size_t size);
/* Remove the folder and the files in it (not recursive). */
void synth_rmdir(const char *dir);
/* Write an IDX file of unsigned bytes: `ndims` sizes, then `bytes` of data (which may
 * disagree with the sizes on purpose). gzip when `gz`. */
void synth_write_idx(const char *path, int ndims, const uint32_t *dims, const uint8_t *data,
                     size_t bytes, bool gz);
/* Write raw bytes (for corrupt files). */
void synth_write_raw(const char *path, const void *data, size_t bytes);
/* A learnable data set: `count` side x side images whose class (0..9) sets which band
 * is bright, plus noise; written as <dir>/<prefix>-images-idx3-ubyte[.gz] and labels. */
void synth_dataset(const char *dir, const char *prefix, uint32_t count, uint32_t side,
                   uint64_t seed, bool gz);

#endif
