/* Gradient checks of libtrain's layers and model against finite differences, and the
 * optimizers against hand-computed PyTorch steps. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_grads.h"
#include "suite_run.h"
#include "train.h"

static train_backend_t *be;

static void setup(void) { ck_assert_int_eq(train_backend_open(TRAIN_DEVICE_CPU, 1, 0, &be), 0); }
static void teardown(void) { train_backend_close(be); }

static void fill(train_rng_t *rng, float *v, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) v[i] = (2.0f * train_rng_uniform(rng) - 1.0f) * scale;
}

/* |a - b| <= atol + rtol |b| */
static void assert_close(double a, double b, double atol, double rtol, const char *what, size_t i) {
  ck_assert_msg(fabs(a - b) <= atol + rtol * fabs(b), "%s[%zu]: analytic %.7g vs numeric %.7g",
                what, i, a, b);
}

/* L = sum g .* (x W^T + b), computed in double from the float inputs. */
static double linear_probe(const train_layer_t *l, const float *x, size_t batch, const float *g) {
  double total = 0.0;
  for (size_t i = 0; i < batch; i++)
    for (size_t o = 0; o < l->out; o++) {
      double y = l->b[o];
      for (size_t k = 0; k < l->in; k++) y += (double)x[i * l->in + k] * l->w[o * l->in + k];
      total += g[i * l->out + o] * y;
    }
  return total;
}

START_TEST(linear_gradients_match_finite_differences) {
  enum { B = 5, IN = 7, OUT = 4 };
  float w[OUT * IN], b[OUT], dw[OUT * IN], db[OUT], x[B * IN], g[B * OUT], dx[B * IN], y[B * OUT];
  train_rng_t rng;
  train_rng_seed(&rng, 1);
  fill(&rng, w, OUT * IN, 1.0f);
  fill(&rng, b, OUT, 1.0f);
  fill(&rng, x, B * IN, 1.0f);
  fill(&rng, g, B * OUT, 1.0f);
  train_layer_t l = {
      .kind = TRAIN_LAYER_LINEAR, .in = IN, .out = OUT, .w = w, .b = b, .dw = dw, .db = db};
  ck_assert_int_eq(train_linear_forward(be, &l, x, B, y), 0);
  for (size_t i = 0; i < B; i++)
    for (size_t o = 0; o < OUT; o++) {
      double ref = b[o];
      for (size_t k = 0; k < IN; k++) ref += (double)x[i * IN + k] * w[o * IN + k];
      assert_close(y[i * OUT + o], ref, 1e-5, 1e-5, "forward", i * OUT + o);
    }
  ck_assert_int_eq(train_linear_backward(be, &l, x, g, B, false, dx), 0);
  /* L is linear in every parameter and input, so central differences are exact up to
   * rounding; the step is large to keep float rounding of the perturbation small. */
  const float h = 0.25f;
  struct {
    float *param;
    const float *grad;
    size_t n;
    const char *what;
  } checks[] = {{w, dw, OUT * IN, "dW"}, {b, db, OUT, "db"}, {x, dx, B * IN, "dx"}};
  for (size_t c = 0; c < sizeof checks / sizeof checks[0]; c++)
    for (size_t i = 0; i < checks[c].n; i++) {
      float *p = &checks[c].param[i], keep = *p;
      *p = keep + h;
      double up = linear_probe(&l, x, B, g);
      *p = keep - h;
      double down = linear_probe(&l, x, B, g);
      *p = keep;
      assert_close(checks[c].grad[i], (up - down) / (2 * h), 1e-5, 1e-4, checks[c].what, i);
    }
}
END_TEST

START_TEST(linear_backward_accumulates_when_asked) {
  enum { B = 3, IN = 4, OUT = 2 };
  float w[OUT * IN], b[OUT], dw[OUT * IN], db[OUT], x[B * IN], g[B * OUT];
  float dw1[OUT * IN], db1[OUT];
  train_rng_t rng;
  train_rng_seed(&rng, 2);
  fill(&rng, w, OUT * IN, 1.0f);
  fill(&rng, b, OUT, 1.0f);
  fill(&rng, x, B * IN, 1.0f);
  fill(&rng, g, B * OUT, 1.0f);
  train_layer_t l = {.in = IN, .out = OUT, .w = w, .b = b, .dw = dw, .db = db};
  ck_assert_int_eq(train_linear_backward(be, &l, x, g, B, false, NULL), 0);
  memcpy(dw1, dw, sizeof dw);
  memcpy(db1, db, sizeof db);
  ck_assert_int_eq(train_linear_backward(be, &l, x, g, B, true, NULL), 0);
  for (size_t i = 0; i < OUT * IN; i++) assert_close(dw[i], 2 * dw1[i], 1e-6, 1e-6, "dW", i);
  for (size_t i = 0; i < OUT; i++) assert_close(db[i], 2 * db1[i], 1e-6, 1e-6, "db", i);
}
END_TEST

