/* An FMI 3.0 co-simulation bouncing ball with an array port, for the tests.
 *
 * h'' = -g between impacts; an impact (h = 0 falling) is found exactly inside fmi3DoStep (the
 * parabola's root). With early return allowed (event mode used), fmi3DoStep returns at the impact
 * with eventHandlingNeeded; the bounce v := -e v happens in fmi3UpdateDiscreteStates. Without
 * event mode, the FMU bounces internally and steps on. Below v_rest the ball rests on the ground.
 * scaled[i] = gain[i] * h + offset (array input and output, direct feedthrough from gain).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fmi3Functions.h"

#ifndef CAN_GET_SET_STATE
#define CAN_GET_SET_STATE 1
#endif

enum { VR_TIME, VR_H, VR_V, VR_G, VR_E, VR_GAIN, VR_SCALED, VR_BOUNCES, VR_DER_V, VR_H32, VR_FALLING, VR_OFFSET,
       VR_PHASE, VR_V_REST };

typedef struct {
    double time, h, v, g, e, v_rest, gain[3];
    int32_t bounces;
    int16_t offset;
    bool impact, resting, event_mode, early_return, in_event_mode;
} State;

typedef struct {
    State s;
    fmi3InstanceEnvironment env;
    fmi3LogMessageCallback log;
} Model;

static void bounce(State *s) {
    s->v = -s->e * s->v;
    s->h = 0.0;
    s->bounces += 1;
    s->impact = false;
    if (fabs(s->v) < s->v_rest) { s->v = 0.0; s->resting = true; }
}

/* time from now to the next impact, +inf if none */
static double impact_in(const State *s) {
    if (s->resting) return INFINITY;
    if (s->h <= 0.0 && s->v < 0.0) return 0.0;
    double disc = s->v * s->v + 2.0 * s->g * s->h;
    if (disc < 0.0) return INFINITY;
    return (s->v + sqrt(disc)) / s->g;
}

static void fly(State *s, double tau) {
    if (s->resting) return;
    s->h = s->h + s->v * tau - 0.5 * s->g * tau * tau;
    s->v = s->v - s->g * tau;
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resources, fmi3Boolean visible,
                                         fmi3Boolean loggingOn, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed, const fmi3ValueReference required[],
                                         size_t nRequired, fmi3InstanceEnvironment env, fmi3LogMessageCallback log,
                                         fmi3IntermediateUpdateCallback intermediateUpdate) {
    (void)name; (void)token; (void)resources; (void)visible; (void)loggingOn; (void)required; (void)nRequired;
    (void)intermediateUpdate;
    Model *m = calloc(1, sizeof(Model));
    if (!m) return NULL;
    m->env = env; m->log = log;
    State *s = &m->s;
    s->h = 1.0; s->g = 9.81; s->e = 0.7; s->v_rest = 1e-3;
    s->gain[0] = 1.0; s->gain[1] = 2.0; s->gain[2] = 3.0;
    s->event_mode = eventModeUsed; s->early_return = eventModeUsed && earlyReturnAllowed;
    return m;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String a, fmi3String b, fmi3String c, fmi3Boolean d, fmi3Boolean e,
                                          fmi3InstanceEnvironment f, fmi3LogMessageCallback g) {
    (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g;
    return NULL;
}

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String a, fmi3String b, fmi3String c, fmi3Boolean d,
                                               fmi3Boolean e, fmi3InstanceEnvironment f, fmi3LogMessageCallback g,
                                               fmi3ClockUpdateCallback h, fmi3LockPreemptionCallback i,
                                               fmi3UnlockPreemptionCallback j) {
    (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; (void)i; (void)j;
    return NULL;
}

const char *fmi3GetVersion(void) { return fmi3Version; }
void fmi3FreeInstance(fmi3Instance inst) { free(inst); }
fmi3Status fmi3SetDebugLogging(fmi3Instance i, fmi3Boolean on, size_t n, const fmi3String c[]) {
    (void)i; (void)on; (void)n; (void)c; return fmi3OK;
}
fmi3Status fmi3EnterInitializationMode(fmi3Instance i, fmi3Boolean td, fmi3Float64 tol, fmi3Float64 start,
                                       fmi3Boolean sd, fmi3Float64 stop) {
    (void)td; (void)tol; (void)sd; (void)stop;
    ((Model *)i)->s.time = start;
    return fmi3OK;
}
fmi3Status fmi3ExitInitializationMode(fmi3Instance i) {
    Model *m = i;
    m->s.in_event_mode = m->s.event_mode;
    return fmi3OK;
}
fmi3Status fmi3EnterEventMode(fmi3Instance i) { ((Model *)i)->s.in_event_mode = true; return fmi3OK; }
fmi3Status fmi3EnterStepMode(fmi3Instance i) { ((Model *)i)->s.in_event_mode = false; return fmi3OK; }
fmi3Status fmi3Terminate(fmi3Instance i) { (void)i; return fmi3OK; }
fmi3Status fmi3Reset(fmi3Instance i) { (void)i; return fmi3Error; }

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance i, fmi3Boolean *needUpdate, fmi3Boolean *terminate,
                                    fmi3Boolean *nominalsChanged, fmi3Boolean *statesChanged,
                                    fmi3Boolean *nextTimeDefined, fmi3Float64 *nextTime) {
    State *s = &((Model *)i)->s;
    *statesChanged = s->impact;
    if (s->impact) bounce(s);
    *needUpdate = false; *terminate = false; *nominalsChanged = false; *nextTimeDefined = false; *nextTime = 0.0;
    return fmi3OK;
}

