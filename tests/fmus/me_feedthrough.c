/* Test model-exchange FMU with discrete inputs, as the Reference-FMUs' Feedthrough: a continuous input u
 * (y = u), discrete inputs ud (Real), k (Integer) and on (Boolean) that the model takes at events only
 * (yd, k_out, on_out and x' = ud + k use the values of the last event), and one event indicator x - level.
 * It enforces FMI's modes as the Reference FMUs do: a discrete input set outside initialization and event
 * mode is an error. Output updates counts the event iterations that took a changed discrete input,
 * crossings those at which x - level had changed sign. Compiled on cosimrun_fmi2me.h or cosimrun_fmi3me.h.
 */
#define MODEL_GUID "cosimrun-test-me-feedthrough-1"
#define N_REAL 9
#define N_INTEGER 4
#define N_BOOLEAN 3
#define N_STATES 1
#define STATE_VRS {X}
#define DERIVATIVE_VRS {DER_X}
#define N_EVENT_INDICATORS 1
enum { U, Y, UD, YD, X, DER_X, LEVEL, Z, UD_HELD };
enum { K, K_OUT, UPDATES, CROSSINGS };
enum { ON, ON_OUT, ABOVE };
/* Continuous inputs in any mode but terminated; discrete inputs in initialization and event mode (and before
 * initialization, as start values). */
#define MODEL_MAY_SET(mode, kind, index)                                                                         \
    ((kind) == 'R' && (index) == U ? (mode) != TERMINATED                                                        \
     : ((kind) == 'R' && (index) != UD) || (mode) == INSTANTIATED || (mode) == INITIALIZATION || (mode) == EVENT_MODE)
#include "cosimrun_me.h" /* the framework of the FMI version built (tests/fmus/builders.py inlines it) */

static void model_defaults(ModelState *s) { s->r[LEVEL] = 1.0; }

static void model_indicators(ModelState *s, double z[]) { z[0] = s->r[X] - s->r[LEVEL]; }

static void model_update(ModelState *s) {
    s->r[Y] = s->r[U];
    s->r[DER_X] = s->r[UD_HELD] + s->i[K_OUT];
    model_indicators(s, &s->r[Z]);
}

static void model_event(ModelState *s, int *states_changed) {
    (void)states_changed;
    if (s->r[UD_HELD] != s->r[UD] || s->i[K_OUT] != s->i[K] || s->b[ON_OUT] != s->b[ON]) {
        s->r[UD_HELD] = s->r[UD];
        s->r[YD] = s->r[UD];
        s->i[K_OUT] = s->i[K];
        s->b[ON_OUT] = s->b[ON];
        s->i[UPDATES] += 1;
    }
    if ((s->r[X] > s->r[LEVEL]) != (s->b[ABOVE] != 0)) {
        s->b[ABOVE] = s->r[X] > s->r[LEVEL];
        s->i[CROSSINGS] += 1;
    }
}

static int model_step_event(ModelState *s) { (void)s; return 0; }