START_TEST(relu_gradient_matches_finite_differences) {
  enum { N = 64 };
  float x[N], y[N], g[N], dy[N];
  train_rng_t rng;
  train_rng_seed(&rng, 3);
  fill(&rng, x, N, 1.0f);
  fill(&rng, g, N, 1.0f);
  /* Keep inputs away from the kink at 0, where the derivative is undefined. */
  for (size_t i = 0; i < N; i++)
    if (fabsf(x[i]) < 0.05f) x[i] = 0.1f;
  memcpy(y, x, sizeof x);
  ck_assert_int_eq(train_relu_forward(be, y, N), 0);
  memcpy(dy, g, sizeof g);
  ck_assert_int_eq(train_relu_backward(be, y, dy, N), 0);
  const float h = 0.01f;
  for (size_t i = 0; i < N; i++) {
    double up = g[i] * fmax(x[i] + h, 0.0), down = g[i] * fmax(x[i] - h, 0.0);
    assert_close(dy[i], (up - down) / (2 * h), 1e-5, 1e-4, "relu", i);
    ck_assert(y[i] >= 0.0f);
  }
}
END_TEST

START_TEST(softmax_cross_entropy_gradient_matches_finite_differences) {
  enum { B = 6, C = 10 };
  float z[B * C], dz[B * C];
  uint8_t labels[B] = {0, 3, 9, 3, 5, 7};
  train_rng_t rng;
  train_rng_seed(&rng, 4);
  fill(&rng, z, B * C, 3.0f);
  double loss = 0.0;
  size_t correct = 0;
  ck_assert_int_eq(train_softmax_xent(be, z, labels, B, C, 1.0f / B, dz, &loss, &correct), 0);
  ck_assert(correct <= B);
  /* The mean loss in double as the reference; float logits, so a step of 1e-3 and a
   * tolerance of 1e-4 absolute (gradients are O(0.1)). */
  const float h = 1e-3f;
  for (size_t i = 0; i < B * C; i++) {
    float keep = z[i];
    double up = 0.0, down = 0.0;
    z[i] = keep + h;
    ck_assert_int_eq(train_softmax_xent(be, z, labels, B, C, 0.0f, NULL, &up, NULL), 0);
    z[i] = keep - h;
    ck_assert_int_eq(train_softmax_xent(be, z, labels, B, C, 0.0f, NULL, &down, NULL), 0);
    z[i] = keep;
    assert_close(dz[i], (up - down) / B / (2.0 * h), 1e-4, 1e-3, "dlogits", i);
  }
}
END_TEST

START_TEST(softmax_cross_entropy_is_stable_for_huge_logits) {
  float z[3] = {1000.0f, -1000.0f, 999.0f}, dz[3];
  uint8_t label = 2;
  double loss = 0.0;
  ck_assert_int_eq(train_softmax_xent(be, z, &label, 1, 3, 1.0f, dz, &loss, NULL), 0);
  ck_assert(isfinite(loss));
  ck_assert_double_eq_tol(loss, log(1.0 + exp(-1.0)) + 1.0, 1e-4);
  uint8_t bad = 3;
  ck_assert_int_eq(train_softmax_xent(be, z, &bad, 1, 3, 1.0f, dz, &loss, NULL), TRAIN_ERR_INVALID);
}
END_TEST

/* Mean cross-entropy of the whole model on (x, labels). */
static double model_loss(train_model_t *m, const float *x, const uint8_t *labels, size_t batch) {
  double loss = 0.0;
  ck_assert_int_eq(train_model_forward(m, x, batch), 0);
  ck_assert_int_eq(train_model_loss(m, labels, batch, 0.0f, &loss, NULL), 0);
  return loss / (double)batch;
}

