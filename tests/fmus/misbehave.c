/* Test FMU: y = t (the time the FMU reached), and a doStep that misbehaves on request, for the tests of
 * what a native fault does to a run: from the step that ends at or after hang_at it never returns
 * (it sleeps, off the CPU, forever); from crash_at it crashes as crash_how says: 1 dereferences a null
 * pointer (SIGSEGV), 2 calls abort() (SIGABRT), 3 calls exit(7). Parameter work (s) makes each step wait
 * that long first, so that a run takes a known time.
 */
#define MODEL_GUID "cosimrun-test-misbehave-1"
#define N_REAL 4
#define N_INTEGER 1
#define N_BOOLEAN 0
enum { Y, HANG_AT, CRASH_AT, WORK };
enum { CRASH_HOW };
#include "cosimrun_fmi2cs.h"
#include <stdlib.h>
#include <time.h>

static void model_defaults(ModelState *s) {
    s->r[HANG_AT] = 1e300;
    s->r[CRASH_AT] = 1e300;
}

static void model_update(ModelState *s) { s->r[Y] = s->time; }

static void pause_for(double seconds) {
    struct timespec pause = {(time_t)seconds, (long)(1e9 * (seconds - (double)(time_t)seconds))};
    nanosleep(&pause, NULL);
}

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    double end = t + h;
    if (s->r[WORK] > 0.0) pause_for(s->r[WORK]);
    if (end >= s->r[HANG_AT] - 1e-9)
        for (;;) pause_for(1.0);
    if (end >= s->r[CRASH_AT] - 1e-9) {
        if (s->i[CRASH_HOW] == 1) {
            volatile int *nowhere = NULL;
            *nowhere = 1;
        }
        if (s->i[CRASH_HOW] == 2) abort();
        if (s->i[CRASH_HOW] == 3) exit(7);
    }
    return fmi2OK;
}
