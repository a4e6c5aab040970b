/* Test FMU for coupled initialization: y = a * u + b + q * u^2 (direct feedthrough, also in Initialization
 * Mode), and u0, the input the FMU starts with: it follows u until the first step, then holds (a state that
 * initializes from its input).
 */
#define MODEL_GUID "cosimrun-test-affine-1"
#define N_REAL 6
#define N_INTEGER 1
enum { U, Y, A, B, Q, U0 };
enum { STEPS };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[A] = 1.0;
}

static void model_update(ModelState *s) {
    s->r[Y] = s->r[A] * s->r[U] + s->r[B] + s->r[Q] * s->r[U] * s->r[U];
    if (s->i[STEPS] == 0) s->r[U0] = s->r[U];
}

static fmi2Status model_step(Instance *m, double t, double h) {
    (void)t; (void)h;
    m->s.i[STEPS] += 1;
    return fmi2OK;
}
