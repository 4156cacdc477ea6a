/* The CUDA backend against the CPU backend, kernel by kernel and for whole training
 * steps of a model: same inputs on both, results compared (bit for bit where the
 * arithmetic is the same, within a tolerance where cuBLAS or exp differ). A plain program
 * like the others here, so that run.sh runs it on a GPU machine built without tests;
 * without a usable GPU it checks the clear "no GPU" error and exits 77 (skipped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define SKIP 77

static int failures;

static void check(bool ok, const char *what) {
  if (!ok) {
    failures++;
    fprintf(stderr, "FAIL: %s (%s)\n", what, train_last_error());
  }
}

/* Largest |a - b| / (1 + |a|) over n floats. */
static double max_rel_diff(const float *a, const float *b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)a[i]));
    if (!(d <= worst)) worst = d; /* NaN counts as the worst */
  }
  return worst;
}

static void expect_close(const float *cpu, const float *gpu, size_t n, double tol,
                         const char *what) {
  double d = max_rel_diff(cpu, gpu, n);
  printf("  %-34s max relative difference %.3g (tolerance %.3g)\n", what, d, tol);
  if (!(d <= tol)) {
    failures++;
    fprintf(stderr, "FAIL: %s differs between CPU and CUDA by %.3g\n", what, d);
  }
}

static void fill_random(train_rng_t *rng, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * train_rng_uniform(rng);
}

/* A device copy of `bytes` bytes of host memory; the run stops if that fails. */
static void *device_copy(train_backend_t *gpu, const void *host, size_t bytes) {
  void *p = NULL;
  if (gpu->alloc(gpu, bytes, &p) != TRAIN_OK || gpu->upload(gpu, p, host, bytes) != TRAIN_OK) {
    fprintf(stderr, "FAIL: device copy of %zu bytes: %s\n", bytes, train_last_error());
    exit(1);
  }
  return p;
}

static void download(train_backend_t *gpu, void *host, const void *dev, size_t bytes) {
  check(gpu->download(gpu, host, dev, bytes) == TRAIN_OK, "download from the GPU");
}

static void test_gemm(train_backend_t *cpu, train_backend_t *gpu, train_rng_t *rng) {
  const size_t m = 37, n = 29, k = 53;
  float *a = malloc(m * k * sizeof *a), *b = malloc(k * n * sizeof *b);
  float *c = malloc(m * n * sizeof *c), *back = malloc(m * n * sizeof *back);
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    fill_random(rng, a, m * k, -1.0f, 1.0f);
    fill_random(rng, b, k * n, -1.0f, 1.0f);
    fill_random(rng, c, m * n, -1.0f, 1.0f);
    float *da = device_copy(gpu, a, m * k * sizeof *a),
          *db = device_copy(gpu, b, k * n * sizeof *b);
    float *dc = device_copy(gpu, c, m * n * sizeof *c);
    size_t lda = ta ? m : k, ldb = tb ? k : n;
    check(cpu->gemm(cpu, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c, n) == TRAIN_OK,
          "CPU gemm");
    check(gpu->gemm(gpu, ta, tb, m, n, k, 0.7f, da, lda, db, ldb, 0.3f, dc, n) == TRAIN_OK,
          "CUDA gemm");
    download(gpu, back, dc, m * n * sizeof *back);
    char what[64];
    snprintf(what, sizeof what, "gemm trans_a=%d trans_b=%d", ta, tb);
    expect_close(c, back, m * n, 1e-5, what);
    gpu->release(gpu, da);
    gpu->release(gpu, db);
    gpu->release(gpu, dc);
  }
  free(a);
  free(b);
  free(c);
  free(back);
}

/* Bias rows, bias gradient (both modes) and ReLU forward/backward: identical arithmetic,
 * so identical bits. */