START_TEST(model_gradients_match_finite_differences_through_all_layers) {
  enum { B = 8, IN = 12 };
  size_t hidden[2] = {9, 7};
  train_model_t *m;
  ck_assert_int_eq(train_model_create(be, IN, hidden, 2, 10, B, 5, &m), 0);
  size_t n = train_model_param_count(m);
  ck_assert_uint_eq(n, 9 * (IN + 1) + 7 * (9 + 1) + 10 * (7 + 1));
  float x[B * IN];
  uint8_t labels[B];
  train_rng_t rng;
  train_rng_seed(&rng, 6);
  fill(&rng, x, B * IN, 2.0f);
  for (size_t i = 0; i < B; i++) labels[i] = (uint8_t)train_rng_below(&rng, 10);
  ck_assert_int_eq(train_model_forward(m, x, B), 0);
  ck_assert_int_eq(train_model_loss(m, labels, B, 1.0f / B, &(double){0}, NULL), 0);
  ck_assert_int_eq(train_model_backward(m, x, B, false, NULL, NULL), 0);
  float *p = train_model_params(m);
  float *grad = malloc(n * sizeof *grad);
  memcpy(grad, train_model_grads(m), n * sizeof *grad);
  /* Float forward passes: step 1e-3 (rounding noise of a difference about 1e-4),
   * tolerance 5e-4 absolute + 5% relative. Where a step moves some ReLU across its kink
   * the loss is not differentiable there: the one-sided slopes disagree, and such
   * entries are skipped (they must stay few). */
  const float h = 1e-3f;
  double center = model_loss(m, x, labels, B);
  size_t bad = 0, kinks = 0;
  for (size_t i = 0; i < n; i++) {
    float keep = p[i];
    p[i] = keep + h;
    double up = model_loss(m, x, labels, B);
    p[i] = keep - h;
    double down = model_loss(m, x, labels, B);
    p[i] = keep;
    if (fabs((up - center) - (center - down)) / h > 1e-3) {
      kinks++;
      continue;
    }
    double num = (up - down) / (2.0 * h);
    if (fabs(grad[i] - num) > 5e-4 + 0.05 * fabs(num)) {
      bad++;
      fprintf(stderr, "gradient %zu: analytic %g, numeric %g\n", i, grad[i], num);
    }
  }
  ck_assert_msg(bad == 0, "%zu of %zu gradients disagree with finite differences", bad, n);
  ck_assert_msg(kinks <= n / 10, "%zu of %zu entries sit on a ReLU kink", kinks, n);
  free(grad);
  train_model_destroy(m);
}
END_TEST

/* The callback sees every linear layer once, last layer first, with growing ends. */
static train_status_t record_ready(void *ctx, size_t grad_end) {
  size_t *log = ctx;
  log[++log[0]] = grad_end;
  return TRAIN_OK;
}

START_TEST(model_announces_gradients_in_reverse_layer_order) {
  size_t hidden[2] = {5, 4};
  train_model_t *m;
  ck_assert_int_eq(train_model_create(be, 6, hidden, 2, 10, 2, 1, &m), 0);
  float x[12] = {0};
  uint8_t labels[2] = {1, 2};
  size_t log[8] = {0};
  ck_assert_int_eq(train_model_forward(m, x, 2), 0);
  ck_assert_int_eq(train_model_loss(m, labels, 2, 0.5f, &(double){0}, NULL), 0);
  ck_assert_int_eq(train_model_backward(m, x, 2, false, record_ready, log), 0);
  ck_assert_uint_eq(log[0], 3);
  ck_assert_uint_eq(log[1], 10 * 5);
  ck_assert_uint_eq(log[2], 10 * 5 + 4 * 6);
  ck_assert_uint_eq(log[3], train_model_param_count(m));
  /* What DDP asks the model for its buckets is what backward announces. */
  for (int i = 0; i < 3; i++) ck_assert_uint_eq(train_model_grad_end(m, i), log[3 - i]);
  ck_assert_ptr_eq(train_model_linear(m, 2)->w, train_model_params(m));
  ck_assert_int_eq(train_model_forward(m, x, 3), TRAIN_ERR_INVALID);
  train_model_destroy(m);
}
END_TEST

START_TEST(same_seed_gives_same_initialisation_within_pytorch_bounds) {
  size_t hidden[1] = {16};
  train_model_t *a, *b;
  ck_assert_int_eq(train_model_create(be, 25, hidden, 1, 10, 4, 99, &a), 0);
  ck_assert_int_eq(train_model_create(be, 25, hidden, 1, 10, 4, 99, &b), 0);
  size_t n = train_model_param_count(a);
  ck_assert_mem_eq(train_model_params(a), train_model_params(b), n * sizeof(float));
  const train_layer_t *l0 = train_model_linear(a, 0);
  for (size_t i = 0; i < 16 * 25; i++) ck_assert(fabsf(l0->w[i]) <= 1.0f / 5.0f);
  const train_layer_t *l1 = train_model_linear(a, 1);
  for (size_t i = 0; i < 10 * 16; i++) ck_assert(fabsf(l1->w[i]) <= 0.25f);
  train_model_destroy(a);
  train_model_destroy(b);
}
END_TEST

