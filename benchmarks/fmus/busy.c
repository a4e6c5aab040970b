/* Benchmark FMU: x' = u - x (explicit Euler over the step) after a busy loop of `iterations`
 * floating-point operations per fmi2DoStep, the "real work" of an industrial model's step.
 * The loop's result is output `w`, so no compiler removes it; it depends on `iterations` only,
 * so every output is the same whichever thread steps the FMU.
 */
#define MODEL_GUID "cosimrun-bench-busy-1"
#define N_REAL 3
#define N_INTEGER 1
enum { U, X, W };
enum { ITERATIONS };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[X] = 1.0;
    s->i[ITERATIONS] = 1000;
}

static void model_update(ModelState *s) { (void)s; }

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    double acc = 0.0;
    (void)t;
    for (int k = 0; k < s->i[ITERATIONS]; k++) acc = acc * 0.999999 + 1e-6;
    s->r[W] = acc;
    s->r[X] += h * (s->r[U] - s->r[X]);
    return fmi2OK;
}
