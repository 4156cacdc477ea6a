/* The fixed-point sum of train --elastic --bit-identical (libtrain/src/exact_sum.c): the
 * same bits in any order and grouping, no overflow at the largest values and shard
 * counts, NaN and Inf refused, zeros and subnormals, each rounding done once, and what
 * becomes of values far below the largest. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exact_sum.h"

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The fixed-point sum of rows[0..terms) (n floats each), taken by `groups` accumulators
 * (row s into accumulator s mod groups, added in `order`), then the accumulators added:
 * as ranks would, each converting its rows and the all-reduce adding the int64. */
static void fixed_sum(const float *rows, size_t terms, size_t n, size_t groups, const size_t *order,
                      float *out) {
  float max_abs = 0.0f;
  for (size_t s = 0; s < terms; s++) {
    float m;
    ck_assert(exact_sum_max_abs(rows + s * n, n, &m));
    if (m > max_abs) max_abs = m;
  }
  int e = exact_sum_exponent(max_abs);
  int64_t *acc = calloc((groups + 1) * n, sizeof(int64_t)), *one = acc + groups * n;
  ck_assert_ptr_nonnull(acc);
  for (size_t k = 0; k < terms; k++) {
    size_t s = order != NULL ? order[k] : k;
    exact_sum_rows(rows + s * n, 1, n, n, e, one);
    for (size_t i = 0; i < n; i++) acc[(s % groups) * n + i] += one[i];
  }
  for (size_t g = groups; g-- > 1;)
    for (size_t i = 0; i < n; i++) acc[i] += acc[g * n + i];
  exact_sum_to_float(acc, n, e, out);
  free(acc);
}

START_TEST(order_matters_to_a_float_sum_and_not_to_the_fixed_point_one) {
  /* 1 + 2^-24 + 2^-24: left to right each small term is lost (ties to even), right to
   * left they make 2^-23. The exact sum is 1 + 2^-23. */
  const float rows[3] = {1.0f, 0x1p-24f, 0x1p-24f};
  float left = (rows[0] + rows[1]) + rows[2], right = rows[0] + (rows[1] + rows[2]);
  ck_assert(left != right);
  const size_t orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (size_t groups = 1; groups <= 3; groups++)
    for (size_t o = 0; o < 6; o++) {
      float got;
      fixed_sum(rows, 3, 1, groups, orders[o], &got);
      ck_assert_msg(got == 1.0f + 0x1p-23f, "groups %zu order %zu: %a", groups, o, (double)got);
    }
}
END_TEST

START_TEST(random_rows_give_the_same_bits_whatever_the_world_and_order) {
  enum { S = 8, N = 4096 };
  float *rows = malloc(sizeof(float) * S * N), want[N], got[N];
  ck_assert_ptr_nonnull(rows);
  uint64_t seed = 7;
  for (size_t i = 0; i < (size_t)S * N; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    /* signs both ways, magnitudes over 2^-10 .. 2^10: every value is exact in fixed
     * point, and the long double sum is exact, so its rounding is the right answer */
    float mant = (float)((seed >> 40) & 0xffffff) / (float)(1 << 24);
    int exp = (int)((seed >> 20) % 21) - 10;
    rows[i] = ldexpf((seed & 1) ? -mant : mant, exp);
  }
  for (size_t i = 0; i < N; i++) {
    long double exact = 0.0L;
    for (size_t s = 0; s < S; s++) exact += rows[s * N + i];
    want[i] = (float)exact;
  }
  const size_t reversed[S] = {7, 6, 5, 4, 3, 2, 1, 0}, mixed[S] = {3, 0, 6, 1, 7, 4, 2, 5};
  const size_t *orders[] = {NULL, reversed, mixed};
  for (size_t groups = 1; groups <= S; groups++)
    for (size_t o = 0; o < 3; o++) {
      fixed_sum(rows, S, N, groups, orders[o], got);
      for (size_t i = 0; i < N; i++)
        ck_assert_msg(bits_of(got[i]) == bits_of(want[i]), "groups %zu order %zu [%zu]: %a vs %a",
                      groups, o, i, (double)got[i], (double)want[i]);
    }
  free(rows);
}
END_TEST

START_TEST(the_largest_values_and_shard_counts_do_not_overflow) {
  const float maxima[] = {FLT_MAX, 1.0f, 0.75f, 3.0f, FLT_MIN, 0x1p-149f};
  const size_t counts[] = {1, 2, 3, 5, 8, EXACT_SUM_MAX_TERMS};
  for (size_t m = 0; m < sizeof maxima / sizeof *maxima; m++)
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
      float v = maxima[m];
      size_t terms = counts[c];
      int e = exact_sum_exponent(v);
      /* the largest value takes the 50 bits: in [2^49, 2^50) */
      double scaled = ldexp((double)v, e);
      ck_assert_msg(scaled < 0x1p50 && scaled >= 0x1p49, "max %a: e %d scales it to %a", (double)v,
                    e, scaled);
      for (int sign = -1; sign <= 1; sign += 2) {
        float x = (float)sign * v;
        int64_t acc = 0, one;
        for (size_t k = 0; k < terms; k++) {
          exact_sum_rows(&x, 1, 1, 1, e, &one);
          acc += one;
          ck_assert(acc >= -((int64_t)1 << 62) && acc <= ((int64_t)1 << 62));
        }
        /* and as one call over `terms` rows (stride 0: the same value each time) */
        int64_t all = 12345;
        exact_sum_rows(&x, terms, 0, 1, e, &all);
        ck_assert(all == acc);
        float got;
        exact_sum_to_float(&acc, 1, e, &got);
        float want = (float)((long double)x * (long double)terms);
        ck_assert_msg(bits_of(got) == bits_of(want), "%zu x %a: %a, want %a", terms, (double)x,
                      (double)got, (double)want);
      }
    }
}
END_TEST

