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
 * written on this header also compiles on cosimrun_fmi3me.h (FMI 3.0). What the frameworks share
 * (the instance, logging, get and set, the model-exchange calls) is in the package's cosimrun_fmi.h.
 */
#include "cosimrun_fmi.h"

#if CAN_GET_SET_STATE
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) { return me_get_state(INSTANCE, state); }
FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) { return me_set_state(INSTANCE, state); }
#else
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) { (void)state; NO_STATE(c) }
#endif

FMI2_Export fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    (void)state; (void)size; NOT_PROVIDED("serialization")
}

FMI2_Export fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    (void)state; (void)bytes; (void)size; NOT_PROVIDED("serialization")
}

FMI2_Export fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size,
                                               fmi2FMUstate *state) {
    (void)state; (void)bytes; (void)size; NOT_PROVIDED("serialization")
}

/* ------------------------------------------------------------------ model exchange */
FMI2_Export fmi2Status fmi2EnterEventMode(fmi2Component c) { return me_enter_event_mode(INSTANCE); }

FMI2_Export fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    bool changed, next_defined;
    fmi2Status status = me_update_discrete_states(INSTANCE, &changed, &next_defined, &info->nextEventTime);
    if (status != fmi2OK) return status;
    info->newDiscreteStatesNeeded = fmi2False;
    info->terminateSimulation = MODEL_TERMINATED(&INSTANCE->s) ? fmi2True : fmi2False;
    info->nominalsOfContinuousStatesChanged = fmi2False;
    info->valuesOfContinuousStatesChanged = changed ? fmi2True : fmi2False;
    info->nextEventTimeDefined = next_defined ? fmi2True : fmi2False;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) { return me_enter_continuous_time_mode(INSTANCE); }

FMI2_Export fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetPrior,
                                                   fmi2Boolean *enterEventMode, fmi2Boolean *terminate) {
    bool enter;
    fmi2Status status;
    (void)noSetPrior;
    status = me_completed_integrator_step(INSTANCE, &enter);
    if (status != fmi2OK) return status;
    *enterEventMode = enter ? fmi2True : fmi2False;
    *terminate = fmi2False;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) {
    INSTANCE->s.time = time;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    return me_set_continuous_states(INSTANCE, x, nx);
}

FMI2_Export fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    return me_get_continuous_states(INSTANCE, x, nx);
}

FMI2_Export fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t nx) {
    return me_get_derivatives(INSTANCE, dx, nx);
}

FMI2_Export fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t nz) {
    return me_get_event_indicators(INSTANCE, z, nz);
}

FMI2_Export fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx) {
    (void)c;
    return me_nominals(x_nominal, nx);
}
