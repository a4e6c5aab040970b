/* Test FMU: a ball bouncing on the floor h = 0, integrated exactly; impacts are
 * located analytically inside the step (v -> -e v; at rest below v_rest).
 */
#define MODEL_GUID "cosimrun-test-bouncing-ball-1"
#define N_REAL 7
#define N_BOOLEAN 1
enum { H, V, G, E, V_REST, DER_H, DER_V };
enum { RESTING };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[H] = 1.0; s->r[V] = 0.0; s->r[G] = 9.81; s->r[E] = 0.8; s->r[V_REST] = 1e-3;
}

static void model_update(ModelState *s) {
    s->r[DER_H] = s->b[RESTING] ? 0.0 : s->r[V];
    s->r[DER_V] = s->b[RESTING] ? 0.0 : -s->r[G];
}

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    double rest = h, g = s->r[G];
    int impacts = 0;
    (void)t;
    while (rest > 0.0 && !s->b[RESTING]) {
        double x = s->r[H], v = s->r[V];
        double hit = (v + sqrt(v * v + 2.0 * g * (x > 0.0 ? x : 0.0))) / g; /* next time with h = 0 */
        if (hit >= rest) {
            s->r[H] = x + v * rest - 0.5 * g * rest * rest;
            s->r[V] = v - g * rest;
            rest = 0.0;
        } else {
            s->r[H] = 0.0;
            s->r[V] = -s->r[E] * (v - g * hit);
            rest -= hit;
            if (s->r[V] <= s->r[V_REST]) { s->r[V] = 0.0; s->b[RESTING] = 1; }
            if (++impacts > 10000) return fmi2Discard;
        }
    }
    return fmi2OK;
}