static void test_elementwise(train_backend_t *cpu, train_backend_t *gpu, train_rng_t *rng) {
  const size_t rows = 300, cols = 70, n = rows * cols; /* more rows than one block */
  float *y = calloc(n, sizeof *y), *dy = malloc(n * sizeof *dy), *back = malloc(n * sizeof *y);
  float bias[70], db[70], db_back[70];
  fill_random(rng, bias, cols, -1.0f, 1.0f);
  float *dbias = device_copy(gpu, bias, sizeof bias), *dyv = device_copy(gpu, y, n * sizeof *y);
  check(cpu->fill_rows(cpu, y, bias, rows, cols) == TRAIN_OK, "CPU fill_rows");
  check(gpu->fill_rows(gpu, dyv, dbias, rows, cols) == TRAIN_OK, "CUDA fill_rows");
  download(gpu, back, dyv, n * sizeof *back);
  expect_close(y, back, n, 0.0, "bias rows");

  fill_random(rng, y, n, -1.0f, 1.0f);
  fill_random(rng, dy, n, -1.0f, 1.0f);
  fill_random(rng, db, cols, -1.0f, 1.0f);
  float *ddy = device_copy(gpu, dy, n * sizeof *dy), *ddb = device_copy(gpu, db, sizeof db);
  for (int acc = 1; acc >= 0; acc--) {
    check(cpu->col_sum(cpu, dy, rows, cols, acc, db) == TRAIN_OK, "CPU col_sum");
    check(gpu->col_sum(gpu, ddy, rows, cols, acc, ddb) == TRAIN_OK, "CUDA col_sum");
    download(gpu, db_back, ddb, sizeof db_back);
    expect_close(db, db_back, cols, 0.0, acc ? "bias gradient (accumulate)" : "bias gradient");
  }

  check(gpu->upload(gpu, dyv, y, n * sizeof *y) == TRAIN_OK, "upload");
  check(cpu->relu_forward(cpu, y, n) == TRAIN_OK, "CPU ReLU");
  check(gpu->relu_forward(gpu, dyv, n) == TRAIN_OK, "CUDA ReLU");
  download(gpu, back, dyv, n * sizeof *back);
  expect_close(y, back, n, 0.0, "ReLU forward");
  check(cpu->relu_backward(cpu, y, dy, n) == TRAIN_OK, "CPU ReLU backward");
  check(gpu->relu_backward(gpu, dyv, ddy, n) == TRAIN_OK, "CUDA ReLU backward");
  download(gpu, back, ddy, n * sizeof *back);
  expect_close(dy, back, n, 0.0, "ReLU backward");
  gpu->release(gpu, dbias);
  gpu->release(gpu, dyv);
  gpu->release(gpu, ddy);
  gpu->release(gpu, ddb);
  free(y);
  free(dy);
  free(back);
}

static void test_softmax(train_backend_t *cpu, train_backend_t *gpu, train_rng_t *rng) {
  const size_t rows = 700, cols = 10, n = rows * cols; /* rows > one block's threads */
  float *z = malloc(n * sizeof *z), *d = calloc(n, sizeof *d), *back = malloc(n * sizeof *d);
  uint8_t *labels = malloc(rows);
  fill_random(rng, z, n, -8.0f, 8.0f);
  for (size_t i = 0; i < rows; i++) labels[i] = (uint8_t)train_rng_below(rng, cols);
  float *dz = device_copy(gpu, z, n * sizeof *z), *dd = device_copy(gpu, d, n * sizeof *d);
  uint8_t *dl = device_copy(gpu, labels, rows);
  double loss_c = 0.5, loss_g = 0.5; /* both add to what is there */
  size_t right_c = 3, right_g = 3;
  float scale = 1.0f / (float)rows;
  check(cpu->softmax_xent(cpu, z, labels, rows, cols, scale, d, &loss_c, &right_c) == TRAIN_OK,
        "CPU softmax");
  check(gpu->softmax_xent(gpu, dz, dl, rows, cols, scale, dd, &loss_g, &right_g) == TRAIN_OK,
        "CUDA softmax");
  download(gpu, back, dd, n * sizeof *back);
  printf("  softmax loss sum CPU %.12g CUDA %.12g, correct %zu / %zu\n", loss_c, loss_g, right_c,
         right_g);
  check(fabs(loss_c - loss_g) <= 1e-9 * fabs(loss_c), "softmax loss sum");
  check(right_c == right_g, "softmax correct count");
  expect_close(d, back, n, 1e-6, "softmax gradient");
  /* Without a gradient buffer (evaluation), and a bad label named by its row. */
  check(gpu->softmax_xent(gpu, dz, dl, rows, cols, 0.0f, NULL, NULL, NULL) == TRAIN_OK,
        "CUDA softmax without outputs");
  labels[517] = 12;
  check(gpu->upload(gpu, dl, labels, rows) == TRAIN_OK, "upload");
  check(gpu->softmax_xent(gpu, dz, dl, rows, cols, scale, dd, &loss_g, NULL) == TRAIN_ERR_INVALID,
        "CUDA softmax rejects label 12 of 10 classes");
  check(strstr(train_last_error(), "row 517") != NULL, "the bad label's row is named");
  gpu->release(gpu, dz);
  gpu->release(gpu, dd);
  gpu->release(gpu, dl);
  free(z);
  free(d);
  free(back);
  free(labels);
}

