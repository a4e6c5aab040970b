/* cosimrun_fmi3_unused.h - stubs, returning fmi3Error, of the FMI 3.0 functions no co-simulation test model
 * uses (Binary and Clock variables, FMU-state serialization, dependencies and directional derivatives,
 * configuration mode, clock intervals and shifts, model exchange's continuous-time functions, output
 * derivatives, model partitions): FMPy binds every FMI 3.0 function. A model that serializes its FMU state
 * defines SERIALIZES_FMU_STATE and those three functions itself. Inlined into the including source by
 * tests/fmus/builders.py.
 */
#include "fmi3Functions.h"

fmi3Status fmi3GetBinary(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, size_t sizes[],
                         fmi3Binary values[], size_t n) {
    (void)i; (void)vr; (void)nvr; (void)sizes; (void)values; (void)n; return fmi3Error;
}
fmi3Status fmi3SetBinary(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, const size_t sizes[],
                         const fmi3Binary values[], size_t n) {
    (void)i; (void)vr; (void)nvr; (void)sizes; (void)values; (void)n; return fmi3Error;
}
fmi3Status fmi3GetClock(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, fmi3Clock values[]) {
    (void)i; (void)vr; (void)nvr; (void)values; return fmi3Error;
}
fmi3Status fmi3SetClock(fmi3Instance i, const fmi3ValueReference vr[], size_t nvr, const fmi3Clock values[]) {
    (void)i; (void)vr; (void)nvr; (void)values; return fmi3Error;
}
#ifndef SERIALIZES_FMU_STATE
fmi3Status fmi3SerializedFMUStateSize(fmi3Instance i, fmi3FMUState st, size_t *size) {
    (void)i; (void)st; (void)size; return fmi3Error;
}
fmi3Status fmi3SerializeFMUState(fmi3Instance i, fmi3FMUState st, fmi3Byte b[], size_t size) {
    (void)i; (void)st; (void)b; (void)size; return fmi3Error;
}
fmi3Status fmi3DeserializeFMUState(fmi3Instance i, const fmi3Byte b[], size_t size, fmi3FMUState *st) {
    (void)i; (void)b; (void)size; (void)st; return fmi3Error;
}
#endif
fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance i, fmi3ValueReference vr, size_t *n) {
    (void)i; (void)vr; (void)n; return fmi3Error;
}
fmi3Status fmi3GetVariableDependencies(fmi3Instance i, fmi3ValueReference d, size_t e[], fmi3ValueReference f[],
                                       size_t g[], fmi3DependencyKind h[], size_t n) {
    (void)i; (void)d; (void)e; (void)f; (void)g; (void)h; (void)n; return fmi3Error;
}
fmi3Status fmi3GetDirectionalDerivative(fmi3Instance i, const fmi3ValueReference a[], size_t b,
                                        const fmi3ValueReference c[], size_t d, const fmi3Float64 e[], size_t f,
                                        fmi3Float64 g[], size_t h) {
    (void)i; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; return fmi3Error;
}
fmi3Status fmi3GetAdjointDerivative(fmi3Instance i, const fmi3ValueReference a[], size_t b,
                                    const fmi3ValueReference c[], size_t d, const fmi3Float64 e[], size_t f,
                                    fmi3Float64 g[], size_t h) {
    (void)i; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; return fmi3Error;
}
fmi3Status fmi3EnterConfigurationMode(fmi3Instance i) { (void)i; return fmi3Error; }
fmi3Status fmi3ExitConfigurationMode(fmi3Instance i) { (void)i; return fmi3Error; }
fmi3Status fmi3GetIntervalDecimal(fmi3Instance i, const fmi3ValueReference a[], size_t b, fmi3Float64 c[],
                                  fmi3IntervalQualifier d[]) {
    (void)i; (void)a; (void)b; (void)c; (void)d; return fmi3Error;
}
fmi3Status fmi3GetIntervalFraction(fmi3Instance i, const fmi3ValueReference a[], size_t b, fmi3UInt64 c[],
                                   fmi3UInt64 d[], fmi3IntervalQualifier e[]) {
    (void)i; (void)a; (void)b; (void)c; (void)d; (void)e; return fmi3Error;
}
fmi3Status fmi3GetShiftDecimal(fmi3Instance i, const fmi3ValueReference a[], size_t b, fmi3Float64 c[]) {
    (void)i; (void)a; (void)b; (void)c; return fmi3Error;
}
fmi3Status fmi3GetShiftFraction(fmi3Instance i, const fmi3ValueReference a[], size_t b, fmi3UInt64 c[],
                                fmi3UInt64 d[]) {
    (void)i; (void)a; (void)b; (void)c; (void)d; return fmi3Error;
}
fmi3Status fmi3SetIntervalDecimal(fmi3Instance i, const fmi3ValueReference a[], size_t b, const fmi3Float64 c[]) {
    (void)i; (void)a; (void)b; (void)c; return fmi3Error;
}
fmi3Status fmi3SetIntervalFraction(fmi3Instance i, const fmi3ValueReference a[], size_t b, const fmi3UInt64 c[],
                                   const fmi3UInt64 d[]) {
    (void)i; (void)a; (void)b; (void)c; (void)d; return fmi3Error;
}
fmi3Status fmi3SetShiftDecimal(fmi3Instance i, const fmi3ValueReference a[], size_t b, const fmi3Float64 c[]) {
    (void)i; (void)a; (void)b; (void)c; return fmi3Error;
}
fmi3Status fmi3SetShiftFraction(fmi3Instance i, const fmi3ValueReference a[], size_t b, const fmi3UInt64 c[],
                                const fmi3UInt64 d[]) {
    (void)i; (void)a; (void)b; (void)c; (void)d; return fmi3Error;
}
fmi3Status fmi3EvaluateDiscreteStates(fmi3Instance i) { (void)i; return fmi3Error; }
fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance i) { (void)i; return fmi3Error; }
fmi3Status fmi3CompletedIntegratorStep(fmi3Instance i, fmi3Boolean a, fmi3Boolean *b, fmi3Boolean *c) {
    (void)i; (void)a; (void)b; (void)c; return fmi3Error;
}
fmi3Status fmi3SetTime(fmi3Instance i, fmi3Float64 t) { (void)i; (void)t; return fmi3Error; }
fmi3Status fmi3SetContinuousStates(fmi3Instance i, const fmi3Float64 x[], size_t n) {
    (void)i; (void)x; (void)n; return fmi3Error;
}
fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance i, fmi3Float64 x[], size_t n) {
    (void)i; (void)x; (void)n; return fmi3Error;
}
fmi3Status fmi3GetEventIndicators(fmi3Instance i, fmi3Float64 x[], size_t n) {
    (void)i; (void)x; (void)n; return fmi3Error;
}
fmi3Status fmi3GetContinuousStates(fmi3Instance i, fmi3Float64 x[], size_t n) {
    (void)i; (void)x; (void)n; return fmi3Error;
}
fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance i, fmi3Float64 x[], size_t n) {
    (void)i; (void)x; (void)n; return fmi3Error;
}
fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance i, size_t *n) { (void)i; (void)n; return fmi3Error; }
fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance i, size_t *n) { (void)i; (void)n; return fmi3Error; }
fmi3Status fmi3GetOutputDerivatives(fmi3Instance i, const fmi3ValueReference a[], size_t b, const fmi3Int32 c[],
                                    fmi3Float64 d[], size_t e) {
    (void)i; (void)a; (void)b; (void)c; (void)d; (void)e; return fmi3Error;
}
fmi3Status fmi3ActivateModelPartition(fmi3Instance i, fmi3ValueReference a, fmi3Float64 b) {
    (void)i; (void)a; (void)b; return fmi3Error;
}
