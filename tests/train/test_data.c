/* Data tests: the distributed sampler's shards, the IDX reader on good and broken files,
 * and checkpoints (round trip, corruption, another model's file). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suite_run.h"
#include "synth.h"
#include "train.h"

START_TEST(sampler_shards_are_disjoint_equal_and_cover_the_data_set) {
  const size_t n = 1000;
  const int ranks = 4;
  train_sampler_t s[4];
  for (int r = 0; r < ranks; r++)
    ck_assert_int_eq(train_sampler_init(&s[r], n, r, ranks, 7, true, false), 0);
  int *seen = calloc(n, sizeof *seen);
  for (int r = 0; r < ranks; r++) {
    ck_assert_uint_eq(s[r].num_samples, 250);
    for (size_t k = 0; k < s[r].num_samples; k++) seen[s[r].indices[k]]++;
  }
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(seen[i] == 1, "sample %zu seen %d times", i, seen[i]);
  free(seen);
  for (int r = 0; r < ranks; r++) train_sampler_free(&s[r]);
}
END_TEST

START_TEST(sampler_pads_by_wrapping_or_drops_the_remainder) {
  /* 10 samples on 4 ranks: PyTorch pads to 12 with the first two of the permutation, or
   * with drop_last keeps 8. */
  train_sampler_t pad[4], drop[4];
  int *seen = calloc(10, sizeof *seen);
  for (int r = 0; r < 4; r++) {
    ck_assert_int_eq(train_sampler_init(&pad[r], 10, r, 4, 3, true, false), 0);
    ck_assert_int_eq(train_sampler_init(&drop[r], 10, r, 4, 3, true, true), 0);
    ck_assert_uint_eq(pad[r].num_samples, 3);
    ck_assert_uint_eq(drop[r].num_samples, 2);
    for (size_t k = 0; k < 3; k++) seen[pad[r].indices[k]]++;
  }
  int twice = 0;
  for (size_t i = 0; i < 10; i++) {
    ck_assert(seen[i] >= 1 && seen[i] <= 2);
    twice += seen[i] == 2;
  }
  ck_assert_int_eq(twice, 2);
  /* The padding is the start of the permutation: ranks 2 and 3's last are ranks 0 and 1's first. */
  ck_assert_uint_eq(pad[2].indices[2], pad[0].indices[0]);
  ck_assert_uint_eq(pad[3].indices[2], pad[1].indices[0]);
  for (int r = 0; r < 4; r++) {
    train_sampler_free(&pad[r]);
    train_sampler_free(&drop[r]);
  }
  free(seen);
  train_sampler_t tiny;
  ck_assert_int_eq(train_sampler_init(&tiny, 3, 0, 4, 1, true, true), TRAIN_ERR_INVALID);
  ck_assert_int_eq(train_sampler_init(&tiny, 3, 4, 4, 1, true, false), TRAIN_ERR_INVALID);
}
END_TEST

START_TEST(sampler_reshuffles_each_epoch_identically_on_every_rank) {
  train_sampler_t a, b, one;
  ck_assert_int_eq(train_sampler_init(&a, 512, 1, 2, 11, true, false), 0);
  ck_assert_int_eq(train_sampler_init(&b, 512, 1, 2, 11, true, false), 0);
  ck_assert_int_eq(train_sampler_init(&one, 512, 0, 1, 11, true, false), 0);
  uint32_t first[256];
  memcpy(first, a.indices, sizeof first);
  train_sampler_set_epoch(&a, 1);
  train_sampler_set_epoch(&b, 1);
  train_sampler_set_epoch(&one, 1);
  ck_assert_mem_eq(a.indices, b.indices, sizeof first);
  ck_assert(memcmp(a.indices, first, sizeof first) != 0);
  /* Rank 1 of 2 takes the odd positions of the one-rank order: 2 ranks x batch b see
   * the same samples per step as 1 rank x batch 2b. */
  for (size_t k = 0; k < 256; k++) ck_assert_uint_eq(a.indices[k], one.indices[2 * k + 1]);
  train_sampler_set_epoch(&a, 0);
  ck_assert_mem_eq(a.indices, first, sizeof first);
  train_sampler_t plain;
  ck_assert_int_eq(train_sampler_init(&plain, 8, 1, 2, 11, false, false), 0);
  ck_assert_uint_eq(plain.indices[0], 1);
  ck_assert_uint_eq(plain.indices[3], 7);
  train_sampler_free(&plain);
  train_sampler_free(&a);
  train_sampler_free(&b);
  train_sampler_free(&one);
}
END_TEST

