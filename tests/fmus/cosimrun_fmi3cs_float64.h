/* cosimrun_fmi3cs_float64.h - the FMI 3.0 functions a co-simulation test model with Float64 variables only does
 * not use, as stubs (FMPy binds every FMI 3.0 function). Inlined into the model's source by tests/fmus/builders.py
 * for its #include "cosimrun_fmi3cs_float64.h". The model defines fmi3InstantiateCoSimulation, fmi3FreeInstance,
 * fmi3EnterInitializationMode, fmi3ExitInitializationMode, fmi3DoStep, fmi3GetFloat64, fmi3SetFloat64 and the
 * FMU-state functions; everything here either does nothing (debug logging, terminate, event and step mode: the
 * model has no events) or returns fmi3Error.
 */
#include <stdlib.h>
#include <string.h>
#include "fmi3Functions.h"

const char *fmi3GetVersion(void) { return fmi3Version; }
fmi3Status fmi3SetDebugLogging(fmi3Instance i, fmi3Boolean on, size_t n, const fmi3String c[]) {
    (void)i; (void)on; (void)n; (void)c; return fmi3OK;
}
fmi3Status fmi3EnterEventMode(fmi3Instance i) { (void)i; return fmi3OK; }
fmi3Status fmi3EnterStepMode(fmi3Instance i) { (void)i; return fmi3OK; }
fmi3Status fmi3Terminate(fmi3Instance i) { (void)i; return fmi3OK; }
fmi3Status fmi3Reset(fmi3Instance i) { (void)i; return fmi3Error; }
fmi3Status fmi3UpdateDiscreteStates(fmi3Instance i, fmi3Boolean *needUpdate, fmi3Boolean *terminate,
                                    fmi3Boolean *nominalsChanged, fmi3Boolean *statesChanged,
                                    fmi3Boolean *nextTimeDefined, fmi3Float64 *nextTime) {
    (void)i;
    *needUpdate = false; *terminate = false; *nominalsChanged = false; *statesChanged = false;
    *nextTimeDefined = false; *nextTime = 0.0;
    return fmi3OK;
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

#define STUB_GET(T, NAME) \
    fmi3Status fmi3Get##NAME(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, T values[], size_t n) { \
        (void)i; (void)vr; (void)nvr; (void)values; (void)n; return fmi3Error; }
#define STUB_SET(T, NAME) \
    fmi3Status fmi3Set##NAME(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, const T values[], \
                             size_t n) { (void)i; (void)vr; (void)nvr; (void)values; (void)n; return fmi3Error; }
#define STUB_TYPE(T, NAME) STUB_GET(T, NAME) STUB_SET(T, NAME)
STUB_TYPE(fmi3Float32, Float32)
STUB_TYPE(fmi3Int8, Int8)
STUB_TYPE(fmi3UInt8, UInt8)
STUB_TYPE(fmi3Int16, Int16)
STUB_TYPE(fmi3UInt16, UInt16)
STUB_TYPE(fmi3Int32, Int32)
STUB_TYPE(fmi3UInt32, UInt32)
STUB_TYPE(fmi3Int64, Int64)
STUB_TYPE(fmi3UInt64, UInt64)
STUB_TYPE(fmi3Boolean, Boolean)
STUB_TYPE(fmi3String, String)

#include "cosimrun_fmi3_unused.h"
