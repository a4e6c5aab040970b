/* cosimrun_fmi3me.h - the FMI 3.0 counterpart of cosimrun_fmi2me.h for the same test models.
 *
 * A model written on cosimrun_fmi2me.h compiles on this header unchanged (the same
 * defines and model functions). Value references are unique across types in FMI 3.0:
 * Float64 variables are s->r[vr], Int32 ones s->i[vr - INT_VR_OFFSET], Boolean ones
 * s->b[vr - BOOL_VR_OFFSET]; TIME_VR is the independent variable. Every other type
 * has no variables. FMPy's FMU3Model binds every FMI 3.0 function, so the ones a
 * model-exchange FMU does not use are exported as stubs that return fmi3Error. What the
 * frameworks share is in the package's cosimrun_fmi.h.
 */
#define FMI_VERSION 3
#include "cosimrun_fmi.h"

#define INT_VR_OFFSET 100
#define BOOL_VR_OFFSET 200
#define TIME_VR 999
#define INSTANCE ((Instance *)instance)

const char *fmi3GetVersion(void) { return fmi3Version; }

fmi3Status fmi3SetDebugLogging(fmi3Instance instance, fmi3Boolean on, size_t n, const fmi3String cats[]) {
    (void)n; (void)cats;
    INSTANCE->logging = on;
    return fmi3OK;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String name, fmi3String token, fmi3String resources,
                                          fmi3Boolean visible, fmi3Boolean loggingOn, fmi3InstanceEnvironment env,
                                          fmi3LogMessageCallback log) {
    Instance *m;
    (void)name; (void)resources; (void)visible;
    if (!token || strcmp(token, MODEL_GUID) != 0) {
        if (log) log(env, fmi3Error, "logStatusError", "instantiation token mismatch");
        return NULL;
    }
    m = new_instance(loggingOn);
    if (!m) return NULL;
    m->env = env;
    m->log = log;
    return m;
}

#ifndef CO_SIMULATION /* a model that defines it gives fmi3InstantiateCoSimulation, fmi3EnterStepMode, fmi3DoStep */
fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resources,
                                         fmi3Boolean visible, fmi3Boolean loggingOn, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed, const fmi3ValueReference required[],
                                         size_t nRequired, fmi3InstanceEnvironment env, fmi3LogMessageCallback log,
                                         fmi3IntermediateUpdateCallback update) {
    (void)name; (void)token; (void)resources; (void)visible; (void)loggingOn; (void)eventModeUsed;
    (void)earlyReturnAllowed; (void)required; (void)nRequired; (void)update;
    if (log) log(env, fmi3Error, "logStatusError", "only model exchange is supported");
    return NULL;
}
#endif

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String name, fmi3String token, fmi3String resources,
                                               fmi3Boolean visible, fmi3Boolean loggingOn,
                                               fmi3InstanceEnvironment env, fmi3LogMessageCallback log,
                                               fmi3ClockUpdateCallback clock, fmi3LockPreemptionCallback lock,
                                               fmi3UnlockPreemptionCallback unlock) {
    (void)name; (void)token; (void)resources; (void)visible; (void)loggingOn; (void)clock; (void)lock;
    (void)unlock;
    if (log) log(env, fmi3Error, "logStatusError", "only model exchange is supported");
    return NULL;
}

void fmi3FreeInstance(fmi3Instance instance) { free(instance); }

fmi3Status fmi3EnterInitializationMode(fmi3Instance instance, fmi3Boolean tolDefined, fmi3Float64 tol,
                                       fmi3Float64 start, fmi3Boolean stopDefined, fmi3Float64 stop) {
    (void)tolDefined; (void)tol; (void)stopDefined; (void)stop;
    INSTANCE->s.time = start;
    INSTANCE->mode = INITIALIZATION;
    return fmi3OK;
}

fmi3Status fmi3ExitInitializationMode(fmi3Instance instance) { return exit_initialization(INSTANCE); }

fmi3Status fmi3EnterEventMode(fmi3Instance instance) { return me_enter_event_mode(INSTANCE); }

fmi3Status fmi3Terminate(fmi3Instance instance) { INSTANCE->mode = TERMINATED; return fmi3OK; }

fmi3Status fmi3Reset(fmi3Instance instance) { return reset_instance(INSTANCE); }

/* ------------------------------------------------------------------ values */
static fmi3Status no_variables(Instance *m, const char *type, size_t nvr) {
    if (nvr == 0) return fmi3OK;
    log_error(m, "the model has no %s variables", type);
    return fmi3Error;
}

