// trainer/spike_detector.h — gradient-norm outliers (trainer_config.skip_spike_zscore), as
// llm.c's llm.c/outlier_detector.h: train_step (trainer/train_step.h) scores each norm and skips
// the update of one whose z-score is too high.
//
// The z-score of a value against the mean and standard deviation of the values seen before it,
// over a sliding window (128 in the trainer). Three choices differ from llm.c:
//   * mean and variance are recomputed from the window in two passes over deviations from one
//     of its values (a few hundred flops per step; Welford's update gives the same stability
//     but a sliding window needs its removal step too) instead of running sums of x and x^2:
//     no cancellation in E[x^2] - E[x]^2, which loses every digit when the spread is small
//     against the mean, and no drift from adding and removing values for millions of steps;
//   * the value is scored BEFORE it joins the window, so a spike does not widen its own
//     baseline (with llm.c's inclusive score one outlier among n values can never score above
//     (n-1)/sqrt(n), 11.2 for 128, whatever its size);
//   * like llm.c, every scored value then joins the window, skipped ones included: a lasting
//     change of the norm's level is absorbed within one window instead of skipping forever.
// No score (NaN) until the window is full; a window with zero spread scores 0. The state is
// not saved in snapshots: after a resume the window fills again.
#ifndef MINGPT_SPIKE_DETECTOR_H
#define MINGPT_SPIKE_DETECTOR_H

#define SPIKE_WINDOW_MAX 128
typedef struct {
    double buf[SPIKE_WINDOW_MAX];
    int window;             // values scored against (1..SPIKE_WINDOW_MAX)
    int count;              // values held (<= window)
    int next;               // ring position the next value goes to
} SpikeDetector;

// An empty detector over the last `window` values (clamped to [2, SPIKE_WINDOW_MAX]).
void spike_init(SpikeDetector *d, int window);

// The z-score (x - mean) / std of x against the values held (population std), or NaN while
// fewer than `window` are held; then x joins the window (the oldest leaves). A non-finite x
// is neither scored (NaN) nor held.
double spike_observe(SpikeDetector *d, double x);

#endif
