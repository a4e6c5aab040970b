/* cosimrun_fmi2me.h - a minimal FMI 2.0 model-exchange framework for the test models.
 *
 * A model file defines MODEL_GUID, N_REAL, N_INTEGER, N_BOOLEAN (the sizes of its
 * value-reference tables; no String variables), N_STATES and STATE_VRS / DERIVATIVE_VRS
 * (brace lists of the value references of the continuous states and of their
 * derivatives, in ModelStructure/Derivatives order), N_EVENT_INDICATORS, optionally
 * CAN_GET_SET_STATE (default 1), includes this header and implements
 *   static void model_defaults(ModelState *s);                    start values
 *   static void model_update(ModelState *s);                      outputs and derivatives
 *   static void model_indicators(ModelState *s, double z[]);      event indicators
 *   static void model_event(ModelState *s, int *states_changed);  discrete update at s->time
 *   static int model_step_event(ModelState *s);                   nonzero: an event after this step
 * model_event runs at every fmi2NewDiscreteStates (also the first, after initialization);
 * it sets *states_changed when it changed a continuous state and keeps the next time
 * event in s->t_next (INFINITY: none). Every variable lives in s->r, s->i or s->b at its
 * value reference, so an FMU state (rollback) is a plain copy of ModelState. A model
 * written on this header also compiles on cosimrun_fmi3me.h (FMI 3.0).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fmi2Functions.h"

#ifndef N_INTEGER
#define N_INTEGER 0
#endif
#ifndef N_BOOLEAN
#define N_BOOLEAN 0
#endif
#ifndef CAN_GET_SET_STATE
#define CAN_GET_SET_STATE 1
#endif

typedef struct {
    double time;
    double t_next;
    double r[N_REAL + 1];
    int i[N_INTEGER + 1];
    fmi2Boolean b[N_BOOLEAN + 1];
} ModelState;

typedef struct {
    ModelState s;
    fmi2CallbackFunctions cb;
    char name[256];
    int mode; /* 0 instantiated, 1 initialization, 2 event mode, 3 continuous-time mode, 4 terminated */
    int logging;
} Instance;

enum { INSTANTIATED, INITIALIZATION, EVENT_MODE, CONTINUOUS_TIME, TERMINATED };

static const fmi2ValueReference state_vr[N_STATES + 1] = STATE_VRS;
static const fmi2ValueReference derivative_vr[N_STATES + 1] = DERIVATIVE_VRS;

static void model_defaults(ModelState *s);
static void model_update(ModelState *s);
static void model_indicators(ModelState *s, double z[]);
static void model_event(ModelState *s, int *states_changed);
static int model_step_event(ModelState *s);

static void log_message(Instance *m, fmi2Status status, const char *category, const char *fmt, ...) {
    char buffer[1024];
    va_list args;
    if (!m || !m->cb.logger) return;
    if (status == fmi2OK && !m->logging) return;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof buffer, fmt, args);
    va_end(args);
    m->cb.logger(m->cb.componentEnvironment, m->name, status, category, "%s", buffer);
}

#define INSTANCE ((Instance *)c)
#define CHECK_VR(kind, n)                                                                             \
    for (size_t k = 0; k < nvr; k++)                                                                  \
        if ((long)vr[k] >= (long)(n)) {                                                               \
            log_message(INSTANCE, fmi2Error, "logStatusError", kind " value reference %u out of range", \
                        vr[k]);                                                                       \
            return fmi2Error;                                                                         \
        }
#define CHECK_MODE(allowed, what)                                                                     \
    if (!(allowed)) {                                                                                 \
        log_message(INSTANCE, fmi2Error, "logStatusError", what " called in mode %d", INSTANCE->mode); \
        return fmi2Error;                                                                             \
    }

FMI2_Export const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
FMI2_Export const char *fmi2GetVersion(void) { return fmi2Version; }

