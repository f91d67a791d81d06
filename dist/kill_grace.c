// dist/kill_grace.c — see kill_grace.h.
#include "dist/kill_grace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

double kill_grace_mpirun(void) {
    if (!getenv("OMPI_MCA_orte_hnp_uri")) return -1;
    const char *v = getenv("OMPI_MCA_odls_base_sigkill_timeout");
    if (!v || !*v) return 1;
    char *end;
    const double g = strtod(v, &end);
    return *end || !isfinite(g) || g < 0 ? -1 : g;
}

bool kill_grace_warning(double grace_s, double iter_s, double save_s, bool save_measured, double snapshot_bytes,
                        long save_every_iters, char *buf, size_t len) {
    const double need = iter_s + save_s;
    if (!(grace_s >= 0) || !(need > grace_s)) return false;
    char save[96], lose[96];
    if (save_measured) snprintf(save, sizeof save, "save %.2g s", save_s);
    else snprintf(save, sizeof save, "save of %.2g MB ~%.2g s", snapshot_bytes / 1e6, save_s);
    if (save_every_iters > 0) snprintf(lose, sizeof lose, "up to save_every_iters = %ld iterations", save_every_iters);
    else snprintf(lose, sizeof lose, "the iterations since the last snapshot (save_every_iters = 0: one at each epoch's end)");
    snprintf(buf, len, "mingpt: warning: mpirun kills the ranks %g s after SIGTERM (odls_base_sigkill_timeout), "
             "but a stop needs one iteration plus a snapshot save, ~%.2g s here (iteration %.2g s, %s): Ctrl-C would "
             "end the job without a snapshot and lose %s. Run mpirun with --mca odls_base_sigkill_timeout %.0f",
             grace_s, need, iter_s, save, lose, ceil(2 * need) + 1);
    return true;
}
