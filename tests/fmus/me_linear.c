/* Test model-exchange FMU: x' = a x + b u with output y = x (no direct feedthrough).
 * Time event: at t_jump, x -> x + jump (once; the output jumps counts it). Step event:
 * after an integrator step that left x above x_max, x -> x_max (the output clamps counts it).
 */
#define MODEL_GUID "cosimrun-test-me-linear-1"
#define N_REAL 8
#define N_INTEGER 2
#define N_STATES 1
#define STATE_VRS {X}
#define DERIVATIVE_VRS {DER_X}
#define N_EVENT_INDICATORS 0
enum { X, DER_X, U, A, B, T_JUMP, JUMP, X_MAX };
enum { JUMPS, CLAMPS };
#include "cosimrun_me.h" /* the framework of the FMI version built (tests/fmus/builders.py inlines it) */

static void model_defaults(ModelState *s) {
    s->r[X] = 1.0; s->r[A] = -1.0; s->r[B] = 1.0; s->r[T_JUMP] = INFINITY; s->r[JUMP] = 0.0;
    s->r[X_MAX] = INFINITY;
}

static void model_update(ModelState *s) { s->r[DER_X] = s->r[A] * s->r[X] + s->r[B] * s->r[U]; }

static void model_indicators(ModelState *s, double z[]) { (void)s; (void)z; }

static void model_event(ModelState *s, int *states_changed) {
    if (s->i[JUMPS] == 0 && s->time >= s->r[T_JUMP]) {
        s->r[X] += s->r[JUMP];
        s->i[JUMPS] = 1;
        *states_changed = 1;
    }
    if (s->r[X] > s->r[X_MAX]) {
        s->r[X] = s->r[X_MAX];
        s->i[CLAMPS] += 1;
        *states_changed = 1;
    }
    s->t_next = s->i[JUMPS] == 0 && isfinite(s->r[T_JUMP]) ? s->r[T_JUMP] : INFINITY;
}

static int model_step_event(ModelState *s) { return s->r[X] > s->r[X_MAX]; }