START_TEST(nan_and_infinity_have_no_fixed_point_value) {
  const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
  for (size_t b = 0; b < 4; b++) {
    float row[5] = {1.0f, -2.0f, 0.0f, 3.0f, 4.0f}, m = 0.0f;
    row[2] = bad[b];
    ck_assert(!exact_sum_max_abs(row, 5, &m));
    ck_assert(isinf(m) && m > 0);
    ck_assert(exact_sum_max_abs(row, 2, &m) && m == 2.0f);
  }
  float big = -FLT_MAX, m;
  ck_assert(exact_sum_max_abs(&big, 1, &m) && m == FLT_MAX);
  ck_assert(exact_sum_max_abs(NULL, 0, &m) && m == 0.0f);
}
END_TEST

START_TEST(zeros_sum_to_positive_zero) {
  ck_assert_int_eq(exact_sum_exponent(0.0f), 0);
  const float rows[4] = {-0.0f, 0.0f, -0.0f, -0.0f};
  float got;
  fixed_sum(rows, 4, 1, 2, NULL, &got);
  ck_assert(got == 0.0f && !signbit(got));
}
END_TEST

START_TEST(conversions_round_to_nearest_even_once) {
  /* to fixed point: halves go to the even integer */
  const float x[4] = {0.5f, 1.5f, -2.5f, 0.25f};
  int64_t acc[4];
  exact_sum_rows(x, 1, 4, 4, 0, acc);
  ck_assert(acc[0] == 0 && acc[1] == 2 && acc[2] == -2 && acc[3] == 0);
  /* back to float in one rounding: 2^60 + 2^36 + 1 is above the halfway point between
   * floats 2^60 and 2^60 + 2^37, so it rounds up; through a double first it would lose
   * the 1, land on the halfway point and round to even, down. */
  int64_t big = ((int64_t)1 << 60) + ((int64_t)1 << 36) + 1;
  float got;
  exact_sum_to_float(&big, 1, 0, &got);
  ck_assert_msg(got == 0x1p60f + 0x1p37f, "%a", (double)got);
  exact_sum_to_float(&big, 1, 70, &got);
  ck_assert_msg(got == 0x1p-10f + 0x1p-33f, "%a", (double)got);
}
END_TEST

START_TEST(values_far_below_the_largest_round_to_its_grid) {
  /* The largest, 1, scales to 2^49: the grid is 2^-49. 3 * 2^-50 (1.5 steps) rounds to
   * 2 steps, 2^-50 (half a step) to 0 (even), 2^-60 to 0; 2^-26 keeps all its bits. */
  const float row[5] = {1.0f, 3 * 0x1p-50f, 0x1p-50f, 0x1p-60f, 0x1.fffffep-26f};
  float got[5];
  fixed_sum(row, 1, 5, 1, NULL, got);
  ck_assert(got[0] == 1.0f && got[1] == 0x1p-48f && got[2] == 0.0f && got[3] == 0.0f);
  ck_assert(got[4] == row[4]);
}
END_TEST

START_TEST(rows_are_summed_in_blocks_as_one_by_one) {
  /* 3 rows of 5000 values (blocks of 2048 and a remainder), stride with a gap; no rows
   * gives zeros */
  enum { R = 3, N = 5000, STRIDE = 5003 };
  float *rows = malloc(sizeof(float) * R * STRIDE);
  int64_t *all = malloc(sizeof(int64_t) * N), *one = malloc(sizeof(int64_t) * N);
  ck_assert(rows != NULL && all != NULL && one != NULL);
  for (size_t i = 0; i < (size_t)R * STRIDE; i++)
    rows[i] = (float)((int)(i * 7919 % 2001) - 1000) / 64;
  exact_sum_rows(rows, R, STRIDE, N, 20, all);
  for (size_t i = 0; i < N; i++) {
    int64_t want = 0;
    for (size_t j = 0; j < R; j++) want += (int64_t)ldexp(rows[j * STRIDE + i], 20);
    ck_assert_msg(all[i] == want, "[%zu]", i);
  }
  exact_sum_rows(rows, 0, STRIDE, N, 20, one);
  for (size_t i = 0; i < N; i++) ck_assert(one[i] == 0);
  free(rows);
  free(all);
  free(one);
}
END_TEST

static Suite *exact_sum_suite(void) {
  Suite *s = suite_create("train_exact_sum");
  TCase *tc = tcase_create("exact_sum");
  tcase_add_test(tc, order_matters_to_a_float_sum_and_not_to_the_fixed_point_one);
  tcase_add_test(tc, random_rows_give_the_same_bits_whatever_the_world_and_order);
  tcase_add_test(tc, the_largest_values_and_shard_counts_do_not_overflow);
  tcase_add_test(tc, nan_and_infinity_have_no_fixed_point_value);
  tcase_add_test(tc, zeros_sum_to_positive_zero);
  tcase_add_test(tc, conversions_round_to_nearest_even_once);
  tcase_add_test(tc, values_far_below_the_largest_round_to_its_grid);
  tcase_add_test(tc, rows_are_summed_in_blocks_as_one_by_one);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(exact_sum_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