/* Several optimizer steps through the public API on both devices from the same state. */
static void test_optimizers(train_backend_t *cpu, train_backend_t *gpu, train_rng_t *rng) {
  const size_t n = 5000;
  float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *back = malloc(n * sizeof *p);
  static const struct {
    const char *name;
    train_opt_config_t cfg;
  } cases[] = {
      {"SGD", {.kind = TRAIN_OPT_SGD, .lr = 0.1f}},
      {"SGD momentum + weight decay",
       {.kind = TRAIN_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f}},
      {"Adam + weight decay",
       {.kind = TRAIN_OPT_ADAM,
        .lr = 1e-3f,
        .weight_decay = 1e-2f,
        .beta1 = 0.9f,
        .beta2 = 0.999f,
        .eps = 1e-8f}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    train_optimizer_t *oc = NULL, *og = NULL;
    check(train_optimizer_create(cpu, &cases[c].cfg, n, &oc) == TRAIN_OK, "CPU optimizer");
    check(train_optimizer_create(gpu, &cases[c].cfg, n, &og) == TRAIN_OK, "CUDA optimizer");
    if (oc == NULL || og == NULL) return;
    fill_random(rng, p, n, -1.0f, 1.0f);
    float *dp = device_copy(gpu, p, n * sizeof *p), *dg = device_copy(gpu, p, n * sizeof *p);
    for (int step = 0; step < 3; step++) {
      fill_random(rng, g, n, -1.0f, 1.0f);
      check(gpu->upload(gpu, dg, g, n * sizeof *g) == TRAIN_OK, "upload");
      check(train_optimizer_step(oc, p, g) == TRAIN_OK, "CPU optimizer step");
      check(train_optimizer_step(og, dp, dg) == TRAIN_OK, "CUDA optimizer step");
    }
    download(gpu, back, dp, n * sizeof *back);
    /* Same float operations in the same order: only Adam's sqrtf/division could round
     * differently, and they are IEEE-exact on both. */
    expect_close(p, back, n, 1e-6, cases[c].name);
    train_optimizer_destroy(oc);
    train_optimizer_destroy(og);
    gpu->release(gpu, dp);
    gpu->release(gpu, dg);
  }
  free(p);
  free(g);
  free(back);
}

/* Whole model: same initial parameters bit for bit, then forward, loss, backward (with
 * an accumulated second micro-batch) and an optimizer step, compared at each stage. */
static void test_model(train_backend_t *cpu, train_backend_t *gpu, train_rng_t *rng) {
  const size_t inputs = 784, hidden[2] = {256, 128}, classes = 10, batch = 64;
  train_model_t *mc = NULL, *mg = NULL;
  check(train_model_create(cpu, inputs, hidden, 2, classes, batch, 7, &mc) == TRAIN_OK,
        "CPU model");
  check(train_model_create(gpu, inputs, hidden, 2, classes, batch, 7, &mg) == TRAIN_OK,
        "CUDA model");
  if (mc == NULL || mg == NULL) return;
  size_t n = train_model_param_count(mc);
  float *back = malloc(n * sizeof *back);
  download(gpu, back, train_model_params(mg), n * sizeof *back);
  expect_close(train_model_params(mc), back, n, 0.0, "initial parameters");

  float *x = calloc(batch * inputs, sizeof *x);
  uint8_t labels[64];
  float *dx = device_copy(gpu, x, batch * inputs * sizeof *x);
  uint8_t *dl = device_copy(gpu, labels, batch);
  double loss_c = 0.0, loss_g = 0.0;
  size_t right_c = 0, right_g = 0;
  for (int micro = 0; micro < 2; micro++) {
    fill_random(rng, x, batch * inputs, -1.0f, 2.0f);
    for (size_t i = 0; i < batch; i++) labels[i] = (uint8_t)train_rng_below(rng, classes);
    check(gpu->upload(gpu, dx, x, batch * inputs * sizeof *x) == TRAIN_OK, "upload");
    check(gpu->upload(gpu, dl, labels, batch) == TRAIN_OK, "upload");
    check(train_model_forward(mc, x, batch) == TRAIN_OK, "CPU forward");
    check(train_model_forward(mg, dx, batch) == TRAIN_OK, "CUDA forward");
    float scale = 1.0f / (2.0f * (float)batch);
    check(train_model_loss(mc, labels, batch, scale, &loss_c, &right_c) == TRAIN_OK, "CPU loss");
    check(train_model_loss(mg, dl, batch, scale, &loss_g, &right_g) == TRAIN_OK, "CUDA loss");
    check(train_model_backward(mc, x, batch, micro > 0, NULL, NULL) == TRAIN_OK, "CPU backward");
    check(train_model_backward(mg, dx, batch, micro > 0, NULL, NULL) == TRAIN_OK, "CUDA backward");
  }
  printf("  model loss sum CPU %.9g CUDA %.9g, correct %zu / %zu\n", loss_c, loss_g, right_c,
         right_g);
  check(fabs(loss_c - loss_g) <= 1e-4 * fabs(loss_c), "model loss");
  download(gpu, back, train_model_grads(mg), n * sizeof *back);
  /* Gradients are small: compare against their scale, not 1 + |g|. */
  float gmax = 0.0f;
  const float *gc = train_model_grads(mc);
  for (size_t i = 0; i < n; i++) gmax = fabsf(gc[i]) > gmax ? fabsf(gc[i]) : gmax;
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)gc[i] - (double)back[i]) / (double)gmax;
    if (!(d <= worst)) worst = d;
  }
  printf("  %-34s max difference / max |grad| %.3g (tolerance 1e-4)\n", "gradients", worst);
  check(gmax > 0.0f && worst <= 1e-4, "gradients");

  train_opt_config_t cfg = {.kind = TRAIN_OPT_SGD, .lr = 0.05f, .momentum = 0.9f};
  train_optimizer_t *oc = NULL, *og = NULL;
  check(train_optimizer_create(cpu, &cfg, n, &oc) == TRAIN_OK, "CPU optimizer");
  check(train_optimizer_create(gpu, &cfg, n, &og) == TRAIN_OK, "CUDA optimizer");
  if (oc != NULL && og != NULL) {
    check(train_optimizer_step(oc, train_model_params(mc), train_model_grads(mc)) == TRAIN_OK,
          "CPU step");
    check(train_optimizer_step(og, train_model_params(mg), train_model_grads(mg)) == TRAIN_OK,
          "CUDA step");
    download(gpu, back, train_model_params(mg), n * sizeof *back);
    expect_close(train_model_params(mc), back, n, 1e-5, "parameters after a step");
  }
  train_optimizer_destroy(oc);
  train_optimizer_destroy(og);
  gpu->release(gpu, dx);
  gpu->release(gpu, dl);
  free(x);
  free(back);
  train_model_destroy(mc);
  train_model_destroy(mg);
}

