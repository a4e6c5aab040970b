/* Test FMU: x' = u, integrated exactly over a step with u held, or (built with INPUT_DERIVATIVES)
 * as the polynomial u + du1 (s - t) + du2 (s - t)^2 / 2 of fmi2SetRealInputDerivatives; output
 * du1 is the first derivative given for the last step. A step that would cross
 * t_discard ends there: the FMU advances exactly to t_discard and returns fmi2Discard, and
 * fmi2LastSuccessfulTime reports t_discard (FMI 2.0's early end of a communication step).
 * Outputs h_min and h_max are the smallest and largest step sizes asked for; discards counts
 * the steps ended early and steps every step (each fmi2DoStep that reaches the model): both are
 * part of the FMU state, so a step undone by fmi2SetFMUstate is uncounted. Parameter work (s) makes
 * each step wait that long first, off the CPU (as a step waiting for hardware or a remote model
 * does), so that steps overlap on a loaded machine too.
 */
#define MODEL_GUID "cosimrun-test-discard-1"
#define N_REAL 7
#define N_INTEGER 2
enum { U, X, T_DISCARD, H_MIN, H_MAX, DU1, WORK };
enum { DISCARDS, STEPS };
#include "cosimrun_fmi2cs.h"
#include <time.h>

static void model_defaults(ModelState *s) {
    s->r[X] = 1.0;
    s->r[T_DISCARD] = 1e300;
    s->r[H_MIN] = 1e300;
}

static void model_update(ModelState *s) { (void)s; }

static double integral(const ModelState *s, double h) {
    return h * (s->r[U] + h * (s->du[0][U] / 2.0 + h * s->du[1][U] / 6.0));
}

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    double t_discard = s->r[T_DISCARD];
    s->i[STEPS] += 1;
    if (s->r[WORK] > 0.0) {
        struct timespec pause = {(time_t)s->r[WORK], (long)(1e9 * (s->r[WORK] - (double)(time_t)s->r[WORK]))};
        nanosleep(&pause, NULL);
    }
    s->r[DU1] = s->du[0][U];
    if (h < s->r[H_MIN]) s->r[H_MIN] = h;
    if (h > s->r[H_MAX]) s->r[H_MAX] = h;
    if (t < t_discard && t_discard < t + h) {
        s->r[X] += integral(s, t_discard - t);
        s->time = t_discard;
        s->i[DISCARDS] += 1;
        log_message(m, fmi2Discard, "logStatusDiscard", "the step from t=%g with h=%g ends at t_discard=%g", t, h,
                    t_discard);
        return fmi2Discard;
    }
    s->r[X] += integral(s, h);
    return fmi2OK;
}
