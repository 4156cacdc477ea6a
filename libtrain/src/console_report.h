/* Rank 0's console output while training: a progress bar on a terminal, one line every
 * N steps otherwise, and the per-epoch summary. */
#ifndef TRAIN_CONSOLE_REPORT_H
#define TRAIN_CONSOLE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  bool enabled; /* rank 0 */
  bool steps;   /* per-step output too (not --quiet) */
  bool tty;
  bool open_line; /* a bar is drawn and its line not yet ended */
  int log_every;
  int epochs;
  double last_draw;
  double epoch_start;
} console_report_t;

void console_report_init(console_report_t *report, bool enabled, bool quiet, int log_every,
                         int epochs);
void console_report_epoch_start(console_report_t *report);
/* After an optimizer step: `done` of `total` steps of this epoch, samples seen by all
 * ranks so far in the epoch, this rank's running mean loss. */
void console_report_step(console_report_t *report, int epoch, uint64_t done, uint64_t total,
                         uint64_t global_step, double samples, double mean_loss);
void console_report_epoch_end(console_report_t *report, int epoch, double train_loss,
                              double accuracy, double samples_per_s, double comm_share);
/* End an open progress bar line (before printing anything else). */
void console_report_close_line(console_report_t *report);

#endif
