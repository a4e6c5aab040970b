/* A pool of native threads that run FMU steps (fmi2DoStep / fmi3DoStep) concurrently, without the GIL.
 *
 * Optional: cosimrun.fmi.pool runs the same jobs on Python threads when this extension is not built (no C
 * compiler at install, no POSIX threads: Windows). Built with a C11 compiler and POSIX threads; every time and
 * counter is a 64-bit integer (a `long` is 32-bit on Windows).
 *
 * Pool.run(jobs, count) (one caller at a time) hands an array of cosimrun_step_job pointers (the layout of
 * cosimrun.fmi.pool.CStepJob) to the pool's threads and to the calling thread, which all take jobs
 * from one shared word until none is left, and returns once every job has run. The caller
 * releases the GIL for that time and no Python runs on the pool's threads (an FMU's log callback
 * takes the GIL itself), so a batch costs one hand-off and no GIL hand-over.
 *
 * Invariant: each job of a batch runs exactly once. The batch is published in one 64-bit atomic
 * word, `claim` = generation << 32 | count << 16 | next, and a thread runs job `next` only after its
 * compare-and-swap moved the word from (g, count, next) to (g, count, next + 1) with next < count: the
 * word alone says whether a job is left, so a thread that read the word of a finished batch cannot
 * claim with the count of the next one (the fields the caller rewrites for a batch, `jobs` and
 * `remaining`, are read only after a successful claim). A successful claim is always of the batch
 * being run, whatever the generation: the caller replaces the word only once `remaining` is 0, which
 * takes the claimed job's end. Memory order (C11, sequentially consistent atomics): the caller
 * writes `jobs`, the jobs and `remaining` before it stores the word, and every successful claim
 * reads that store or a claim after it (a release sequence), so it sees them; a thread's writes to
 * its job come before its decrement of `remaining`, which the caller reads as 0 before it reads the
 * jobs or writes the next batch. The generation only tells a waiting thread that a batch came (once
 * it wraps, a thread may miss a batch, which the others and the caller run).
 *
 * A waiting thread polls for `spin_us` microseconds (a wake-up from a blocked wait costs 40-180 us
 * on a small cloud VM whose idle cores halt), then blocks on a condition variable.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef struct {
    void *step;          /* fmi2DoStep or fmi3DoStep */
    void *instance;
    void *get_state;     /* fmi2GetFMUstate or fmi3GetFMUState, called first when `snapshot` is set */
    void *state;         /* the FMU state it fills (allocated by the FMU on the first call, then reused) */
    void *out[4];        /* fmi3DoStep: eventHandlingNeeded, terminateSimulation, earlyReturn, lastSuccessfulTime */
    double t, h;
    int32_t version;     /* 2 or 3; 0: no call (a hand-off alone) */
    int32_t no_prior;    /* noSetFMUStatePriorToCurrentPoint */
    int32_t snapshot;
    int32_t status;      /* what doStep returned; -1: not stepped, the snapshot failed (state_status) */
    int32_t state_status;
    int32_t thread;      /* who ran it: 0 the calling thread, k > 0 the pool's k-th thread */
} cosimrun_step_job;

typedef int (*fmi2_do_step)(void *, double, double, int);
typedef int (*fmi3_do_step)(void *, double, double, bool, bool *, bool *, bool *, double *);
typedef int (*get_fmu_state)(void *, void **);

static void run_job(cosimrun_step_job *job, int32_t who)
{
    job->thread = who;
    if (job->snapshot && job->get_state) {
        job->state_status = ((get_fmu_state)job->get_state)(job->instance, &job->state);
        if (job->state_status > 1) {
            job->status = -1;
            return;
        }
    }
    switch (job->version) {
    case 2:
        job->status = ((fmi2_do_step)job->step)(job->instance, job->t, job->h, job->no_prior);
        break;
    case 3:
        job->status = ((fmi3_do_step)job->step)(job->instance, job->t, job->h, job->no_prior != 0,
                                                (bool *)job->out[0], (bool *)job->out[1], (bool *)job->out[2],
                                                (double *)job->out[3]);
        break;
    default:
        job->status = 0;
    }
}

#define MAX_JOBS 0xFFFF      /* jobs of a batch: count and next have 16 bits each in `claim` */