FMI2_Export fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cats[]) {
    (void)n; (void)cats;
    INSTANCE->logging = on;
    return fmi2OK;
}

FMI2_Export fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String resources,
                                          const fmi2CallbackFunctions *functions, fmi2Boolean visible,
                                          fmi2Boolean loggingOn) {
    Instance *m;
    (void)resources; (void)visible;
    if (!functions || !functions->logger) return NULL;
    if (type != fmi2ModelExchange || !guid || strcmp(guid, MODEL_GUID) != 0) {
        functions->logger(functions->componentEnvironment, name, fmi2Error, "logStatusError",
                          type != fmi2ModelExchange ? "only model exchange is supported" : "GUID mismatch");
        return NULL;
    }
    m = (Instance *)calloc(1, sizeof(Instance));
    if (!m) return NULL;
    m->cb = *functions;
    strncpy(m->name, name ? name : "", sizeof m->name - 1);
    m->logging = loggingOn;
    m->s.t_next = INFINITY;
    model_defaults(&m->s);
    return m;
}

FMI2_Export void fmi2FreeInstance(fmi2Component c) { free(c); }

FMI2_Export fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDefined, fmi2Real tol, fmi2Real start,
                                           fmi2Boolean stopDefined, fmi2Real stop) {
    (void)tolDefined; (void)tol; (void)stopDefined; (void)stop;
    INSTANCE->s.time = start;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    INSTANCE->mode = INITIALIZATION;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    model_update(&INSTANCE->s);
    INSTANCE->mode = EVENT_MODE;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2Terminate(fmi2Component c) { INSTANCE->mode = TERMINATED; return fmi2OK; }

FMI2_Export fmi2Status fmi2Reset(fmi2Component c) {
    memset(&INSTANCE->s, 0, sizeof(ModelState));
    INSTANCE->s.t_next = INFINITY;
    model_defaults(&INSTANCE->s);
    INSTANCE->mode = INSTANTIATED;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[]) {
    CHECK_VR("Real", N_REAL)
    model_update(&INSTANCE->s);
    for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.r[vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      fmi2Integer value[]) {
    CHECK_VR("Integer", N_INTEGER)
    for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.i[vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      fmi2Boolean value[]) {
    CHECK_VR("Boolean", N_BOOLEAN)
    for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.b[vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                     fmi2String value[]) {
    (void)value;
    CHECK_VR("String", 0)
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                   const fmi2Real value[]) {
    CHECK_VR("Real", N_REAL)
    for (size_t k = 0; k < nvr; k++) INSTANCE->s.r[vr[k]] = value[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      const fmi2Integer value[]) {
    CHECK_VR("Integer", N_INTEGER)
    for (size_t k = 0; k < nvr; k++) INSTANCE->s.i[vr[k]] = value[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      const fmi2Boolean value[]) {
    CHECK_VR("Boolean", N_BOOLEAN)
    for (size_t k = 0; k < nvr; k++) INSTANCE->s.b[vr[k]] = value[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                     const fmi2String value[]) {
    (void)value;
    CHECK_VR("String", 0)
    return fmi2OK;
}

#if CAN_GET_SET_STATE
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) {
    Instance *copy = *state ? (Instance *)*state : (Instance *)malloc(sizeof(Instance));
    if (!copy) return fmi2Error;
    memcpy(copy, INSTANCE, sizeof(Instance));
    *state = copy;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) {
    if (!state) return fmi2Error;
    INSTANCE->s = ((Instance *)state)->s;
    INSTANCE->mode = ((Instance *)state)->mode;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) {
    (void)c;
    if (state && *state) { free(*state); *state = NULL; }
    return fmi2OK;
}
#else
#define NO_STATE(c)                                                                                  \
    log_message((Instance *)(c), fmi2Error, "logStatusError", "this FMU cannot get or set its state"); \
    return fmi2Error;
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
#endif

FMI2_Export fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    (void)state; (void)size;
    log_message(INSTANCE, fmi2Error, "logStatusError", "serialization is not provided");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    (void)state; (void)bytes; (void)size;
    log_message(INSTANCE, fmi2Error, "logStatusError", "serialization is not provided");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size,
                                               fmi2FMUstate *state) {
    (void)state; (void)bytes; (void)size;
    log_message(INSTANCE, fmi2Error, "logStatusError", "serialization is not provided");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                                    const fmi2ValueReference z[], size_t nz, const fmi2Real dz[],
                                                    fmi2Real du[]) {
    (void)u; (void)nu; (void)z; (void)nz; (void)dz; (void)du;
    log_message(INSTANCE, fmi2Error, "logStatusError", "directional derivatives are not provided");
    return fmi2Error;
}

/* ------------------------------------------------------------------ model exchange */
FMI2_Export fmi2Status fmi2EnterEventMode(fmi2Component c) {
    CHECK_MODE(INSTANCE->mode == CONTINUOUS_TIME || INSTANCE->mode == EVENT_MODE, "fmi2EnterEventMode")
    INSTANCE->mode = EVENT_MODE;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    CHECK_MODE(INSTANCE->mode == EVENT_MODE, "fmi2NewDiscreteStates")
    info->newDiscreteStatesNeeded = fmi2False;
    info->terminateSimulation = fmi2False;
    info->nominalsOfContinuousStatesChanged = fmi2False;
    int changed = 0;
    model_event(&INSTANCE->s, &changed);
    info->valuesOfContinuousStatesChanged = changed ? fmi2True : fmi2False;
    info->nextEventTimeDefined = isfinite(INSTANCE->s.t_next) ? fmi2True : fmi2False;
    info->nextEventTime = isfinite(INSTANCE->s.t_next) ? INSTANCE->s.t_next : 0.0;
    model_update(&INSTANCE->s);
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) {
    CHECK_MODE(INSTANCE->mode == EVENT_MODE, "fmi2EnterContinuousTimeMode")
    INSTANCE->mode = CONTINUOUS_TIME;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetPrior,
                                                   fmi2Boolean *enterEventMode, fmi2Boolean *terminate) {
    (void)noSetPrior;
    CHECK_MODE(INSTANCE->mode == CONTINUOUS_TIME, "fmi2CompletedIntegratorStep")
    model_update(&INSTANCE->s);
    *enterEventMode = model_step_event(&INSTANCE->s) ? fmi2True : fmi2False;
    *terminate = fmi2False;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) {
    INSTANCE->s.time = time;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    if (nx != N_STATES) {
        log_message(INSTANCE, fmi2Error, "logStatusError", "%u states given, the model has %d", (unsigned)nx,
                    N_STATES);
        return fmi2Error;
    }
    for (size_t k = 0; k < nx; k++) INSTANCE->s.r[state_vr[k]] = x[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    if (nx != N_STATES) return fmi2Error;
    for (size_t k = 0; k < nx; k++) x[k] = INSTANCE->s.r[state_vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t nx) {
    if (nx != N_STATES) return fmi2Error;
    for (size_t k = 0; k < nx; k++)
        if (!isfinite(INSTANCE->s.r[state_vr[k]])) {
            log_message(INSTANCE, fmi2Error, "logStatusError", "state %u is not finite", state_vr[k]);
            return fmi2Error;
        }
    model_update(&INSTANCE->s);
    for (size_t k = 0; k < nx; k++) dx[k] = INSTANCE->s.r[derivative_vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t nz) {
    double values[N_EVENT_INDICATORS + 1];
    if (nz != N_EVENT_INDICATORS) return fmi2Error;
    model_indicators(&INSTANCE->s, values);
    for (size_t k = 0; k < nz; k++) z[k] = values[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx) {
    (void)c;
    for (size_t k = 0; k < nx; k++) x_nominal[k] = 1.0;
    return fmi2OK;
}
