//  The pusher thread; see ps_pusher.h.

#include "ps_pusher.h"

#include <pthread.h>
#include <stdlib.h>

#include "ps_clock.h"

struct _ps_pusher_t {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool posted, finished, quit;    //  under lock
    bool busy;                  //  posted and not waited for (the caller's thread only)

    //  The push posted: written by the caller before posting, read by the
    //  thread after; the results the other way round.
    ps_client_t *client;
    uint64_t step;
    uint32_t worker;
    const float *const *grads;
    float *const *values;
    int rc;
    ps_push_info_t info;
    ps_error_t err;
    double ms;
};

static void *
s_run (void *arg)
{
    ps_pusher_t *self = arg;
    pthread_mutex_lock (&self->lock);
    while (true) {
        while (!self->posted && !self->quit)
            pthread_cond_wait (&self->cond, &self->lock);
        if (self->quit)
            break;
        self->posted = false;
        pthread_mutex_unlock (&self->lock);
        ps_push_info_t info = { 0 };
        ps_error_t err;
        double t0 = ps_clock_ms ();
        int rc = ps_client_push_pull (self->client, self->step, self->worker, self->grads,
                                      self->values, &info, &err);
        double ms = ps_clock_ms () - t0;
        pthread_mutex_lock (&self->lock);
        self->rc = rc;
        self->info = info;
        self->err = err;
        self->ms = ms;
        self->finished = true;
        pthread_cond_broadcast (&self->cond);
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

ps_pusher_t *
ps_pusher_new (void)
{
    ps_pusher_t *self = calloc (1, sizeof *self);
    if (!self
    ||  pthread_mutex_init (&self->lock, NULL) != 0 || pthread_cond_init (&self->cond, NULL) != 0
    ||  pthread_create (&self->thread, NULL, s_run, self) != 0)
        abort ();               //  only for lack of memory or threads
    return self;
}

void
ps_pusher_destroy (ps_pusher_t **self_p)
{
    ps_pusher_t *self = *self_p;
    if (!self)
        return;
    if (self->busy) {
        ps_push_info_t info;
        double ms;
        ps_error_t ignored;
        ps_pusher_wait (self, &info, &ms, &ignored);
    }
    pthread_mutex_lock (&self->lock);
    self->quit = true;
    pthread_cond_broadcast (&self->cond);
    pthread_mutex_unlock (&self->lock);
    if (pthread_join (self->thread, NULL) != 0)
        abort ();
    pthread_cond_destroy (&self->cond);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

void
ps_pusher_post (ps_pusher_t *self, ps_client_t *client, uint64_t step, uint32_t worker,
                const float *const *grads, float *const *values)
{
    pthread_mutex_lock (&self->lock);
    self->client = client;
    self->step = step;
    self->worker = worker;
    self->grads = grads;
    self->values = values;
    self->posted = true;
    pthread_cond_broadcast (&self->cond);
    pthread_mutex_unlock (&self->lock);
    self->busy = true;
}

bool
ps_pusher_busy (const ps_pusher_t *self)
{
    return self->busy;
}

int
ps_pusher_wait (ps_pusher_t *self, ps_push_info_t *info, double *ms, ps_error_t *err)
{
    pthread_mutex_lock (&self->lock);
    while (!self->finished)
        pthread_cond_wait (&self->cond, &self->lock);
    self->finished = false;
    int rc = self->rc;
    *info = self->info;
    *ms = self->ms;
    if (rc)
        *err = self->err;
    pthread_mutex_unlock (&self->lock);
    self->busy = false;
    return rc;
}
