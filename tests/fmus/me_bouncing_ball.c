/* Test model-exchange FMU: a ball falling under gravity onto the floor h = 0.
 * One event indicator z (h, 1 at rest); at an impact h -> DBL_MIN and v -> -e v, and below
 * v_min the ball rests on the floor. The integration is the environment's. Compiled on
 * cosimrun_fmi2me.h (FMI 2.0) or cosimrun_fmi3me.h (FMI 3.0).
 */
#define MODEL_GUID "cosimrun-test-me-bouncing-ball-1"
#define N_REAL 8
#define N_INTEGER 1
#define N_BOOLEAN 1
#define N_STATES 2
#define STATE_VRS {H, V}
#define DERIVATIVE_VRS {DER_H, DER_V}
#define N_EVENT_INDICATORS 1
enum { H, V, G, E, V_MIN, DER_H, DER_V, Z };
enum { IMPACTS };
enum { RESTING };
#include <float.h>
#include "cosimrun_me.h" /* the framework of the FMI version built (tests/fmus/builders.py inlines it) */

static void model_defaults(ModelState *s) {
    s->r[H] = 1.0; s->r[V] = 0.0; s->r[G] = 9.81; s->r[E] = 0.8; s->r[V_MIN] = 1e-3;
}

static void model_indicators(ModelState *s, double z[]) { z[0] = s->b[RESTING] ? 1.0 : s->r[H]; }

static void model_update(ModelState *s) {
    s->r[DER_H] = s->b[RESTING] ? 0.0 : s->r[V];
    s->r[DER_V] = s->b[RESTING] ? 0.0 : -s->r[G];
    model_indicators(s, &s->r[Z]);
}

static void model_event(ModelState *s, int *states_changed) {
    if (s->b[RESTING] || s->r[H] > 0.0 || s->r[V] >= 0.0) return;
    s->r[H] = DBL_MIN; /* just above the floor, as the Reference-FMUs' ball: the event moves z across zero */
    s->r[V] = -s->r[E] * s->r[V];
    s->i[IMPACTS] += 1;
    if (s->r[V] < s->r[V_MIN]) { s->r[V] = 0.0; s->b[RESTING] = 1; }
    *states_changed = 1;
}

static int model_step_event(ModelState *s) { (void)s; return 0; }