typedef struct {
    PyObject_HEAD
    int32_t threads;             /* pool threads (the caller is one more) */
    pthread_t *ids;
    int32_t started;
    int64_t spin_ns;
    cosimrun_step_job **jobs;    /* the batch being run */
    _Atomic uint64_t claim;      /* generation << 32 | count << 16 | next job (see the top of the file) */
    _Atomic int32_t remaining;   /* jobs of the batch not yet finished */
    _Atomic int32_t sleepers;
    _Atomic int32_t stop;
    _Atomic int64_t pooled;      /* jobs run by pool threads, over the pool's life */
    uint32_t generation;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
} Pool;

typedef struct {
    Pool *pool;
    int32_t index;
} Starter;

/* A poll of the spin loops: a compiler barrier only (C11, any compiler). A PAUSE instruction here makes the
 * pause-loop exiting of KVM deschedule the polling vCPU, which then misses the batch it waits for (see
 * benchmarks/README.md, bench_parallel.py); the polls are bounded by spin_us. */
static inline void cpu_relax(void)
{
    atomic_signal_fence(memory_order_seq_cst);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint32_t generation_of(uint64_t word)
{
    return (uint32_t)(word >> 32);
}

/* Take jobs of the batch being run until none is left; the number taken. */
static int64_t take_jobs(Pool *pool, int32_t who)
{
    int64_t taken = 0;
    uint64_t word = atomic_load(&pool->claim);
    for (;;) {
        uint32_t next = (uint32_t)(word & MAX_JOBS), count = (uint32_t)((word >> 16) & MAX_JOBS);
        if (next >= count)
            return taken;
        if (!atomic_compare_exchange_weak(&pool->claim, &word, word + 1))
            continue;  /* `word` now holds what the claim word holds */
        run_job(pool->jobs[next], who);  /* the batch cannot end before this job: its arrays stay */
        taken++;
        atomic_fetch_sub(&pool->remaining, 1);
        word = atomic_load(&pool->claim);
    }
}

static void *pool_thread(void *arg)
{
    Starter start = *(Starter *)arg;
    free(arg);
    Pool *pool = start.pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t generation = generation_of(atomic_load(&pool->claim));
        if (generation == seen && !atomic_load(&pool->stop)) {
            int64_t deadline = now_ns() + pool->spin_ns;
            int64_t polls = 0;
            while ((generation = generation_of(atomic_load(&pool->claim))) == seen && !atomic_load(&pool->stop)) {
                cpu_relax();
                if (++polls % 64 == 0 && now_ns() > deadline) {
                    pthread_mutex_lock(&pool->mutex);
                    atomic_fetch_add(&pool->sleepers, 1);
                    while ((generation = generation_of(atomic_load(&pool->claim))) == seen &&
                           !atomic_load(&pool->stop))
                        pthread_cond_wait(&pool->wake, &pool->mutex);
                    atomic_fetch_sub(&pool->sleepers, 1);
                    pthread_mutex_unlock(&pool->mutex);
                    break;
                }
            }
        }
        if (atomic_load(&pool->stop))
            return NULL;
        seen = generation;
        int64_t taken = take_jobs(pool, start.index);
        if (taken)
            atomic_fetch_add(&pool->pooled, taken);
    }
}

static void stop_threads(Pool *pool)
{
    if (!pool->started)
        return;
    pthread_mutex_lock(&pool->mutex);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (int32_t i = 0; i < pool->started; i++)
        pthread_join(pool->ids[i], NULL);
    pool->started = 0;
}

static int Pool_init(Pool *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"threads", "spin_us", NULL};
    int threads;
    double spin_us = 200.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|d", names, &threads, &spin_us))
        return -1;
    if (threads < 0 || !(spin_us >= 0) || spin_us > 1e12) {
        PyErr_SetString(PyExc_ValueError, "threads and spin_us must be >= 0");
        return -1;
    }
    if (self->ids) {
        PyErr_SetString(PyExc_RuntimeError, "a pool is initialized once");
        return -1;
    }
    self->threads = (int32_t)threads;
    self->spin_ns = (int64_t)(spin_us * 1000.0);
    self->ids = calloc(threads ? threads : 1, sizeof(pthread_t));
    if (!self->ids) {
        PyErr_NoMemory();
        return -1;
    }
    pthread_mutex_init(&self->mutex, NULL);
    pthread_cond_init(&self->wake, NULL);
    for (int32_t i = 0; i < self->threads; i++) {
        Starter *start = malloc(sizeof(Starter));
        if (start) {
            start->pool = self;
            start->index = i + 1;
        }
        if (!start || pthread_create(&self->ids[i], NULL, pool_thread, start) != 0) {
            free(start);
            stop_threads(self);
            PyErr_SetString(PyExc_OSError, "cannot start a pool thread");
            return -1;
        }
        self->started++;
    }
    return 0;
}

