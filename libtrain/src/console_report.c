/* Console output of rank 0. The bar redraws at most ten times a second: printing
 * every step would cost more than a step. */
#include "console_report.h"

#include <stdio.h>
#include <unistd.h>

#include "clock_seconds.h"

void console_report_init(console_report_t *report, bool enabled, bool quiet, int log_every,
                         int epochs) {
  *report = (console_report_t){.enabled = enabled,
                               .steps = enabled && !quiet,
                               .tty = isatty(STDOUT_FILENO) == 1,
                               .log_every = log_every > 0 ? log_every : 100,
                               .epochs = epochs};
}

void console_report_close_line(console_report_t *report) {
  if (report->open_line) printf("\n");
  report->open_line = false;
}

void console_report_epoch_start(console_report_t *report) {
  report->epoch_start = clock_seconds();
  report->last_draw = 0.0;
}

void console_report_step(console_report_t *report, int epoch, uint64_t done, uint64_t total,
                         uint64_t global_step, double samples, double mean_loss) {
  if (!report->steps) return;
  double now = clock_seconds();
  double rate = samples / (now - report->epoch_start + 1e-9);
  if (report->tty) {
    if (now - report->last_draw < 0.1 && done != total) return;
    report->last_draw = now;
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int filled = total ? (int)((double)done / (double)total * WIDTH) : WIDTH;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    printf("\repoch %d/%d [%s] %3d%% %8.0f samples/s  loss %.4f ", epoch + 1, report->epochs, bar,
           total ? (int)(100 * done / total) : 100, rate, mean_loss);
    report->open_line = true;
    fflush(stdout);
  } else if (global_step % (uint64_t)report->log_every == 0) {
    printf("epoch %d/%d step %llu/%llu (global %llu): %.0f samples/s, loss %.4f\n", epoch + 1,
           report->epochs, (unsigned long long)done, (unsigned long long)total,
           (unsigned long long)global_step, rate, mean_loss);
    fflush(stdout);
  }
}

void console_report_epoch_end(console_report_t *report, int epoch, double train_loss,
                              double accuracy, double samples_per_s, double comm_share) {
  if (!report->enabled) return;
  console_report_close_line(report);
  printf("epoch %d/%d: train loss %.4f", epoch + 1, report->epochs, train_loss);
  if (accuracy >= 0.0) printf(", test accuracy %.2f%%", 100.0 * accuracy);
  printf(", %.0f samples/s, waiting on communication %.1f%% of step time\n", samples_per_s,
         100.0 * comm_share);
  fflush(stdout);
}