fmi3Status fmi3DoStep(fmi3Instance i, fmi3Float64 t, fmi3Float64 dt, fmi3Boolean noSetFMUStatePriorToCurrentPoint,
                      fmi3Boolean *eventHandlingNeeded, fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn,
                      fmi3Float64 *lastSuccessfulTime) {
    (void)noSetFMUStatePriorToCurrentPoint;
    State *s = &((Model *)i)->s;
    double end = t + dt, eps = 1e-12 * fmax(1.0, fabs(end));
    *eventHandlingNeeded = false; *terminateSimulation = false; *earlyReturn = false;
    s->time = t;
    while (1) {
        double tau = impact_in(s);
        double left = end - s->time;
        if (tau > left + eps) {          /* no impact in this step */
            fly(s, left);
            s->time = end;
            break;
        }
        fly(s, tau);
        s->h = 0.0;
        s->impact = true;
        if (tau >= left - eps) {         /* the impact is the step's end */
            s->time = end;
            if (s->event_mode) { *eventHandlingNeeded = true; } else { bounce(s); }
            break;
        }
        s->time += tau;
        if (s->early_return) {
            *eventHandlingNeeded = true; *earlyReturn = true;
            break;
        }
        bounce(s);                       /* handled inside the step */
    }
    *lastSuccessfulTime = s->time;
    return fmi3OK;
}

#define GETTER(T, NAME) \
    fmi3Status fmi3Get##NAME(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, T values[], size_t n)
#define SETTER(T, NAME) \
    fmi3Status fmi3Set##NAME(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, const T values[], size_t n)

GETTER(fmi3Float64, Float64) {
    State *s = &((Model *)i)->s;
    size_t k = 0;
    for (size_t j = 0; j < nvr; j++) {
        switch (vr[j]) {
            case VR_TIME: values[k++] = s->time; break;
            case VR_H: values[k++] = s->h; break;
            case VR_V: values[k++] = s->v; break;
            case VR_G: values[k++] = s->g; break;
            case VR_E: values[k++] = s->e; break;
            case VR_V_REST: values[k++] = s->v_rest; break;
            case VR_DER_V: values[k++] = s->resting ? 0.0 : -s->g; break;
            case VR_GAIN: for (int q = 0; q < 3; q++) values[k++] = s->gain[q]; break;
            case VR_SCALED: for (int q = 0; q < 3; q++) values[k++] = s->gain[q] * s->h + s->offset; break;
            default: return fmi3Error;
        }
    }
    return k == n ? fmi3OK : fmi3Error;
}

SETTER(fmi3Float64, Float64) {
    State *s = &((Model *)i)->s;
    size_t k = 0;
    for (size_t j = 0; j < nvr; j++) {
        switch (vr[j]) {
            case VR_H: s->h = values[k++]; break;
            case VR_V: s->v = values[k++]; break;
            case VR_G: s->g = values[k++]; break;
            case VR_E: s->e = values[k++]; break;
            case VR_V_REST: s->v_rest = values[k++]; break;
            case VR_GAIN: for (int q = 0; q < 3; q++) s->gain[q] = values[k++]; break;
            default: return fmi3Error;
        }
    }
    return k == n ? fmi3OK : fmi3Error;
}

GETTER(fmi3Float32, Float32) {
    State *s = &((Model *)i)->s;
    if (nvr != 1 || n != 1 || vr[0] != VR_H32) return fmi3Error;
    values[0] = (float)s->h;
    return fmi3OK;
}

GETTER(fmi3Int32, Int32) {
    State *s = &((Model *)i)->s;
    if (nvr != 1 || n != 1 || vr[0] != VR_BOUNCES) return fmi3Error;
    values[0] = s->bounces;
    return fmi3OK;
}

