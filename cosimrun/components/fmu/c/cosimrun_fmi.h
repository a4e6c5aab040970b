/* cosimrun_fmi.h - what cosimrun's C frameworks for small models share.
 *
 * Included by the co-simulation framework cosimrun_fmi2cs.h and the model-exchange ones of the
 * tests (FMI 2.0 and 3.0), after the model's defines: FMI_VERSION (2, the default, or 3),
 * MODEL_GUID, N_REAL, N_INTEGER, N_BOOLEAN (the sizes of the value-reference tables; no
 * String variables), optionally CAN_GET_SET_STATE (default 1), MODEL_TERMINATED(s) (nonzero:
 * the model asks to terminate; fmi2Terminated, terminateSimulation) and, for model exchange,
 * N_STATES, STATE_VRS, DERIVATIVE_VRS and N_EVENT_INDICATORS. It gives the FMI types by
 * version, ModelState (every variable in s->r, s->i or s->b at its value reference, so an FMU
 * state is a plain copy), Instance, the modes, log_message and the mode and value-reference
 * checks; for FMI 2.0 the functions both interfaces export alike; for model exchange
 * (N_STATES defined) the calls of both versions on an Instance, which the frameworks export
 * under their version's names.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FMI_VERSION
#define FMI_VERSION 2
#endif
#if FMI_VERSION == 3
#include "fmi3Functions.h"
typedef fmi3Status FmiStatus;
typedef fmi3Boolean FmiBoolean;
typedef fmi3ValueReference FmiValueReference;
#define FMI_OK fmi3OK
#define FMI_ERROR fmi3Error
#define FMI_PREFIX "fmi3"
#else
#include "fmi2Functions.h"
typedef fmi2Status FmiStatus;
typedef fmi2Boolean FmiBoolean;
typedef fmi2ValueReference FmiValueReference;
#define FMI_OK fmi2OK
#define FMI_ERROR fmi2Error
#define FMI_PREFIX "fmi2"
#endif

#ifndef N_REAL
#define N_REAL 0
#endif
#ifndef N_INTEGER
#define N_INTEGER 0
#endif
#ifndef N_BOOLEAN
#define N_BOOLEAN 0
#endif
#ifndef CAN_GET_SET_STATE
#define CAN_GET_SET_STATE 1
#endif
#ifndef MODEL_TERMINATED
#define MODEL_TERMINATED(s) 0 /* a model may define it: nonzero when it asks to terminate the simulation */
#endif

typedef struct {
    double time;
#ifdef N_STATES
    double t_next; /* the next time event (INFINITY: none) */
#else
    double du[2][N_REAL + 1]; /* first and second input derivatives at the input's value reference */
#endif
    double r[N_REAL + 1];
    int i[N_INTEGER + 1];
    FmiBoolean b[N_BOOLEAN + 1];
} ModelState;

typedef struct {
    ModelState s;
#if FMI_VERSION == 3
    fmi3InstanceEnvironment env;
    fmi3LogMessageCallback log;
#else
    fmi2CallbackFunctions cb;
    char name[256];
#endif
    int mode;
    int logging;
} Instance;

enum { INSTANTIATED, INITIALIZATION, EVENT_MODE, CONTINUOUS_TIME, TERMINATED, STEP_MODE };

#ifdef N_STATES
#define AFTER_INITIALIZATION EVENT_MODE
#else
#define AFTER_INITIALIZATION STEP_MODE
#endif

static void model_defaults(ModelState *s);
static void model_update(ModelState *s);

static void log_message(Instance *m, FmiStatus status, const char *category, const char *fmt, ...) {
    char buffer[1024];
    va_list args;
#if FMI_VERSION == 3
    if (!m || !m->log) return;
#else
    if (!m || !m->cb.logger) return;
#endif
    if (status == FMI_OK && !m->logging) return;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof buffer, fmt, args);
    va_end(args);
#if FMI_VERSION == 3
    m->log(m->env, status, category, buffer);
#else
    m->cb.logger(m->cb.componentEnvironment, m->name, status, category, "%s", buffer);
#endif
}

#define log_error(m, ...) log_message((m), FMI_ERROR, "logStatusError", __VA_ARGS__)

#define CHECK_VR(kind, n)                                                                      \
    for (size_t k = 0; k < nvr; k++)                                                           \
        if ((long)vr[k] >= (long)(n)) {                                                        \
            log_error(INSTANCE, kind " value reference %u out of range", (unsigned)vr[k]);    \
            return FMI_ERROR;                                                                  \
        }
#define CHECK_MODE(m, allowed, what)                                                           \
    if (!(allowed)) {                                                                          \
        log_error((m), FMI_PREFIX what " called in mode %d", (m)->mode);                       \
        return FMI_ERROR;                                                                      \
    }
