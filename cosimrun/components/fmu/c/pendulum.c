/* Pendulum driven by a torque, with an optional end stop handled inside the step.
 * m L^2 q'' = -m g L sin(q) - damping q' + torque, integrated with classical RK4
 * (`substeps` sub-steps per communication step, the operation order of cosimrun's
 * OdeComponent). With q_max > 0 an impact |q| = q_max is located inside the
 * sub-step by bisection on the RK4 step length and reverses the velocity:
 * omega -> -restitution * omega.
 */
#define MODEL_GUID "cosimrun-example-pendulum-2"
#define N_REAL 11
#define N_INTEGER 1
enum { TORQUE, Q, OMEGA, MASS, LENGTH, DAMPING, G, Q_MAX, RESTITUTION, DER_Q, DER_OMEGA };
enum { SUBSTEPS };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[MASS] = 1.0; s->r[LENGTH] = 1.0; s->r[DAMPING] = 0.0; s->r[G] = 9.81;
    s->r[Q_MAX] = 0.0; s->r[RESTITUTION] = 0.5; s->i[SUBSTEPS] = 10;
}

static void rhs(const ModelState *s, const double x[2], double dx[2]) {
    double inertia = s->r[MASS] * (s->r[LENGTH] * s->r[LENGTH]);
    double a = s->r[G] / s->r[LENGTH], b = s->r[DAMPING] / inertia, c = 1.0 / inertia;
    dx[0] = x[1];
    dx[1] = -a * sin(x[0]) - b * x[1] + c * s->r[TORQUE];
}

static void model_update(ModelState *s) {
    double x[2], dx[2];
    x[0] = s->r[Q]; x[1] = s->r[OMEGA];
    rhs(s, x, dx);
    s->r[DER_Q] = dx[0];
    s->r[DER_OMEGA] = dx[1];
}

static void rk4(const ModelState *s, const double x[2], double h, double y[2]) {
    double k1[2], k2[2], k3[2], k4[2], t[2], h2 = 0.5 * h, h6 = h / 6.0;
    int j;
    rhs(s, x, k1);
    for (j = 0; j < 2; j++) t[j] = k1[j] * h2 + x[j];
    rhs(s, t, k2);
    for (j = 0; j < 2; j++) t[j] = k2[j] * h2 + x[j];
    rhs(s, t, k3);
    for (j = 0; j < 2; j++) t[j] = k3[j] * h + x[j];
    rhs(s, t, k4);
    for (j = 0; j < 2; j++) y[j] = x[j] + ((((k2[j] + k3[j]) * 2.0) + k1[j]) + k4[j]) * h6;
}

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    int n = s->i[SUBSTEPS] > 0 ? s->i[SUBSTEPS] : 1, k, impacts = 0;
    double hs = h / n, q_max = s->r[Q_MAX];
    double x[2], y[2];
    (void)t;
    x[0] = s->r[Q]; x[1] = s->r[OMEGA];
    if (s->r[MASS] <= 0.0 || s->r[LENGTH] <= 0.0) {
        log_message(m, fmi2Error, "logStatusError", "mass and length must be > 0");
        return fmi2Error;
    }
    for (k = 0; k < n; k++) {
        double rest = hs;
        while (rest > 0.0) {
            rk4(s, x, rest, y);
            if (q_max > 0.0 && fabs(y[0]) > q_max && fabs(x[0]) <= q_max) {
                double lo = 0.0, hi = rest, z[2];
                int it;
                for (it = 0; it < 200 && hi - lo > 1e-15 * (1.0 + hi); it++) {
                    double mid = 0.5 * (lo + hi);
                    rk4(s, x, mid, z);
                    if (fabs(z[0]) > q_max) hi = mid; else lo = mid;
                }
                rk4(s, x, hi, z);
                x[0] = copysign(q_max, z[0]);
                x[1] = -s->r[RESTITUTION] * z[1];
                rest -= hi;
                if (++impacts > 1000) {
                    log_message(m, fmi2Discard, "logStatusDiscard", "more than 1000 end-stop impacts in one step");
                    return fmi2Discard;
                }
            } else {
                x[0] = y[0]; x[1] = y[1];
                rest = 0.0;
            }
        }
    }
    s->r[Q] = x[0];
    s->r[OMEGA] = x[1];
    return fmi2OK;
}
