/* Test FMU: y = k * u (direct feedthrough), a step counter and a sign flag.
 * doStep returns fmi2Discard when |u| > u_max (for the error-reporting tests).
 */
#define MODEL_GUID "cosimrun-test-feedthrough-1"
#define N_REAL 4
#define N_INTEGER 1
#define N_BOOLEAN 1
enum { U, Y, K, U_MAX };
enum { STEPS };
enum { POSITIVE };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[K] = 2.0;
    s->r[U_MAX] = 1e300;
}

static void model_update(ModelState *s) {
    s->r[Y] = s->r[K] * s->r[U];
    s->b[POSITIVE] = s->r[U] > 0.0;
}

static fmi2Status model_step(Instance *m, double t, double h) {
    (void)h;
    if (fabs(m->s.r[U]) > m->s.r[U_MAX]) {
        log_message(m, fmi2Discard, "logStatusDiscard", "input u=%g exceeds u_max=%g at t=%g", m->s.r[U],
                    m->s.r[U_MAX], t);
        return fmi2Discard;
    }
    m->s.i[STEPS] += 1;
    return fmi2OK;
}