fmi3Status fmi3GetFloat64(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 v[],
                          size_t n) {
    if (n != nvr) return fmi3Error;
    model_update(&INSTANCE->s);
    for (size_t k = 0; k < nvr; k++) {
        if (vr[k] == TIME_VR) { v[k] = INSTANCE->s.time; continue; }
        if (vr[k] >= N_REAL) { log_error(INSTANCE, "Float64 value reference %u out of range", vr[k]); return fmi3Error; }
        v[k] = INSTANCE->s.r[vr[k]];
    }
    return fmi3OK;
}

fmi3Status fmi3SetFloat64(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, const fmi3Float64 v[],
                          size_t n) {
    if (n != nvr) return fmi3Error;
    for (size_t k = 0; k < nvr; k++) {
        if (vr[k] >= N_REAL) { log_error(INSTANCE, "Float64 value reference %u out of range", vr[k]); return fmi3Error; }
        CHECK_SET(INSTANCE, 'R', vr[k])
    }
    for (size_t k = 0; k < nvr; k++) {
        INSTANCE->s.r[vr[k]] = v[k];
    }
    return fmi3OK;
}

/* Get and set of TYPE variables in s->FIELD[vr - OFFSET], N of them. */
#define OFFSET_VARIABLES(TYPE, FIELD, OFFSET, N)                                                                   \
    fmi3Status fmi3Get##TYPE(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, fmi3##TYPE v[],   \
                             size_t n) {                                                                         \
        if (n != nvr) return fmi3Error;                                                                          \
        for (size_t k = 0; k < nvr; k++) {                                                                       \
            if (vr[k] < (OFFSET) || vr[k] >= (OFFSET) + (N)) return no_variables(INSTANCE, "such " #TYPE, 1);   \
            v[k] = INSTANCE->s.FIELD[vr[k] - (OFFSET)];                                                          \
        }                                                                                                        \
        return fmi3OK;                                                                                           \
    }                                                                                                            \
    fmi3Status fmi3Set##TYPE(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr,                   \
                             const fmi3##TYPE v[], size_t n) {                                                   \
        if (n != nvr) return fmi3Error;                                                                          \
        for (size_t k = 0; k < nvr; k++) {                                                                       \
            if (vr[k] < (OFFSET) || vr[k] >= (OFFSET) + (N)) return no_variables(INSTANCE, "such " #TYPE, 1);   \
            CHECK_SET(INSTANCE, #TYPE[0], vr[k] - (OFFSET))                                                      \
        }                                                                                                        \
        for (size_t k = 0; k < nvr; k++) {                                                                       \
            INSTANCE->s.FIELD[vr[k] - (OFFSET)] = v[k];                                                          \
        }                                                                                                        \
        return fmi3OK;                                                                                           \
    }
OFFSET_VARIABLES(Int32, i, INT_VR_OFFSET, N_INTEGER)
OFFSET_VARIABLES(Boolean, b, BOOL_VR_OFFSET, N_BOOLEAN)

#define NO_VARIABLES(TYPE)                                                                                     \
    fmi3Status fmi3Get##TYPE(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, fmi3##TYPE v[], \
                             size_t n) {                                                                       \
        (void)vr; (void)v; (void)n;                                                                            \
        return no_variables(INSTANCE, #TYPE, nvr);                                                             \
    }                                                                                                          \
    fmi3Status fmi3Set##TYPE(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr,                 \
                             const fmi3##TYPE v[], size_t n) {                                                 \
        (void)vr; (void)v; (void)n;                                                                            \
        return no_variables(INSTANCE, #TYPE, nvr);                                                             \
    }
NO_VARIABLES(Float32)
NO_VARIABLES(Int8)
NO_VARIABLES(UInt8)
NO_VARIABLES(Int16)
NO_VARIABLES(UInt16)
NO_VARIABLES(UInt32)
NO_VARIABLES(Int64)
NO_VARIABLES(UInt64)
NO_VARIABLES(String)

fmi3Status fmi3GetBinary(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, size_t sizes[],
                         fmi3Binary v[], size_t n) {
    (void)vr; (void)sizes; (void)v; (void)n;
    return no_variables(INSTANCE, "Binary", nvr);
}

fmi3Status fmi3SetBinary(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, const size_t sizes[],
                         const fmi3Binary v[], size_t n) {
    (void)vr; (void)sizes; (void)v; (void)n;
    return no_variables(INSTANCE, "Binary", nvr);
}

fmi3Status fmi3GetClock(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, fmi3Clock v[]) {
    (void)vr; (void)v;
    return no_variables(INSTANCE, "Clock", nvr);
}

fmi3Status fmi3SetClock(fmi3Instance instance, const fmi3ValueReference vr[], size_t nvr, const fmi3Clock v[]) {
    (void)vr; (void)v;
    return no_variables(INSTANCE, "Clock", nvr);
}

/* ------------------------------------------------------------------ FMU states */
#if CAN_GET_SET_STATE
fmi3Status fmi3GetFMUState(fmi3Instance instance, fmi3FMUState *state) { return me_get_state(INSTANCE, state); }
fmi3Status fmi3SetFMUState(fmi3Instance instance, fmi3FMUState state) { return me_set_state(INSTANCE, state); }
fmi3Status fmi3FreeFMUState(fmi3Instance instance, fmi3FMUState *state) { (void)instance; return free_state(state); }
#else
fmi3Status fmi3GetFMUState(fmi3Instance instance, fmi3FMUState *state) { (void)state; NO_STATE(instance) }
fmi3Status fmi3SetFMUState(fmi3Instance instance, fmi3FMUState state) { (void)state; NO_STATE(instance) }
fmi3Status fmi3FreeFMUState(fmi3Instance instance, fmi3FMUState *state) { (void)state; NO_STATE(instance) }
#endif

/* ------------------------------------------------------------------ model exchange */
fmi3Status fmi3UpdateDiscreteStates(fmi3Instance instance, fmi3Boolean *needUpdate, fmi3Boolean *terminate,
                                    fmi3Boolean *nominalsChanged, fmi3Boolean *valuesChanged,
                                    fmi3Boolean *nextTimeDefined, fmi3Float64 *nextTime) {
    fmi3Status status = me_update_discrete_states(INSTANCE, valuesChanged, nextTimeDefined, nextTime);
    if (status != fmi3OK) return status;
    *needUpdate = false;
    *terminate = MODEL_TERMINATED(&INSTANCE->s) != 0;
    *nominalsChanged = false;
    return fmi3OK;
}

fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance instance) { return me_enter_continuous_time_mode(INSTANCE); }

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance instance, fmi3Boolean noSetPrior, fmi3Boolean *enterEventMode,
                                       fmi3Boolean *terminate) {
    (void)noSetPrior;
    *terminate = false;
    return me_completed_integrator_step(INSTANCE, enterEventMode);
}