/* A model may define MODEL_MAY_SET(mode, kind, index): nonzero when its variable at index of kind 'R' (Real,
 * Float64), 'I' (Integer, Int32) or 'B' (Boolean) may be set in mode, to enforce the FMI rules for its inputs. */
#ifndef MODEL_MAY_SET
#define MODEL_MAY_SET(mode, kind, index) 1
#endif
#define CHECK_SET(m, kind, index)                                                              \
    if (!MODEL_MAY_SET((m)->mode, kind, index)) {                                              \
        log_error((m), FMI_PREFIX "Set: variable %c%u cannot be set in mode %d", kind,         \
                  (unsigned)(index), (m)->mode);                                               \
        return FMI_ERROR;                                                                      \
    }
#define NO_STATE(m)                                                                            \
    log_error((Instance *)(m), "this FMU cannot get or set its state");                        \
    return FMI_ERROR;
#define NOT_PROVIDED(what)                                                                     \
    log_error(INSTANCE, what " is not provided");                                              \
    return FMI_ERROR;

/* Start values: everything zero but the model's defaults (and no time event). */
static void state_defaults(ModelState *s) {
    memset(s, 0, sizeof(ModelState));
#ifdef N_STATES
    s->t_next = INFINITY;
#endif
    model_defaults(s);
}

/* A new instance at its start values, or NULL. */
static Instance *new_instance(int logging) {
    Instance *m = (Instance *)calloc(1, sizeof(Instance));
    if (!m) return NULL;
    m->logging = logging;
    state_defaults(&m->s);
    return m;
}

static FmiStatus exit_initialization(Instance *m) {
    model_update(&m->s);
    m->mode = AFTER_INITIALIZATION;
    return FMI_OK;
}

static FmiStatus reset_instance(Instance *m) {
    state_defaults(&m->s);
    m->mode = INSTANTIATED;
    return FMI_OK;
}

static FmiStatus free_state(void **state) {
    if (state && *state) { free(*state); *state = NULL; }
    return FMI_OK;
}

#if FMI_VERSION == 2
/* ------------------------------------------------------------------ FMI 2.0 functions of both interfaces */
#define INSTANCE ((Instance *)c)
#ifdef N_STATES
#define FMI2_TYPE fmi2ModelExchange
#define FMI2_TYPE_ONLY "only model exchange is supported"
#else
#define FMI2_TYPE fmi2CoSimulation
#define FMI2_TYPE_ONLY "only co-simulation is supported"
#endif

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
    if (type != FMI2_TYPE || !guid || strcmp(guid, MODEL_GUID) != 0) {
        functions->logger(functions->componentEnvironment, name, fmi2Error, "logStatusError",
                          type != FMI2_TYPE ? FMI2_TYPE_ONLY : "GUID mismatch");
        return NULL;
    }
    m = new_instance(loggingOn);
    if (!m) return NULL;
    m->cb = *functions;
    strncpy(m->name, name ? name : "", sizeof m->name - 1);
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

FMI2_Export fmi2Status fmi2ExitInitializationMode(fmi2Component c) { return exit_initialization(INSTANCE); }

FMI2_Export fmi2Status fmi2Terminate(fmi2Component c) { INSTANCE->mode = TERMINATED; return fmi2OK; }

FMI2_Export fmi2Status fmi2Reset(fmi2Component c) { return reset_instance(INSTANCE); }

#define GET_SET(TYPE, FIELD, N)                                                                                  \
    FMI2_Export fmi2Status fmi2Get##TYPE(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,            \
                                         fmi2##TYPE value[]) {                                                  \
        CHECK_VR(#TYPE, N)                                                                                      \
        model_update(&INSTANCE->s);                                                                             \
        for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.FIELD[vr[k]];                                   \
        return fmi2OK;                                                                                          \
    }                                                                                                           \
    FMI2_Export fmi2Status fmi2Set##TYPE(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,            \
                                         const fmi2##TYPE value[]) {                                            \
        CHECK_VR(#TYPE, N)                                                                                      \
        for (size_t k = 0; k < nvr; k++) { CHECK_SET(INSTANCE, #TYPE[0], vr[k]) }                               \
        for (size_t k = 0; k < nvr; k++) INSTANCE->s.FIELD[vr[k]] = value[k];                                   \
        return fmi2OK;                                                                                          \
    }
GET_SET(Real, r, N_REAL)
GET_SET(Integer, i, N_INTEGER)
GET_SET(Boolean, b, N_BOOLEAN)

FMI2_Export fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                     fmi2String value[]) {
    (void)value;
    CHECK_VR("String", 0)
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                     const fmi2String value[]) {
    (void)value;
    CHECK_VR("String", 0)
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) {
#if CAN_GET_SET_STATE
    (void)c;
    return free_state(state);
#else
    (void)state; NO_STATE(c)
#endif
}

FMI2_Export fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                                    const fmi2ValueReference z[], size_t nz, const fmi2Real dz[],
                                                    fmi2Real du[]) {
    (void)u; (void)nu; (void)z; (void)nz; (void)dz; (void)du;
    NOT_PROVIDED("directional derivatives")
}
#endif

