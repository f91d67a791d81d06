// trainer/spike_detector.c — see spike_detector.h.
#include "trainer/spike_detector.h"

#include <math.h>

void spike_init(SpikeDetector *d, int window) {
    d->window = window < 2 ? 2 : window > SPIKE_WINDOW_MAX ? SPIKE_WINDOW_MAX : window;
    d->count = 0;
    d->next = 0;
}

double spike_observe(SpikeDetector *d, double x) {
    if (!isfinite(x)) return NAN;
    double z = NAN;
    if (d->count == d->window) {
        // Two passes over deviations from a value of the window (exact differences of
        // nearby doubles), so that a large mean costs no digits of the spread.
        const double k = d->buf[0];
        double dev = 0.0, var = 0.0;
        for (int i = 0; i < d->count; i++) dev += d->buf[i] - k;
        const double mean = k + dev / d->count;
        for (int i = 0; i < d->count; i++) var += (d->buf[i] - mean) * (d->buf[i] - mean);
        const double sd = sqrt(var / d->count);
        z = sd > 0 ? (x - mean) / sd : 0.0;
    }
    d->buf[d->next] = x;
    d->next = (d->next + 1) % d->window;
    if (d->count < d->window) d->count++;
    return z;
}