fmi3Status fmi3SetTime(fmi3Instance instance, fmi3Float64 time) {
    INSTANCE->s.time = time;
    return fmi3OK;
}

fmi3Status fmi3SetContinuousStates(fmi3Instance instance, const fmi3Float64 x[], size_t nx) {
    return me_set_continuous_states(INSTANCE, x, nx);
}

fmi3Status fmi3GetContinuousStates(fmi3Instance instance, fmi3Float64 x[], size_t nx) {
    return me_get_continuous_states(INSTANCE, x, nx);
}

fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance instance, fmi3Float64 dx[], size_t nx) {
    return me_get_derivatives(INSTANCE, dx, nx);
}

fmi3Status fmi3GetEventIndicators(fmi3Instance instance, fmi3Float64 z[], size_t nz) {
    return me_get_event_indicators(INSTANCE, z, nz);
}

fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance instance, fmi3Float64 nominals[], size_t nx) {
    (void)instance;
    return me_nominals(nominals, nx);
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance instance, size_t *n) {
    (void)instance;
    *n = N_EVENT_INDICATORS;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance instance, size_t *n) {
    (void)instance;
    *n = N_STATES;
    return fmi3OK;
}

/* ------------------------------------------------------------------ not provided */
#ifndef CO_SIMULATION
fmi3Status fmi3EnterStepMode(fmi3Instance instance) { NOT_PROVIDED("co-simulation") }
fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 t, fmi3Float64 h, fmi3Boolean noSetPrior,
                      fmi3Boolean *eventNeeded, fmi3Boolean *terminate, fmi3Boolean *early, fmi3Float64 *last) {
    (void)t; (void)h; (void)noSetPrior; (void)eventNeeded; (void)terminate; (void)early; (void)last;
    NOT_PROVIDED("co-simulation")
}
#endif
fmi3Status fmi3SerializedFMUStateSize(fmi3Instance instance, fmi3FMUState state, size_t *size) {
    (void)state; (void)size; NOT_PROVIDED("serialization")
}
fmi3Status fmi3SerializeFMUState(fmi3Instance instance, fmi3FMUState state, fmi3Byte bytes[], size_t size) {
    (void)state; (void)bytes; (void)size; NOT_PROVIDED("serialization")
}
fmi3Status fmi3DeserializeFMUState(fmi3Instance instance, const fmi3Byte bytes[], size_t size, fmi3FMUState *state) {
    (void)state; (void)bytes; (void)size; NOT_PROVIDED("serialization")
}
fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance instance, fmi3ValueReference vr, size_t *n) {
    (void)vr; (void)n; NOT_PROVIDED("variable dependencies")
}
fmi3Status fmi3GetVariableDependencies(fmi3Instance instance, fmi3ValueReference dependent, size_t e[],
                                       fmi3ValueReference independents[], size_t indices[],
                                       fmi3DependencyKind kinds[], size_t n) {
    (void)dependent; (void)e; (void)independents; (void)indices; (void)kinds; (void)n;
    NOT_PROVIDED("variable dependencies")
}
fmi3Status fmi3GetDirectionalDerivative(fmi3Instance instance, const fmi3ValueReference a[], size_t b,
                                        const fmi3ValueReference c[], size_t d, const fmi3Float64 e[], size_t f,
                                        fmi3Float64 g[], size_t h) {
    (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; NOT_PROVIDED("directional derivatives")
}
fmi3Status fmi3GetAdjointDerivative(fmi3Instance instance, const fmi3ValueReference a[], size_t b,
                                    const fmi3ValueReference c[], size_t d, const fmi3Float64 e[], size_t f,
                                    fmi3Float64 g[], size_t h) {
    (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; NOT_PROVIDED("adjoint derivatives")
}
fmi3Status fmi3EnterConfigurationMode(fmi3Instance instance) { NOT_PROVIDED("configuration mode") }
fmi3Status fmi3ExitConfigurationMode(fmi3Instance instance) { NOT_PROVIDED("configuration mode") }
fmi3Status fmi3GetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference a[], size_t b, fmi3Float64 c[],
                                  fmi3IntervalQualifier d[]) {
    (void)a; (void)b; (void)c; (void)d; NOT_PROVIDED("clocks")
}
fmi3Status fmi3GetIntervalFraction(fmi3Instance instance, const fmi3ValueReference a[], size_t b, fmi3UInt64 c[],
                                   fmi3UInt64 d[], fmi3IntervalQualifier e[]) {
    (void)a; (void)b; (void)c; (void)d; (void)e; NOT_PROVIDED("clocks")
}
fmi3Status fmi3GetShiftDecimal(fmi3Instance instance, const fmi3ValueReference a[], size_t b, fmi3Float64 c[]) {
    (void)a; (void)b; (void)c; NOT_PROVIDED("clocks")
}
fmi3Status fmi3GetShiftFraction(fmi3Instance instance, const fmi3ValueReference a[], size_t b, fmi3UInt64 c[],
                                fmi3UInt64 d[]) {
    (void)a; (void)b; (void)c; (void)d; NOT_PROVIDED("clocks")
}
fmi3Status fmi3SetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference a[], size_t b,
                                  const fmi3Float64 c[]) {
    (void)a; (void)b; (void)c; NOT_PROVIDED("clocks")
}
fmi3Status fmi3SetIntervalFraction(fmi3Instance instance, const fmi3ValueReference a[], size_t b,
                                   const fmi3UInt64 c[], const fmi3UInt64 d[]) {
    (void)a; (void)b; (void)c; (void)d; NOT_PROVIDED("clocks")
}
fmi3Status fmi3SetShiftDecimal(fmi3Instance instance, const fmi3ValueReference a[], size_t b, const fmi3Float64 c[]) {
    (void)a; (void)b; (void)c; NOT_PROVIDED("clocks")
}
fmi3Status fmi3SetShiftFraction(fmi3Instance instance, const fmi3ValueReference a[], size_t b, const fmi3UInt64 c[],
                                const fmi3UInt64 d[]) {
    (void)a; (void)b; (void)c; (void)d; NOT_PROVIDED("clocks")
}
fmi3Status fmi3EvaluateDiscreteStates(fmi3Instance instance) { NOT_PROVIDED("fmi3EvaluateDiscreteStates") }
fmi3Status fmi3GetOutputDerivatives(fmi3Instance instance, const fmi3ValueReference a[], size_t b,
                                    const fmi3Int32 c[], fmi3Float64 d[], size_t e) {
    (void)a; (void)b; (void)c; (void)d; (void)e; NOT_PROVIDED("output derivatives")
}
fmi3Status fmi3ActivateModelPartition(fmi3Instance instance, fmi3ValueReference a, fmi3Float64 b) {
    (void)a; (void)b; NOT_PROVIDED("clocks")
}