static char dir[512];
static void data_setup(void) { synth_tmpdir(dir, sizeof dir); }
static void data_teardown(void) { synth_rmdir(dir); }

static void path_of(char *out, const char *name) { snprintf(out, 4096, "%s/%s", dir, name); }

START_TEST(idx_reader_loads_plain_and_gzip_data_sets) {
  synth_dataset(dir, "train", 50, 6, 1, true);
  synth_dataset(dir, "t10k", 20, 6, 2, false);
  train_dataset_t tr, te;
  ck_assert_int_eq(train_dataset_load(dir, "train", &tr), 0);
  ck_assert_uint_eq(tr.count, 50);
  ck_assert_uint_eq(tr.rows, 6);
  ck_assert_uint_eq(tr.cols, 6);
  ck_assert_int_eq(train_dataset_load(dir, "t10k", &te), 0);
  ck_assert_uint_eq(te.count, 20);
  uint32_t idx[2] = {3, 0};
  float x[72];
  uint8_t labels[2];
  train_dataset_gather(&tr, idx, 2, x, labels);
  ck_assert_uint_eq(labels[0], tr.labels[3]);
  ck_assert_float_eq_tol(x[0], ((float)tr.images[3 * 36] / 255.0f - 0.2860f) / 0.3530f, 1e-6f);
  train_dataset_free(&tr);
  train_dataset_free(&te);
}
END_TEST

/* Expect `status` and a message naming `path` and containing `what`. */
static void expect_error(train_status_t got, train_status_t status, const char *path,
                         const char *what) {
  ck_assert_int_eq(got, status);
  ck_assert_msg(strstr(train_last_error(), path) != NULL, "message '%s' lacks the file",
                train_last_error());
  ck_assert_msg(strstr(train_last_error(), what) != NULL, "message '%s' lacks '%s'",
                train_last_error(), what);
}

START_TEST(idx_reader_rejects_truncated_corrupt_and_mismatched_files) {
  char path[4096];
  uint32_t dims[3];
  uint8_t *data;
  size_t bytes;
  uint8_t pixels[2 * 4 * 4] = {0};
  uint32_t idims[3] = {2, 4, 4};

  path_of(path, "missing");
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_IO, path, "cannot open");

  path_of(path, "short");
  synth_write_raw(path, "\0\0", 2);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path, "truncated");

  path_of(path, "magic");
  synth_write_raw(path, "GIF89a..........", 16);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path,
               "not an IDX file");

  path_of(path, "type");
  synth_write_raw(path, "\0\0\x0d\x03\0\0\0\1\0\0\0\1\0\0\0\1\0\0\0\0", 20);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path,
               "element type");

  path_of(path, "labels-as-images");
  synth_write_idx(path, 1, idims, pixels, 2, false);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path,
               "1 dimensions, expected 3");

  path_of(path, "cut.gz");
  synth_write_idx(path, 3, idims, pixels, sizeof pixels - 5, true);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path, "truncated");

  path_of(path, "long");
  synth_write_idx(path, 3, idims, pixels, sizeof pixels, false);
  FILE *f = fopen(path, "ab");
  fputs("junk", f);
  fclose(f);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path,
               "unexpected bytes");

  path_of(path, "zero");
  uint32_t zdims[3] = {0, 4, 4};
  synth_write_idx(path, 3, zdims, pixels, 0, false);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path, "size 0");

  path_of(path, "huge");
  uint32_t hdims[3] = {0xffffffffu, 0xffffffffu, 2};
  synth_write_idx(path, 3, hdims, pixels, 0, false);
  expect_error(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT, path, "more than");

  /* A gzip stream whose compressed bytes were damaged. */
  path_of(path, "damaged.gz");
  uint8_t big[4096];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
  uint32_t bdims[3] = {1, 64, 64};
  synth_write_idx(path, 3, bdims, big, sizeof big, true);
  f = fopen(path, "r+b");
  fseek(f, 30, SEEK_SET);
  fputs("XXXXXXXXXXXXXXXX", f);
  fclose(f);
  ck_assert_int_eq(train_idx_read(path, 3, dims, &data, &bytes), TRAIN_ERR_FORMAT);
  ck_assert_ptr_nonnull(strstr(train_last_error(), path));
}
END_TEST

