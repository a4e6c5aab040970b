/* Test FMU: a stair that asks to terminate, like the Reference FMUs' Stair.
 *
 * counter = 1 + the number of instants k * period (k >= 1) after the start time reached, y = counter (Real). At t_stop the FMU
 * asks to terminate the simulation (after the step of that instant when it is one): FMI 2.0 co-simulation
 * returns fmi2Discard with fmi2LastSuccessfulTime = t_stop and fmi2Terminated; FMI 3.0 co-simulation
 * returns terminateSimulation from fmi3DoStep with lastSuccessfulTime = t_stop, or, with event mode, returns
 * at t_stop with eventHandlingNeeded (early when t_stop is inside the step) and asks to terminate in
 * fmi3UpdateDiscreteStates; model exchange asks in fmi2NewDiscreteStates / fmi3UpdateDiscreteStates at the
 * time event t_stop. Built on cosimrun_fmi2cs.h (FMI 2.0 co-simulation, the default), on the model-exchange
 * frameworks (MODEL_EXCHANGE, FMI 2.0 or 3.0), or on cosimrun_fmi3me.h with its co-simulation functions
 * here (CO_SIMULATION with FMI_VERSION 3).
 */
#define MODEL_GUID "cosimrun-test-stair-1"
#define N_REAL 4
#define N_INTEGER 1
#define N_BOOLEAN 2
enum { T_STOP, PERIOD, Y, LAST }; /* LAST: internal, the time the counter was last brought to (NaN: none) */
enum { COUNTER };
enum { TERMINATE, EVENT_MODE_USED }; /* internal, no variables */
#define MODEL_TERMINATED(s) ((s)->b[TERMINATE])

#if defined(MODEL_EXCHANGE) || defined(CO_SIMULATION)
#define N_STATES 0
#define STATE_VRS {0}
#define DERIVATIVE_VRS {0}
#define N_EVENT_INDICATORS 0
#include "cosimrun_me.h" /* the framework of the FMI version built (tests/fmus/builders.py inlines it) */
#else
#include "cosimrun_fmi2cs.h"
#endif

static void model_defaults(ModelState *s) {
    s->r[T_STOP] = 1e300;
    s->r[PERIOD] = 1.0;
    s->r[Y] = 1.0;
    s->r[LAST] = NAN;
    s->i[COUNTER] = 1;
}

/* The counter at time t: 1 + the instants k * period (k >= 1) up to t (to a relative 1e-9 of the period). */
static int counter_at(const ModelState *s, double t) {
    return 1 + (int)floor(t / s->r[PERIOD] + 1e-9);
}

/* Count the instants k * period after the time the counter was last brought to, up to t (the first call: t). */
static void advance_to(ModelState *s, double t) {
    if (isnan(s->r[LAST])) s->r[LAST] = t;
    s->i[COUNTER] += counter_at(s, t) - counter_at(s, s->r[LAST]);
    s->r[LAST] = t;
}

/* Whether t is t_stop (to 1e-9 relative). */
static int at_stop(const ModelState *s, double t) {
    return fabs(t - s->r[T_STOP]) <= 1e-9 * fmax(1.0, fabs(t));
}

/* The next event after t: the next instant k * period, or t_stop if it comes first. */
static double next_event(const ModelState *s, double t) {
    double next = s->r[PERIOD] * (floor(t / s->r[PERIOD] + 1e-9) + 1.0);
    return s->r[T_STOP] > t && !at_stop(s, t) && s->r[T_STOP] < next ? s->r[T_STOP] : next;
}

static void model_update(ModelState *s) { s->r[Y] = (double)s->i[COUNTER]; }

#if defined(MODEL_EXCHANGE) || defined(CO_SIMULATION)
static void model_indicators(ModelState *s, double z[]) { (void)s; (void)z; }

static void model_event(ModelState *s, int *states_changed) {
    (void)states_changed;
    advance_to(s, s->time);
    if (s->time >= s->r[T_STOP] || at_stop(s, s->time)) s->b[TERMINATE] = 1;
    s->t_next = s->b[TERMINATE] ? INFINITY : next_event(s, s->time);
}

static int model_step_event(ModelState *s) { (void)s; return 0; }
#endif

#ifdef CO_SIMULATION
fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resources,
                                         fmi3Boolean visible, fmi3Boolean loggingOn, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed, const fmi3ValueReference required[],
                                         size_t nRequired, fmi3InstanceEnvironment env, fmi3LogMessageCallback log,
                                         fmi3IntermediateUpdateCallback update) {
    Instance *m;
    (void)name; (void)resources; (void)visible; (void)earlyReturnAllowed; (void)required; (void)nRequired;
    (void)update;
    if (!token || strcmp(token, MODEL_GUID) != 0) return NULL;
    m = new_instance(loggingOn);
    if (!m) return NULL;
    m->env = env;
    m->log = log;
    m->s.b[EVENT_MODE_USED] = eventModeUsed;
    return m;
}

/* Step mode is the framework's continuous-time mode (from which fmi3EnterEventMode is allowed). */
fmi3Status fmi3EnterStepMode(fmi3Instance instance) { INSTANCE->mode = CONTINUOUS_TIME; return fmi3OK; }

fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 t, fmi3Float64 h, fmi3Boolean noSetPrior,
                      fmi3Boolean *eventNeeded, fmi3Boolean *terminate, fmi3Boolean *early, fmi3Float64 *last) {
    ModelState *s = &INSTANCE->s;
    double end = t + h, eps = 1e-9 * fmax(1.0, fabs(end));
    int changed = 0;
    (void)noSetPrior;
    *eventNeeded = false; *terminate = false; *early = false;
    s->time = t;
    advance_to(s, t);
    for (;;) {
        double te = next_event(s, s->time);
        if (te > end + eps) { s->time = end; break; }
        s->time = te;
        if (s->b[EVENT_MODE_USED]) { /* handled in event mode (fmi3UpdateDiscreteStates) */
            *eventNeeded = true;
            *early = te < end - eps;
            if (!*early) s->time = end;
            break;
        }
        model_event(s, &changed);
        if (s->b[TERMINATE]) { *terminate = true; break; }
    }
    *last = s->time;
    model_update(s);
    return fmi3OK;
}
#endif

#if !defined(MODEL_EXCHANGE) && !defined(CO_SIMULATION)
static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    double end = t + h;
    advance_to(s, t);
    if (s->r[T_STOP] > t && (s->r[T_STOP] <= end || at_stop(s, end))) {
        s->time = s->r[T_STOP];
        advance_to(s, s->time);
        s->b[TERMINATE] = 1;
        log_message(m, fmi2OK, "logEvents", "terminating at t_stop=%g", s->r[T_STOP]);
        return fmi2Discard;
    }
    advance_to(s, end);
    return fmi2OK;
}
#endif