GETTER(fmi3Int16, Int16) {
    State *s = &((Model *)i)->s;
    if (nvr != 1 || n != 1 || vr[0] != VR_OFFSET) return fmi3Error;
    values[0] = s->offset;
    return fmi3OK;
}

SETTER(fmi3Int16, Int16) {
    State *s = &((Model *)i)->s;
    if (nvr != 1 || n != 1 || vr[0] != VR_OFFSET) return fmi3Error;
    s->offset = values[0];
    return fmi3OK;
}

GETTER(fmi3Boolean, Boolean) {
    State *s = &((Model *)i)->s;
    if (nvr != 1 || n != 1 || vr[0] != VR_FALLING) return fmi3Error;
    values[0] = s->v < 0.0;
    return fmi3OK;
}

GETTER(fmi3String, String) {
    State *s = &((Model *)i)->s;
    if (nvr != 1 || n != 1 || vr[0] != VR_PHASE) return fmi3Error;
    values[0] = s->resting ? "resting" : (s->v < 0.0 ? "falling" : "rising");
    return fmi3OK;
}

#define UNSUPPORTED_GET(T, NAME) GETTER(T, NAME) { (void)i; (void)vr; (void)nvr; (void)values; (void)n; return fmi3Error; }
#define UNSUPPORTED_SET(T, NAME) SETTER(T, NAME) { (void)i; (void)vr; (void)nvr; (void)values; (void)n; return fmi3Error; }
UNSUPPORTED_GET(fmi3Int8, Int8)
UNSUPPORTED_GET(fmi3UInt8, UInt8)
UNSUPPORTED_GET(fmi3UInt16, UInt16)
UNSUPPORTED_GET(fmi3UInt32, UInt32)
UNSUPPORTED_GET(fmi3Int64, Int64)
UNSUPPORTED_GET(fmi3UInt64, UInt64)
UNSUPPORTED_SET(fmi3Float32, Float32)
UNSUPPORTED_SET(fmi3Int8, Int8)
UNSUPPORTED_SET(fmi3UInt8, UInt8)
UNSUPPORTED_SET(fmi3UInt16, UInt16)
UNSUPPORTED_SET(fmi3Int32, Int32)
UNSUPPORTED_SET(fmi3UInt32, UInt32)
UNSUPPORTED_SET(fmi3Int64, Int64)
UNSUPPORTED_SET(fmi3UInt64, UInt64)
UNSUPPORTED_SET(fmi3Boolean, Boolean)
UNSUPPORTED_SET(fmi3String, String)

fmi3Status fmi3GetFMUState(fmi3Instance i, fmi3FMUState *state) {
    if (!CAN_GET_SET_STATE) return fmi3Error;
    State *copy = *state ? (State *)*state : malloc(sizeof(State));
    if (!copy) return fmi3Error;
    memcpy(copy, &((Model *)i)->s, sizeof(State));
    *state = copy;
    return fmi3OK;
}
fmi3Status fmi3SetFMUState(fmi3Instance i, fmi3FMUState state) {
    if (!CAN_GET_SET_STATE || !state) return fmi3Error;
    memcpy(&((Model *)i)->s, state, sizeof(State));
    return fmi3OK;
}
fmi3Status fmi3FreeFMUState(fmi3Instance i, fmi3FMUState *state) {
    (void)i;
    free(*state);
    *state = NULL;
    return fmi3OK;
}
fmi3Status fmi3SerializedFMUStateSize(fmi3Instance i, fmi3FMUState state, size_t *size) {
    (void)i; (void)state;
    if (!CAN_GET_SET_STATE) return fmi3Error;
    *size = sizeof(State);
    return fmi3OK;
}
fmi3Status fmi3SerializeFMUState(fmi3Instance i, fmi3FMUState state, fmi3Byte bytes[], size_t size) {
    (void)i;
    if (!CAN_GET_SET_STATE || !state || size != sizeof(State)) return fmi3Error;
    memcpy(bytes, state, sizeof(State));
    return fmi3OK;
}
fmi3Status fmi3DeserializeFMUState(fmi3Instance i, const fmi3Byte bytes[], size_t size, fmi3FMUState *state) {
    (void)i;
    if (!CAN_GET_SET_STATE || size != sizeof(State)) return fmi3Error;
    State *copy = *state ? (State *)*state : malloc(sizeof(State));
    if (!copy) return fmi3Error;
    memcpy(copy, bytes, sizeof(State));
    *state = copy;
    return fmi3OK;
}
#define SERIALIZES_FMU_STATE 1
#include "cosimrun_fmi3_unused.h" /* inlined by tests/fmus/builders.py */
