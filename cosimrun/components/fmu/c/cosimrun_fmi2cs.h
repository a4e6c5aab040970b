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
 * state (rollback) is a plain copy of ModelState. What the frameworks share (the
 * instance, logging, get and set) is in cosimrun_fmi.h.
 */
#include "cosimrun_fmi.h"

#ifndef REPORTS_LAST_SUCCESSFUL_TIME
#define REPORTS_LAST_SUCCESSFUL_TIME 1
#endif
#ifndef INPUT_DERIVATIVES
#define INPUT_DERIVATIVES 0
#endif

static fmi2Status model_step(Instance *m, double t, double h);

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
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) { (void)state; NO_STATE(c) }
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

FMI2_Export fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                                   const fmi2Integer order[], const fmi2Real value[]) {
#if INPUT_DERIVATIVES
    CHECK_VR("Real", N_REAL)
    for (size_t k = 0; k < nvr; k++) {
        if (order[k] < 1 || order[k] > 2) {
            log_error(INSTANCE, "input derivative of order %d not supported", (int)order[k]);
            return fmi2Error;
        }
        INSTANCE->s.du[order[k] - 1][vr[k]] = value[k];
    }
    return fmi2OK;
#else
    (void)vr; (void)nvr; (void)order; (void)value;
    log_error(INSTANCE, "input derivatives are not supported");
    return fmi2Error;
#endif
}

FMI2_Export fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                                    const fmi2Integer order[], fmi2Real value[]) {
    (void)vr; (void)nvr; (void)order; (void)value;
    NOT_PROVIDED("output derivatives")
}

FMI2_Export fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean noSetPrior) {
    Instance *m = INSTANCE;
    fmi2Status status;
    (void)noSetPrior;
    if (m->mode != STEP_MODE) {
        log_error(m, "fmi2DoStep called outside step mode");
        return fmi2Error;
    }
    if (fabs(t - m->s.time) > 1e-9 * (1.0 + fabs(t))) {
        log_error(m, "fmi2DoStep at t=%.17g but the FMU is at t=%.17g", t, m->s.time);
        return fmi2Error;
    }
    if (!(h > 0.0)) {
        log_error(m, "fmi2DoStep with step size %g <= 0", h);
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
    if (s != fmi2Terminated) return fmi2Discard;
    *value = MODEL_TERMINATED(&INSTANCE->s) ? fmi2True : fmi2False;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value) {
    (void)c; (void)s; (void)value; return fmi2Discard;
}
