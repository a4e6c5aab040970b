/* cosimrun_fmi2cs.h - a minimal FMI 2.0 co-simulation framework for small models.
 *
 * A model file defines MODEL_GUID and N_REAL, N_INTEGER, N_BOOLEAN (the sizes of
 * its value-reference tables; String variables are not supported), optionally
 * CAN_GET_SET_STATE (default 1), INPUT_DERIVATIVES (default 0: 1 stores the first and
 * second derivatives given by fmi2SetRealInputDerivatives in s->du[0] and s->du[1] at
 * the input's value reference, for a model that declares canInterpolateInputs) and
 * REPORTS_LAST_SUCCESSFUL_TIME (default 1: after a
 * step that returned fmi2Discard, fmi2LastSuccessfulTime is s->time: the step's start
 * unless model_step moved it to where it stopped), includes this header and implements
 *   static void model_defaults(ModelState *s);                       start values
 *   static void model_update(ModelState *s);                         outputs and derivatives
 *   static fmi2Status model_step(Instance *m, double t, double h);   advance the states by h
 * Every variable lives in s->r, s->i or s->b at its value reference, so an FMU
 * state (rollback) is a plain copy of ModelState.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fmi2Functions.h"

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
#ifndef REPORTS_LAST_SUCCESSFUL_TIME
#define REPORTS_LAST_SUCCESSFUL_TIME 1
#endif
#ifndef INPUT_DERIVATIVES
#define INPUT_DERIVATIVES 0
#endif

typedef struct {
    double time;
    double r[N_REAL + 1];
    double du[2][N_REAL + 1];
    int i[N_INTEGER + 1];
    fmi2Boolean b[N_BOOLEAN + 1];
} ModelState;

typedef struct {
    ModelState s;
    fmi2CallbackFunctions cb;
    char name[256];
    int mode; /* 0 instantiated, 1 initialization mode, 2 step mode, 3 terminated */
    int logging;
} Instance;

static void model_defaults(ModelState *s);
static void model_update(ModelState *s);
static fmi2Status model_step(Instance *m, double t, double h);

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
    if (type != fmi2CoSimulation || !guid || strcmp(guid, MODEL_GUID) != 0) {
        functions->logger(functions->componentEnvironment, name, fmi2Error, "logStatusError",
                          type != fmi2CoSimulation ? "only co-simulation is supported" : "GUID mismatch");
        return NULL;
    }
    m = (Instance *)calloc(1, sizeof(Instance));
    if (!m) return NULL;
    m->cb = *functions;
    strncpy(m->name, name ? name : "", sizeof m->name - 1);
    m->logging = loggingOn;
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

FMI2_Export fmi2Status fmi2EnterInitializationMode(fmi2Component c) { INSTANCE->mode = 1; return fmi2OK; }

FMI2_Export fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    model_update(&INSTANCE->s);
    INSTANCE->mode = 2;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2Terminate(fmi2Component c) { INSTANCE->mode = 3; return fmi2OK; }

FMI2_Export fmi2Status fmi2Reset(fmi2Component c) {
    memset(&INSTANCE->s, 0, sizeof(ModelState));
    model_defaults(&INSTANCE->s);
    INSTANCE->mode = 0;
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
    model_update(&INSTANCE->s);
    for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.i[vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      fmi2Boolean value[]) {
    CHECK_VR("Boolean", N_BOOLEAN)
    model_update(&INSTANCE->s);
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
    ModelState *copy = *state ? (ModelState *)*state : (ModelState *)malloc(sizeof(ModelState));
    if (!copy) return fmi2Error;
    memcpy(copy, &INSTANCE->s, sizeof(ModelState));
    *state = copy;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) {
    if (!state) return fmi2Error;
    memcpy(&INSTANCE->s, state, sizeof(ModelState));
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) {
    (void)c;
    if (state && *state) { free(*state); *state = NULL; }
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    (void)c; (void)state;
    *size = sizeof(ModelState);
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    (void)c;
    if (size != sizeof(ModelState)) return fmi2Error;
    memcpy(bytes, state, sizeof(ModelState));
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size,
                                               fmi2FMUstate *state) {
    (void)c;
    if (size != sizeof(ModelState)) return fmi2Error;
    if (!*state) *state = malloc(sizeof(ModelState));
    if (!*state) return fmi2Error;
    memcpy(*state, bytes, sizeof(ModelState));
    return fmi2OK;
}
#else
#define NO_STATE(c)                                                                                  \
    log_message((Instance *)(c), fmi2Error, "logStatusError", "this FMU cannot get or set its state"); \
    return fmi2Error;
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    (void)state; (void)size; NO_STATE(c)
}
FMI2_Export fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    (void)state; (void)bytes; (void)size; NO_STATE(c)
}
FMI2_Export fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size,
                                               fmi2FMUstate *state) {
    (void)state; (void)bytes; (void)size; NO_STATE(c)
}
#endif

FMI2_Export fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                                    const fmi2ValueReference z[], size_t nz, const fmi2Real dz[],
                                                    fmi2Real du[]) {
    (void)u; (void)nu; (void)z; (void)nz; (void)dz; (void)du;
    log_message(INSTANCE, fmi2Error, "logStatusError", "directional derivatives are not provided");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                                   const fmi2Integer order[], const fmi2Real value[]) {
#if INPUT_DERIVATIVES
    CHECK_VR("Real", N_REAL)
    for (size_t k = 0; k < nvr; k++) {
        if (order[k] < 1 || order[k] > 2) {
            log_message(INSTANCE, fmi2Error, "logStatusError", "input derivative of order %d not supported",
                        (int)order[k]);
            return fmi2Error;
        }
        INSTANCE->s.du[order[k] - 1][vr[k]] = value[k];
    }
    return fmi2OK;
#else
    (void)vr; (void)nvr; (void)order; (void)value;
    log_message(INSTANCE, fmi2Error, "logStatusError", "input derivatives are not supported");
    return fmi2Error;
#endif
}

FMI2_Export fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                                    const fmi2Integer order[], fmi2Real value[]) {
    (void)vr; (void)nvr; (void)order; (void)value;
    log_message(INSTANCE, fmi2Error, "logStatusError", "output derivatives are not provided");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean noSetPrior) {
    Instance *m = INSTANCE;
    fmi2Status status;
    (void)noSetPrior;
    if (m->mode != 2) {
        log_message(m, fmi2Error, "logStatusError", "fmi2DoStep called outside step mode");
        return fmi2Error;
    }
    if (fabs(t - m->s.time) > 1e-9 * (1.0 + fabs(t))) {
        log_message(m, fmi2Error, "logStatusError", "fmi2DoStep at t=%.17g but the FMU is at t=%.17g", t,
                    m->s.time);
        return fmi2Error;
    }
    if (!(h > 0.0)) {
        log_message(m, fmi2Error, "logStatusError", "fmi2DoStep with step size %g <= 0", h);
        return fmi2Error;
    }
    status = model_step(m, t, h);
    if (status <= fmi2Warning) m->s.time = t + h;
    model_update(&m->s);
    return status;
}

FMI2_Export fmi2Status fmi2CancelStep(fmi2Component c) { (void)c; return fmi2Error; }

FMI2_Export fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *value) {
    (void)c; (void)s; *value = fmi2OK; return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *value) {
    if (s != fmi2LastSuccessfulTime || !REPORTS_LAST_SUCCESSFUL_TIME) return fmi2Discard;
    *value = INSTANCE->s.time;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *value) {
    (void)c; (void)s; (void)value; return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *value) {
    (void)c; (void)s; (void)value; return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value) {
    (void)c; (void)s; (void)value; return fmi2Discard;
}