int main(void) {
  train_backend_t *cpu = NULL, *gpu = NULL;
  if (train_backend_open(TRAIN_DEVICE_CPU, 1, 0, &cpu) != TRAIN_OK) {
    fprintf(stderr, "FAIL: CPU backend: %s\n", train_last_error());
    return 1;
  }
  train_status_t st = train_backend_open(TRAIN_DEVICE_CUDA, 1, 0, &gpu);
  if (st != TRAIN_OK) {
    /* No GPU (or no CUDA build): the error must say so clearly, and nothing is left open. */
    bool clear =
        st == TRAIN_ERR_UNSUPPORTED && gpu == NULL && strstr(train_last_error(), "cuda") != NULL;
    printf("skipped: %s\n", train_last_error());
    train_backend_close(cpu);
    return clear ? SKIP : 1;
  }
  train_rng_t rng;
  train_rng_seed(&rng, 2024);
  printf("CUDA backend against the CPU backend:\n");
  test_gemm(cpu, gpu, &rng);
  test_elementwise(cpu, gpu, &rng);
  test_softmax(cpu, gpu, &rng);
  test_optimizers(cpu, gpu, &rng);
  test_model(cpu, gpu, &rng);
  train_backend_close(gpu);
  train_backend_close(cpu);
  printf(failures == 0 ? "all CUDA backend checks passed\n" : "%d CUDA backend check(s) failed\n",
         failures);
  return failures == 0 ? 0 : 1;
}
