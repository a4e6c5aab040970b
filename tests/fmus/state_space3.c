/* An FMI 3.0 co-simulation state-space model with array variables, for the tests.
 *
 * x' = A x + B u, y = x, x(t0) = x0, with the 2x2 array parameter A (row-major), the array parameters B and x0
 * (2 elements), the scalar input u and the array output y (2 elements). fmi3DoStep integrates with classical
 * RK4 on substeps of at most MAX_SUBSTEP, u held over the step.
 */
#include <math.h>
#include "cosimrun_fmi3cs_float64.h" /* inlined by tests/fmus/builders.py */

#ifndef CAN_GET_SET_STATE
#define CAN_GET_SET_STATE 1
#endif
#define MAX_SUBSTEP 1e-3

enum { VR_TIME, VR_A, VR_B, VR_X0, VR_U, VR_Y };

typedef struct {
    double time, a[4], b[2], x0[2], u, x[2];
} State;

static void derivative(const State *s, const double x[2], double dx[2]) {
    for (int r = 0; r < 2; r++) dx[r] = s->a[2 * r] * x[0] + s->a[2 * r + 1] * x[1] + s->b[r] * s->u;
}

static void rk4(State *s, double h) {
    double k1[2], k2[2], k3[2], k4[2], tmp[2];
    derivative(s, s->x, k1);
    for (int r = 0; r < 2; r++) tmp[r] = s->x[r] + 0.5 * h * k1[r];
    derivative(s, tmp, k2);
    for (int r = 0; r < 2; r++) tmp[r] = s->x[r] + 0.5 * h * k2[r];
    derivative(s, tmp, k3);
    for (int r = 0; r < 2; r++) tmp[r] = s->x[r] + h * k3[r];
    derivative(s, tmp, k4);
    for (int r = 0; r < 2; r++) s->x[r] += h / 6.0 * (k1[r] + 2.0 * k2[r] + 2.0 * k3[r] + k4[r]);
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resources, fmi3Boolean visible,
                                         fmi3Boolean loggingOn, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed, const fmi3ValueReference required[],
                                         size_t nRequired, fmi3InstanceEnvironment env, fmi3LogMessageCallback log,
                                         fmi3IntermediateUpdateCallback intermediateUpdate) {
    (void)name; (void)token; (void)resources; (void)visible; (void)loggingOn; (void)eventModeUsed;
    (void)earlyReturnAllowed; (void)required; (void)nRequired; (void)env; (void)log; (void)intermediateUpdate;
    State *s = calloc(1, sizeof(State));
    if (!s) return NULL;
    const double a[4] = {0.0, 1.0, -2.0, -3.0};
    memcpy(s->a, a, sizeof a);
    s->b[1] = 1.0;
    s->x0[0] = 1.0;
    return s;
}

void fmi3FreeInstance(fmi3Instance i) { free(i); }

fmi3Status fmi3EnterInitializationMode(fmi3Instance i, fmi3Boolean td, fmi3Float64 tol, fmi3Float64 start,
                                       fmi3Boolean sd, fmi3Float64 stop) {
    (void)td; (void)tol; (void)sd; (void)stop;
    ((State *)i)->time = start;
    return fmi3OK;
}

fmi3Status fmi3ExitInitializationMode(fmi3Instance i) {
    State *s = i;
    s->x[0] = s->x0[0]; s->x[1] = s->x0[1];
    return fmi3OK;
}

fmi3Status fmi3DoStep(fmi3Instance i, fmi3Float64 t, fmi3Float64 dt, fmi3Boolean noSetFMUStatePriorToCurrentPoint,
                      fmi3Boolean *eventHandlingNeeded, fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn,
                      fmi3Float64 *lastSuccessfulTime) {
    (void)noSetFMUStatePriorToCurrentPoint;
    State *s = i;
    int n = (int)ceil(dt / MAX_SUBSTEP - 1e-9);
    if (n < 1) n = 1;
    for (int k = 0; k < n; k++) rk4(s, dt / n);
    s->time = t + dt;
    *eventHandlingNeeded = false; *terminateSimulation = false; *earlyReturn = false;
    *lastSuccessfulTime = s->time;
    return fmi3OK;
}

fmi3Status fmi3GetFloat64(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 values[],
                          size_t n) {
    State *s = i;
    size_t k = 0;
    for (size_t j = 0; j < nvr; j++) {
        switch (vr[j]) {
            case VR_TIME: values[k++] = s->time; break;
            case VR_A: for (int q = 0; q < 4; q++) values[k++] = s->a[q]; break;
            case VR_B: for (int q = 0; q < 2; q++) values[k++] = s->b[q]; break;
            case VR_X0: for (int q = 0; q < 2; q++) values[k++] = s->x0[q]; break;
            case VR_U: values[k++] = s->u; break;
            case VR_Y: for (int q = 0; q < 2; q++) values[k++] = s->x[q]; break;
            default: return fmi3Error;
        }
    }
    return k == n ? fmi3OK : fmi3Error;
}

fmi3Status fmi3SetFloat64(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, const fmi3Float64 values[],
                          size_t n) {
    State *s = i;
    size_t k = 0;
    for (size_t j = 0; j < nvr; j++) {
        switch (vr[j]) {
            case VR_A: for (int q = 0; q < 4; q++) s->a[q] = values[k++]; break;
            case VR_B: for (int q = 0; q < 2; q++) s->b[q] = values[k++]; break;
            case VR_X0: for (int q = 0; q < 2; q++) s->x0[q] = values[k++]; break;
            case VR_U: s->u = values[k++]; break;
            default: return fmi3Error;
        }
    }
    return k == n ? fmi3OK : fmi3Error;
}

fmi3Status fmi3GetFMUState(fmi3Instance i, fmi3FMUState *state) {
    if (!CAN_GET_SET_STATE) return fmi3Error;
    State *copy = *state ? (State *)*state : malloc(sizeof(State));
    if (!copy) return fmi3Error;
    memcpy(copy, i, sizeof(State));
    *state = copy;
    return fmi3OK;
}
fmi3Status fmi3SetFMUState(fmi3Instance i, fmi3FMUState state) {
    if (!CAN_GET_SET_STATE || !state) return fmi3Error;
    memcpy(i, state, sizeof(State));
    return fmi3OK;
}
fmi3Status fmi3FreeFMUState(fmi3Instance i, fmi3FMUState *state) {
    (void)i;
    free(*state);
    *state = NULL;
    return fmi3OK;
}
