/* Test FMU: x' = u, integrated exactly (u is held over a step). A step that would cross
 * t_discard ends there: the FMU advances exactly to t_discard and returns fmi2Discard, and
 * fmi2LastSuccessfulTime reports t_discard (FMI 2.0's early end of a communication step).
 * Outputs h_min and h_max are the smallest and largest step sizes asked for; discards counts
 * the steps ended early.
 */
#define MODEL_GUID "cosimrun-test-discard-1"
#define N_REAL 5
#define N_INTEGER 1
enum { U, X, T_DISCARD, H_MIN, H_MAX };
enum { DISCARDS };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[X] = 1.0;
    s->r[T_DISCARD] = 1e300;
    s->r[H_MIN] = 1e300;
}

static void model_update(ModelState *s) { (void)s; }

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    double t_discard = s->r[T_DISCARD];
    if (h < s->r[H_MIN]) s->r[H_MIN] = h;
    if (h > s->r[H_MAX]) s->r[H_MAX] = h;
    if (t < t_discard && t_discard < t + h) {
        s->r[X] += s->r[U] * (t_discard - t);
        s->time = t_discard;
        s->i[DISCARDS] += 1;
        log_message(m, fmi2Discard, "logStatusDiscard", "the step from t=%g with h=%g ends at t_discard=%g", t, h,
                    t_discard);
        return fmi2Discard;
    }
    s->r[X] += s->r[U] * h;
    return fmi2OK;
}