START_TEST(sgd_with_momentum_and_weight_decay_follows_pytorch) {
  train_opt_config_t cfg = {
      .kind = TRAIN_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f};
  train_optimizer_t *opt;
  ck_assert_int_eq(train_optimizer_create(be, &cfg, 1, &opt), 0);
  float p = 1.0f, g = 0.5f;
  /* step 1: d = g + wd p = 0.51, buf = d, p = 1 - 0.051 = 0.949 */
  ck_assert_int_eq(train_optimizer_step(opt, &p, &g), 0);
  ck_assert_float_eq_tol(p, 0.949f, 1e-6f);
  /* step 2: d = 0.5 + 0.00949 = 0.50949, buf = 0.9 * 0.51 + d = 0.96849, p -= 0.096849 */
  ck_assert_int_eq(train_optimizer_step(opt, &p, &g), 0);
  ck_assert_float_eq_tol(p, 0.949f - 0.096849f, 1e-6f);
  ck_assert_uint_eq(*train_optimizer_steps(opt), 2);
  train_optimizer_destroy(opt);
  cfg.momentum = 1.5f;
  ck_assert_int_eq(train_optimizer_create(be, &cfg, 1, &opt), TRAIN_ERR_INVALID);
}
END_TEST

START_TEST(adam_steps_follow_pytorch) {
  train_opt_config_t cfg = {
      .kind = TRAIN_OPT_ADAM, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
  train_optimizer_t *opt;
  ck_assert_int_eq(train_optimizer_create(be, &cfg, 2, &opt), 0);
  ck_assert_int_eq(train_optimizer_state_count(opt), 2);
  float p[2] = {1.0f, -1.0f}, g[2] = {0.3f, -2.0f};
  /* The first bias-corrected step moves every parameter by lr against its gradient. */
  ck_assert_int_eq(train_optimizer_step(opt, p, g), 0);
  ck_assert_float_eq_tol(p[0], 0.99f, 1e-6f);
  ck_assert_float_eq_tol(p[1], -0.99f, 1e-6f);
  /* Second step with g = (0.3, 0): m = (0.057, -0.18) v = (1.7991e-4, 3.996e-3)... */
  float g2[2] = {0.3f, 0.0f};
  ck_assert_int_eq(train_optimizer_step(opt, p, g2), 0);
  double m1 = 0.9 * 0.03 + 0.1 * 0.3, v1 = 0.999 * 0.001 * 0.09 + 0.001 * 0.09;
  double step0 = 0.01 * (m1 / (1 - 0.81)) / (sqrt(v1 / (1 - 0.998001)) + 1e-8);
  ck_assert_float_eq_tol(p[0], (float)(0.99 - step0), 1e-6f);
  double m2 = 0.9 * -0.2, v2 = 0.999 * 0.001 * 4.0;
  double step1 = 0.01 * (m2 / (1 - 0.81)) / (sqrt(v2 / (1 - 0.998001)) + 1e-8);
  ck_assert_float_eq_tol(p[1], (float)(-0.99 - step1), 1e-6f);
  train_optimizer_destroy(opt);
}
END_TEST

/* DDP steps each bucket as soon as it is reduced: the step in pieces (any order) must
 * give the very bits of one whole step, for both optimizers, on odd sizes that leave
 * vector remainders. */
START_TEST(optimizer_step_in_pieces_is_bit_identical_to_one_step) {
  enum { N = 1003 };
  static const size_t cuts[][2] = {{500, N}, {0, 17}, {17, 500}};
  train_opt_kind_t kinds[2] = {TRAIN_OPT_SGD, TRAIN_OPT_ADAM};
  for (int k = 0; k < 2; k++) {
    train_opt_config_t cfg = {.kind = kinds[k],
                              .lr = 0.05f,
                              .momentum = 0.9f,
                              .weight_decay = 0.01f,
                              .beta1 = 0.9f,
                              .beta2 = 0.999f,
                              .eps = 1e-8f};
    train_optimizer_t *whole, *pieces;
    ck_assert_int_eq(train_optimizer_create(be, &cfg, N, &whole), 0);
    ck_assert_int_eq(train_optimizer_create(be, &cfg, N, &pieces), 0);
    static float p1[N], p2[N], g[N];
    train_rng_t rng;
    train_rng_seed(&rng, 7);
    fill(&rng, p1, N, 1.0f);
    memcpy(p2, p1, sizeof p1);
    for (int step = 0; step < 3; step++) {
      fill(&rng, g, N, 0.5f);
      ck_assert_int_eq(train_optimizer_step(whole, p1, g), 0);
      for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
        ck_assert_int_eq(train_optimizer_step_range(pieces, p2, g, cuts[c][0], cuts[c][1]), 0);
      train_optimizer_step_done(pieces);
    }
    ck_assert_int_eq(memcmp(p1, p2, sizeof p1), 0);
    for (int i = 0; i < train_optimizer_state_count(whole); i++)
      ck_assert_int_eq(memcmp(train_optimizer_state(whole, i), train_optimizer_state(pieces, i),
                              N * sizeof(float)),
                       0);
    ck_assert_uint_eq(*train_optimizer_steps(pieces), 3);
    ck_assert_int_eq(train_optimizer_step_range(pieces, p2, g, 10, N + 1), TRAIN_ERR_INVALID);
    ck_assert_int_eq(train_optimizer_step_range(pieces, p2, g, 20, 10), TRAIN_ERR_INVALID);
    train_optimizer_destroy(whole);
    train_optimizer_destroy(pieces);
  }
}
END_TEST

START_TEST(cosine_schedule_falls_from_lr_to_zero) {
  ck_assert_float_eq(train_lr_at(TRAIN_LR_COSINE, 0.1f, 0, 100), 0.1f);
  ck_assert_float_eq_tol(train_lr_at(TRAIN_LR_COSINE, 0.1f, 50, 100), 0.05f, 1e-7f);
  ck_assert_float_eq_tol(train_lr_at(TRAIN_LR_COSINE, 0.1f, 100, 100), 0.0f, 1e-9f);
  ck_assert_float_eq_tol(train_lr_at(TRAIN_LR_COSINE, 0.1f, 500, 100), 0.0f, 1e-9f);
  ck_assert(train_lr_at(TRAIN_LR_COSINE, 0.1f, 30, 100) >
            train_lr_at(TRAIN_LR_COSINE, 0.1f, 31, 100));
  ck_assert_float_eq(train_lr_at(TRAIN_LR_CONSTANT, 0.1f, 99, 100), 0.1f);
  train_lr_schedule_t s;
  ck_assert(train_lr_schedule_parse("cosine", &s) && s == TRAIN_LR_COSINE);
  ck_assert(!train_lr_schedule_parse("step", &s));
}
END_TEST

START_TEST(cuda_device_fails_clearly_without_a_usable_gpu) {
  train_backend_t *cuda = NULL;
  train_status_t st = train_backend_open(TRAIN_DEVICE_CUDA, 1, 0, &cuda);
  if (st == TRAIN_OK) {
    /* A GPU is here: a model lives on it (tests/gpu/test_train_cuda compares it with
     * the CPU's). */
    train_model_t *m = NULL;
    size_t hidden[1] = {4};
    ck_assert_int_eq(train_model_create(cuda, 4, hidden, 1, 10, 2, 1, &m), TRAIN_OK);
    train_model_destroy(m);
    train_backend_close(cuda);
  } else {
    ck_assert_int_eq(st, TRAIN_ERR_UNSUPPORTED);
    ck_assert_ptr_null(cuda);
    ck_assert_ptr_nonnull(strstr(train_last_error(), "cuda"));
  }
  train_device_t d;
  ck_assert(train_device_parse("cuda", &d) && d == TRAIN_DEVICE_CUDA);
  ck_assert(!train_device_parse("tpu", &d));
}
END_TEST

SUITE_MAIN("train_layers",
           suite_fixture_tests(
               "layers", 0, setup, teardown, linear_gradients_match_finite_differences,
               linear_backward_accumulates_when_asked, relu_gradient_matches_finite_differences,
               softmax_cross_entropy_gradient_matches_finite_differences,
               softmax_cross_entropy_is_stable_for_huge_logits,
               model_gradients_match_finite_differences_through_all_layers,
               model_announces_gradients_in_reverse_layer_order,
               same_seed_gives_same_initialisation_within_pytorch_bounds,
               sgd_with_momentum_and_weight_decay_follows_pytorch, adam_steps_follow_pytorch,
               optimizer_step_in_pieces_is_bit_identical_to_one_step,
               cosine_schedule_falls_from_lr_to_zero,
               cuda_device_fails_clearly_without_a_usable_gpu))