#ifdef N_STATES
/* ------------------------------------------------------------------ model exchange on an Instance */
static const FmiValueReference state_vr[N_STATES + 1] = STATE_VRS;
static const FmiValueReference derivative_vr[N_STATES + 1] = DERIVATIVE_VRS;

static void model_indicators(ModelState *s, double z[]);
static void model_event(ModelState *s, int *states_changed);
static int model_step_event(ModelState *s);

static FmiStatus me_enter_event_mode(Instance *m) {
    CHECK_MODE(m, m->mode == CONTINUOUS_TIME || m->mode == EVENT_MODE, "EnterEventMode")
    m->mode = EVENT_MODE;
    return FMI_OK;
}

#if FMI_VERSION == 3
#define UPDATE_DISCRETE_STATES "UpdateDiscreteStates"
#else
#define UPDATE_DISCRETE_STATES "NewDiscreteStates"
#endif

/* The discrete update at s->time: whether it changed a continuous state, and the next time event. */
static FmiStatus me_update_discrete_states(Instance *m, bool *changed, bool *next_defined, double *next) {
    int states_changed = 0;
    CHECK_MODE(m, m->mode == EVENT_MODE, UPDATE_DISCRETE_STATES)
    model_event(&m->s, &states_changed);
    *changed = states_changed != 0;
    *next_defined = isfinite(m->s.t_next);
    *next = isfinite(m->s.t_next) ? m->s.t_next : 0.0;
    model_update(&m->s);
    return FMI_OK;
}

static FmiStatus me_enter_continuous_time_mode(Instance *m) {
    CHECK_MODE(m, m->mode == EVENT_MODE, "EnterContinuousTimeMode")
    m->mode = CONTINUOUS_TIME;
    return FMI_OK;
}

static FmiStatus me_completed_integrator_step(Instance *m, bool *enter_event_mode) {
    CHECK_MODE(m, m->mode == CONTINUOUS_TIME, "CompletedIntegratorStep")
    model_update(&m->s);
    *enter_event_mode = model_step_event(&m->s) != 0;
    return FMI_OK;
}

static FmiStatus me_set_continuous_states(Instance *m, const double x[], size_t nx) {
    if (nx != N_STATES) {
        log_error(m, "%u states given, the model has %d", (unsigned)nx, N_STATES);
        return FMI_ERROR;
    }
    for (size_t k = 0; k < nx; k++) m->s.r[state_vr[k]] = x[k];
    return FMI_OK;
}

static FmiStatus me_get_continuous_states(Instance *m, double x[], size_t nx) {
    if (nx != N_STATES) return FMI_ERROR;
    for (size_t k = 0; k < nx; k++) x[k] = m->s.r[state_vr[k]];
    return FMI_OK;
}

static FmiStatus me_get_derivatives(Instance *m, double dx[], size_t nx) {
    if (nx != N_STATES) return FMI_ERROR;
    for (size_t k = 0; k < nx; k++)
        if (!isfinite(m->s.r[state_vr[k]])) {
            log_error(m, "state %u is not finite", (unsigned)state_vr[k]);
            return FMI_ERROR;
        }
    model_update(&m->s);
    for (size_t k = 0; k < nx; k++) dx[k] = m->s.r[derivative_vr[k]];
    return FMI_OK;
}

static FmiStatus me_get_event_indicators(Instance *m, double z[], size_t nz) {
    double values[N_EVENT_INDICATORS + 1];
    if (nz != N_EVENT_INDICATORS) return FMI_ERROR;
    model_indicators(&m->s, values);
    for (size_t k = 0; k < nz; k++) z[k] = values[k];
    return FMI_OK;
}

static FmiStatus me_nominals(double nominals[], size_t nx) {
    for (size_t k = 0; k < nx; k++) nominals[k] = 1.0;
    return FMI_OK;
}

#if CAN_GET_SET_STATE
/* An FMU state is a copy of the instance: its ModelState and its mode. */
static FmiStatus me_get_state(Instance *m, void **state) {
    Instance *copy = *state ? (Instance *)*state : (Instance *)malloc(sizeof(Instance));
    if (!copy) return FMI_ERROR;
    memcpy(copy, m, sizeof(Instance));
    *state = copy;
    return FMI_OK;
}

static FmiStatus me_set_state(Instance *m, const void *state) {
    if (!state) return FMI_ERROR;
    m->s = ((const Instance *)state)->s;
    m->mode = ((const Instance *)state)->mode;
    return FMI_OK;
}
#endif
#endif
