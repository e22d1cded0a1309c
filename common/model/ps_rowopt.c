//  Per-row optimizers; see ps_rowopt.h and the formulas in ps_tablespec.h.

#include "ps_rowopt.h"

#include <assert.h>
#include <math.h>

//  As the dense kernels (ps_optimizer.c): a copy for AVX2, which the
//  loader picks where the CPU has it, 8 lanes wide for a row's sqrt and
//  division where the portable build has 4; not built for FMA, so both
//  copies compute the same bits.
#if defined (__x86_64__)
#   define S_HOT  __attribute__ ((target_clones ("avx2", "default")))
#else
#   define S_HOT
#endif

void
ps_rowopt_init_slots (const ps_rowopt_t *opt, float *slots, uint32_t dim)
{
    switch (opt->kind) {
        case PS_ROWOPT_SGD:
            break;
        case PS_ROWOPT_ADAGRAD:
            for (uint32_t j = 0; j < dim; j++)
                slots [j] = (float) opt->initial_accumulator;
            break;
        case PS_ROWOPT_ADAM:
            for (uint32_t j = 0; j < 2 * dim; j++)
                slots [j] = 0.0f;
            break;
        case PS_ROWOPT_FTRL:
            for (uint32_t j = 0; j < dim; j++) {
                slots [j] = 0.0f;
                slots [dim + j] = (float) opt->initial_accumulator;
            }
            break;
    }
}

static void
s_sgd (float *restrict w, const float *restrict g, uint32_t dim, float lr)
{
    for (uint32_t j = 0; j < dim; j++)
        w [j] -= lr * g [j];
}

static void
s_adagrad (float *restrict w, float *restrict a, const float *restrict g, uint32_t dim,
           float lr, float eps)
{
    for (uint32_t j = 0; j < dim; j++) {
        float acc = a [j] + g [j] * g [j];
        a [j] = acc;
        w [j] -= lr * g [j] / sqrtf (acc + eps);
    }
}

static void
s_adam (float *restrict w, float *restrict m, float *restrict v, const float *restrict g,
        uint32_t dim, float alpha, float one_minus_b1, float one_minus_b2, float eps)
{
    for (uint32_t j = 0; j < dim; j++) {
        float mj = m [j] + (g [j] - m [j]) * one_minus_b1;
        float vj = v [j] + (g [j] * g [j] - v [j]) * one_minus_b2;
        m [j] = mj;
        v [j] = vj;
        w [j] -= mj * alpha / (sqrtf (vj) + eps);
    }
}

//  FTRL-proximal as Keras's Ftrl with l2_shrinkage 0. With lr_power -0.5,
//  the common case, n^(-lr_power) is a square root, much cheaper than pow.
static void
s_ftrl (const ps_rowopt_t *opt, float *restrict w, float *restrict z, float *restrict n,
        const float *restrict g, uint32_t dim)
{
    double lr = opt->lr;
    double p = -opt->lr_power;
    bool root = p == 0.5;
    double extra = opt->beta / lr + 2.0 * opt->l2;
    for (uint32_t j = 0; j < dim; j++) {
        double gj = g [j];
        double n_old = n [j];
        double n_new = n_old + gj * gj;
        double pow_old = root ? sqrt (n_old) : pow (n_old, p);
        double pow_new = root ? sqrt (n_new) : pow (n_new, p);
        double sigma = (pow_new - pow_old) / lr;
        double zj = z [j] + gj - sigma * w [j];
        z [j] = (float) zj;
        n [j] = (float) n_new;
        if (fabs (zj) <= opt->l1)
            w [j] = 0.0f;
        else
            w [j] = (float) (-(zj - copysign (opt->l1, zj)) / (pow_new / lr + extra));
    }
}

//  The update itself, cloned; the public function stays one plain symbol
//  (a clone called from other files is not resolved by every compiler).
S_HOT static void
s_apply (const ps_rowopt_t *opt, float *w, float *slots, const float *g, uint32_t dim,
         uint64_t t)
{
    switch (opt->kind) {
        case PS_ROWOPT_SGD:
            s_sgd (w, g, dim, (float) opt->lr);
            break;
        case PS_ROWOPT_ADAGRAD:
            s_adagrad (w, slots, g, dim, (float) opt->lr, (float) opt->epsilon);
            break;
        case PS_ROWOPT_ADAM: {
            double b1t = pow (opt->beta1, (double) t);
            double b2t = pow (opt->beta2, (double) t);
            float alpha = (float) (opt->lr * sqrt (1.0 - b2t) / (1.0 - b1t));
            s_adam (w, slots, slots + dim, g, dim, alpha, (float) (1.0 - opt->beta1),
                    (float) (1.0 - opt->beta2), (float) opt->epsilon);
            break;
        }
        case PS_ROWOPT_FTRL:
            s_ftrl (opt, w, slots, slots + dim, g, dim);
            break;
    }
}

void
ps_rowopt_apply (const ps_rowopt_t *opt, float *w, float *slots, const float *g,
                 uint32_t dim, uint64_t t)
{
    assert (t >= 1);
    s_apply (opt, w, slots, g, dim, t);
}