START_TEST(dataset_load_rejects_count_mismatch_bad_labels_and_missing_files) {
  char img[4096], lbl[4096];
  expect_error(train_dataset_load(dir, "train", &(train_dataset_t){0}), TRAIN_ERR_IO, dir,
               "train-images-idx3-ubyte");
  uint8_t pixels[3 * 4] = {0}, labels[3] = {1, 2, 3};
  uint32_t idims[3] = {3, 2, 2}, ldims[1] = {2};
  path_of(img, "train-images-idx3-ubyte");
  path_of(lbl, "train-labels-idx1-ubyte");
  synth_write_idx(img, 3, idims, pixels, sizeof pixels, false);
  synth_write_idx(lbl, 1, ldims, labels, 2, false);
  train_dataset_t ds;
  expect_error(train_dataset_load(dir, "train", &ds), TRAIN_ERR_FORMAT, lbl, "2 labels");
  ck_assert_ptr_nonnull(strstr(train_last_error(), "3 images"));
  ldims[0] = 3;
  labels[1] = 10;
  synth_write_idx(lbl, 1, ldims, labels, 3, false);
  expect_error(train_dataset_load(dir, "train", &ds), TRAIN_ERR_FORMAT, lbl, "label 10");
  labels[1] = 9;
  synth_write_idx(lbl, 1, ldims, labels, 3, false);
  ck_assert_int_eq(train_dataset_load(dir, "train", &ds), 0);
  ck_assert_uint_eq(ds.count, 3);
  train_dataset_free(&ds);
}
END_TEST

START_TEST(checkpoint_round_trips_and_detects_corruption) {
  char path[4096];
  path_of(path, "ckpt");
  float params[5] = {1, 2, 3, 4, 5}, m[5] = {6, 7, 8, 9, 10}, v[5] = {11, 12, 13, 14, 15};
  float *state[2] = {m, v};
  train_ckpt_header_t h = {.epoch = 3,
                           .step_in_epoch = 7,
                           .global_step = 100,
                           .seed = 42,
                           .opt_kind = TRAIN_OPT_ADAM,
                           .opt_steps = 100,
                           .n_layers = 1,
                           .dims = {4, 1}};
  ck_assert_int_eq(train_checkpoint_write(path, &h, params, 5, state, 2), 0);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  ck_assert_int_ne(access(tmp, F_OK), 0);

  float p2[5], m2[5], v2[5];
  float *state2[2] = {m2, v2};
  train_ckpt_header_t h2;
  ck_assert_int_eq(train_checkpoint_read(path, &h2, p2, 5, state2, 2), 0);
  ck_assert_mem_eq(p2, params, sizeof params);
  ck_assert_mem_eq(m2, m, sizeof m);
  ck_assert_mem_eq(v2, v, sizeof v);
  ck_assert_uint_eq(h2.epoch, 3);
  ck_assert_uint_eq(h2.step_in_epoch, 7);
  ck_assert_uint_eq(h2.global_step, 100);
  size_t n;
  int ns;
  ck_assert_int_eq(train_checkpoint_peek(path, &h2, &n, &ns), 0);
  ck_assert_uint_eq(n, 5);
  ck_assert_int_eq(ns, 2);

  expect_error(train_checkpoint_read(path, &h2, p2, 6, state2, 2), TRAIN_ERR_FORMAT, path,
               "another model");
  expect_error(train_checkpoint_read(path, &h2, p2, 5, state2, 1), TRAIN_ERR_FORMAT, path,
               "another model");

  /* Flip one byte of the parameters: the CRC catches it and nothing is loaded. */
  FILE *f = fopen(path, "r+b");
  fseek(f, -10, SEEK_END);
  fputc(0x5a, f);
  fclose(f);
  memset(p2, 0, sizeof p2);
  expect_error(train_checkpoint_read(path, &h2, p2, 5, state2, 2), TRAIN_ERR_FORMAT, path,
               "checksum");
  ck_assert_float_eq(p2[0], 0.0f);

  ck_assert_int_eq(truncate(path, 40), 0);
  expect_error(train_checkpoint_read(path, &h2, p2, 5, state2, 2), TRAIN_ERR_FORMAT, path,
               "truncated");
  synth_write_raw(path, "not a checkpoint at all, really", 31);
  expect_error(train_checkpoint_read(path, &h2, p2, 5, state2, 2), TRAIN_ERR_FORMAT, path, "magic");
}
END_TEST

SUITE_MAIN("train_data",
           suite_tests("sampler", 0, sampler_shards_are_disjoint_equal_and_cover_the_data_set,
                       sampler_pads_by_wrapping_or_drops_the_remainder,
                       sampler_reshuffles_each_epoch_identically_on_every_rank),
           suite_fixture_tests("files", 0, data_setup, data_teardown,
                               idx_reader_loads_plain_and_gzip_data_sets,
                               idx_reader_rejects_truncated_corrupt_and_mismatched_files,
                               dataset_load_rejects_count_mismatch_bad_labels_and_missing_files,
                               checkpoint_round_trips_and_detects_corruption))
