/* Test FMU: a ball bouncing on the floor h = 0, integrated exactly; impacts are
 * located analytically inside the step (v -> -e v; at rest below v_rest).
 *
 * With internal_step > 0 the ball advances only on its own grid k * internal_step
 * (exactly, impacts included) and h, v are those of the last grid point reached
 * (t_held), so the outputs are piecewise constant in time, as an FMU's outputs that
 * change only at its internal steps. t_held and the flag held (t_held is set) are part
 * of the FMU state, so a rollback restores them.
 */
#define MODEL_GUID "cosimrun-test-bouncing-ball-1"
#define N_REAL 9
#define N_BOOLEAN 2
enum { H, V, G, E, V_REST, DER_H, DER_V, INTERNAL_STEP, T_HELD };
enum { RESTING, HELD };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[H] = 1.0; s->r[V] = 0.0; s->r[G] = 9.81; s->r[E] = 0.8; s->r[V_REST] = 1e-3;
}

static void model_update(ModelState *s) {
    s->r[DER_H] = s->b[RESTING] ? 0.0 : s->r[V];
    s->r[DER_V] = s->b[RESTING] ? 0.0 : -s->r[G];
}

/* Advance h and v exactly by *span* seconds, impacts included. */
static fmi2Status advance(ModelState *s, double span) {
    double rest = span, g = s->r[G];
    int impacts = 0;
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

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    double step = s->r[INTERNAL_STEP], end = t + h, k, t_k;
    fmi2Status status;
    if (!s->b[HELD]) { s->r[T_HELD] = t; s->b[HELD] = 1; } /* the first step starts at the start time */
    if (!(step > 0.0)) {
        status = advance(s, h);
        s->r[T_HELD] = end;
        return status;
    }
    k = floor(end / step); /* the last grid point k * step <= end, exactly in floating point */
    while ((k + 1.0) * step <= end) k += 1.0;
    while (k * step > end) k -= 1.0;
    t_k = k * step;
    if (t_k <= s->r[T_HELD]) return fmi2OK;
    status = advance(s, t_k - s->r[T_HELD]);
    s->r[T_HELD] = t_k;
    return status;
}