static PyObject *Pool_run(Pool *self, PyObject *args)
{
    unsigned long long address;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "Kn", &address, &count))
        return NULL;
    if (count < 0 || count > MAX_JOBS) {
        PyErr_Format(PyExc_ValueError, "count %zd out of range: a batch holds 0 to %d jobs (MAX_JOBS)", count,
                     MAX_JOBS);
        return NULL;
    }
    if (self->started != self->threads || atomic_load(&self->stop)) {
        PyErr_SetString(PyExc_RuntimeError, "the pool is closed");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    self->jobs = (cosimrun_step_job **)(uintptr_t)address;
    atomic_store(&self->remaining, (int32_t)count);
    atomic_store(&self->claim, (uint64_t)++self->generation << 32 | (uint64_t)count << 16);
    if (atomic_load(&self->sleepers) > 0) {
        pthread_mutex_lock(&self->mutex);
        pthread_cond_broadcast(&self->wake);
        pthread_mutex_unlock(&self->mutex);
    }
    take_jobs(self, 0);
    int64_t deadline = now_ns() + self->spin_ns;
    int64_t polls = 0;
    while (atomic_load(&self->remaining) > 0) {
        cpu_relax();
        if (++polls % 64 == 0 && now_ns() > deadline)
            sched_yield();
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Pool_close(Pool *self, PyObject *Py_UNUSED(ignored))
{
    Py_BEGIN_ALLOW_THREADS
    stop_threads(self);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Pool_get_pooled(Pool *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(atomic_load(&self->pooled));
}

static PyObject *Pool_get_alive(Pool *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->started);
}

static PyObject *Pool_get_kind(Pool *Py_UNUSED(self), void *Py_UNUSED(closure))
{
    return PyUnicode_FromString("native");
}

static void Pool_dealloc(Pool *self)
{
    stop_threads(self);
    if (self->ids) {
        pthread_mutex_destroy(&self->mutex);
        pthread_cond_destroy(&self->wake);
        free(self->ids);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Pool_methods[] = {
    {"run", (PyCFunction)Pool_run, METH_VARARGS,
     "run(jobs, count): run `count` step jobs (the address of an array of CStepJob pointers, at most MAX_JOBS) "
     "on the pool's threads and this one, without the GIL; returns once all have run"},
    {"close", (PyCFunction)Pool_close, METH_NOARGS, "close(): stop and join the pool's threads"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Pool_getset[] = {
    {"pooled", (getter)Pool_get_pooled, NULL, "jobs run by the pool's threads (not the caller) so far", NULL},
    {"alive", (getter)Pool_get_alive, NULL, "pool threads running (0 once closed)", NULL},
    {"kind", (getter)Pool_get_kind, NULL, "'native': the pool's threads are native threads", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cosimrun.fmi._cpool.Pool",
    .tp_doc = "Pool(threads, spin_us=200): native threads that run FMU step jobs with the caller, without the GIL",
    .tp_basicsize = sizeof(Pool),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pool_init,
    .tp_dealloc = (destructor)Pool_dealloc,
    .tp_methods = Pool_methods,
    .tp_getset = Pool_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_cpool",
    .m_doc = "Native threads for parallel FMU steps (see cosimrun.fmi.pool).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__cpool(void)
{
    if (PyType_Ready(&PoolType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
#ifdef Py_GIL_DISABLED
    /* Free-threaded CPython: the module keeps no Python state of its own, a pool's threads run no Python and a
     * pool has one caller at a time (its stepper), so importing it does not turn the GIL back on. */
    if (PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    PyObject *job_size = PyLong_FromSize_t(sizeof(cosimrun_step_job));
    PyObject *max_jobs = PyLong_FromLongLong(MAX_JOBS);
    int failed = !job_size || !max_jobs || PyModule_AddObjectRef(m, "Pool", (PyObject *)&PoolType) < 0 ||
                 PyModule_AddObjectRef(m, "JOB_SIZE", job_size) < 0 ||
                 PyModule_AddObjectRef(m, "MAX_JOBS", max_jobs) < 0;
    Py_XDECREF(job_size);
    Py_XDECREF(max_jobs);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
