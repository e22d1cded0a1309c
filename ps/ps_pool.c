//  The apply pool; see ps_pool.h.

#include "ps_pool.h"
#include "ps_log.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

//  The ranges of one ps_pool_for, shared by the caller and the helpers it
//  queued; the last of them to let go frees it.
typedef struct {
    ps_opt_range_fn *fn;
    void *arg;
    size_t n, grain, ranges;
    atomic_size_t next;         //  the next range to take
    atomic_int refs;            //  the caller and its queued helpers
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    size_t done;                //  ranges finished, under lock
} s_for_t;

//  One task: a scan or a run of task index of job, or help with a
//  ps_pool_for (job NULL).
typedef struct {
    ps_pool_job_t *job;
    size_t index;
    bool scan;
    s_for_t *ranges;
} s_task_t;

struct _ps_pool_t {
    void *ctx;                  //  for the inproc sockets only
    void *done;                 //  PULL: threads post finished jobs here
    char done_endpoint [64];    //  its inproc name, unique to this pool
    pthread_t *threads;
    int nthreads;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    s_task_t *queue;            //  ring of pending tasks
    size_t queue_head, queue_len, queue_cap;
    bool stopping;
    size_t busy;                //  serving thread only
};

static void s_enqueue (ps_pool_t *self, ps_pool_job_t *job, bool scan, size_t skip);

//  Post a job whose tasks are all done to the serving thread.
static void
s_post (void *notify, ps_pool_job_t *job)
{
    if (zmq_send (notify, &job, sizeof job, 0) != sizeof job) {
        ps_error ("pool thread cannot post a finished request: %s", zmq_strerror (errno));
        abort ();
    }
}

//  Run one task. The thread that runs a job's last scan decides: the job
//  goes back to the serving thread, or every other task is queued and this
//  thread runs its own.
static void
s_run (ps_pool_t *self, s_task_t task, void *notify)
{
    ps_pool_job_t *job = task.job;
    if (task.scan) {
        job->ops->scan (job, task.index);
        if (atomic_fetch_sub (&job->scanning, 1) != 1)
            return;
        if (!job->ops->scanned (job)) {
            s_post (notify, job);
            return;
        }
        s_enqueue (self, job, false, task.index);
    }
    job->ops->run (job, task.index);
    if (atomic_fetch_sub (&job->pending, 1) == 1)
        s_post (notify, job);
}

static void
s_for_unlink (s_for_t *ranges)
{
    if (atomic_fetch_sub (&ranges->refs, 1) == 1) {
        pthread_mutex_destroy (&ranges->lock);
        pthread_cond_destroy (&ranges->done_cond);
        free (ranges);
    }
}

//  Take ranges until none is left, run them, and count them done.
static void
s_for_work (s_for_t *ranges)
{
    size_t ran = 0;
    while (true) {
        size_t k = atomic_fetch_add (&ranges->next, 1);
        if (k >= ranges->ranges)
            break;
        size_t begin = k * ranges->grain;
        size_t end = ranges->n - begin > ranges->grain ? begin + ranges->grain : ranges->n;
        ranges->fn (ranges->arg, begin, end);
        ran++;
    }
    if (ran == 0)
        return;
    pthread_mutex_lock (&ranges->lock);
    ranges->done += ran;
    if (ranges->done == ranges->ranges)
        pthread_cond_signal (&ranges->done_cond);
    pthread_mutex_unlock (&ranges->lock);
}

//  A pool thread's help with a ps_pool_for: it may come after the caller
//  has returned, finding nothing left to take.
static void
s_for_help (s_for_t *ranges)
{
    s_for_work (ranges);
    s_for_unlink (ranges);
}

static void *
s_thread (void *arg)
{
    ps_pool_t *self = arg;
    void *notify = zmq_socket (self->ctx, ZMQ_PUSH);
    if (!notify || zmq_connect (notify, self->done_endpoint) != 0) {
        ps_error ("pool thread cannot connect its notify socket: %s", zmq_strerror (errno));
        abort ();
    }
    pthread_mutex_lock (&self->lock);
    while (true) {
        while (self->queue_len == 0 && !self->stopping)
            pthread_cond_wait (&self->wake, &self->lock);
        if (self->queue_len == 0)
            break;
        s_task_t task = self->queue [self->queue_head];
        self->queue_head = (self->queue_head + 1) % self->queue_cap;
        self->queue_len--;
        pthread_mutex_unlock (&self->lock);
        if (task.ranges)
            s_for_help (task.ranges);
        else
            s_run (self, task, notify);
        pthread_mutex_lock (&self->lock);
    }
    pthread_mutex_unlock (&self->lock);
    zmq_close (notify);
    return NULL;
}

//  Make room in the queue for more tasks. Called with the lock held.
static void
s_queue_room (ps_pool_t *self, size_t more)
{
    if (self->queue_len + more <= self->queue_cap)
        return;
    size_t cap = self->queue_cap * 2;
    while (cap < self->queue_len + more)
        cap *= 2;
    s_task_t *queue = malloc (cap * sizeof *queue);
    if (!queue)
        abort ();
    for (size_t i = 0; i < self->queue_len; i++)
        queue [i] = self->queue [(self->queue_head + i) % self->queue_cap];
    free (self->queue);
    self->queue = queue;
    self->queue_head = 0;
    self->queue_cap = cap;
}

//  Queue a task per index of job, scans or runs, except task skip (pass
//  job->ntasks to skip none). Called by the serving thread and by pool
//  threads.
static void
s_enqueue (ps_pool_t *self, ps_pool_job_t *job, bool scan, size_t skip)
{
    size_t count = job->ntasks - (skip < job->ntasks);
    if (count == 0)
        return;
    pthread_mutex_lock (&self->lock);
    s_queue_room (self, job->ntasks);
    for (size_t i = 0; i < job->ntasks; i++) {
        if (i == skip)
            continue;
        size_t slot = (self->queue_head + self->queue_len++) % self->queue_cap;
        self->queue [slot] = (s_task_t) { job, i, scan, NULL };
    }
    //  One task needs one thread: waking them all would only have the
    //  others find the queue empty again.
    if (count == 1)
        pthread_cond_signal (&self->wake);
    else
        pthread_cond_broadcast (&self->wake);
    pthread_mutex_unlock (&self->lock);
}

ps_pool_t *
ps_pool_new (int nthreads, ps_error_t *err)
{
    assert (nthreads >= 0 && nthreads <= 256);
    ps_pool_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->queue_cap = 64;
    self->queue = malloc (self->queue_cap * sizeof (s_task_t));
    if (!self->queue || pthread_mutex_init (&self->lock, NULL) != 0
    ||  pthread_cond_init (&self->wake, NULL) != 0)
        abort ();
    snprintf (self->done_endpoint, sizeof self->done_endpoint, "inproc://ps-pool-done-%p",
              (void *) self);
    self->ctx = zmq_ctx_new ();
    if (!self->ctx) {
        ps_error_set (err, PS_EIO, "zmq_ctx_new: %s", zmq_strerror (errno));
        goto fail;
    }
    self->done = zmq_socket (self->ctx, ZMQ_PULL);
    if (!self->done || zmq_bind (self->done, self->done_endpoint) != 0) {
        ps_error_set (err, PS_EIO, "creating the pool's socket: %s", zmq_strerror (errno));
        goto fail;
    }
    self->threads = calloc ((size_t) nthreads + 1, sizeof (pthread_t));
    if (!self->threads)
        abort ();
    for (int i = 0; i < nthreads; i++) {
        int rc = pthread_create (&self->threads [i], NULL, s_thread, self);
        if (rc != 0) {
            ps_error_set (err, PS_EIO, "pthread_create: %s", strerror (rc));
            goto fail;
        }
        self->nthreads++;
    }
    return self;
fail:
    ps_pool_destroy (&self);
    return NULL;
}

void
ps_pool_destroy (ps_pool_t **self_p)
{
    assert (self_p);
    ps_pool_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock (&self->lock);
    self->stopping = true;
    pthread_cond_broadcast (&self->wake);
    pthread_mutex_unlock (&self->lock);
    for (int i = 0; i < self->nthreads; i++)
        pthread_join (self->threads [i], NULL);
    free (self->threads);
    if (self->done)
        zmq_close (self->done);
    if (self->ctx)
        zmq_ctx_term (self->ctx);
    free (self->queue);
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->wake);
    free (self);
    *self_p = NULL;
}

void
ps_pool_submit (ps_pool_t *self, ps_pool_job_t *job, bool scan)
{
    assert (self && job->ops);
    self->busy++;
    atomic_init (&job->scanning, job->ntasks);
    atomic_init (&job->pending, job->ntasks);
    s_enqueue (self, job, scan, job->ntasks);
}

void *
ps_pool_done_socket (ps_pool_t *self)
{
    assert (self);
    return self->done;
}

int
ps_pool_collect (ps_pool_t *self, ps_pool_job_t **job)
{
    assert (self);
    int size = zmq_recv (self->done, job, sizeof *job, ZMQ_DONTWAIT);
    if (size < 0)
        return errno == EAGAIN ? 0 : PS_EIO;
    assert (size == sizeof *job);
    self->busy--;
    return 1;
}

size_t
ps_pool_busy (ps_pool_t *self)
{
    assert (self);
    return self->busy;
}

int
ps_pool_size (ps_pool_t *self)
{
    assert (self);
    return self->nthreads;
}

void
ps_pool_for (void *pool, size_t n, size_t grain, ps_opt_range_fn *fn, void *arg)
{
    ps_pool_t *self = pool;
    assert (self && grain > 0);
    size_t count = n / grain + (n % grain != 0);
    size_t helpers = count > 1 ? count - 1 : 0;
    helpers = helpers < (size_t) self->nthreads ? helpers : (size_t) self->nthreads;
    if (helpers == 0) {
        if (n > 0)
            fn (arg, 0, n);
        return;
    }
    s_for_t *ranges = calloc (1, sizeof *ranges);
    if (!ranges || pthread_mutex_init (&ranges->lock, NULL) != 0
    ||  pthread_cond_init (&ranges->done_cond, NULL) != 0)
        abort ();
    ranges->fn = fn;
    ranges->arg = arg;
    ranges->n = n;
    ranges->grain = grain;
    ranges->ranges = count;
    atomic_init (&ranges->next, 0);
    atomic_init (&ranges->refs, (int) helpers + 1);
    //  The helpers go to the front of the queue: the caller holds a
    //  partition's lock, which every other task on that partition awaits.
    pthread_mutex_lock (&self->lock);
    s_queue_room (self, helpers);
    for (size_t i = 0; i < helpers; i++) {
        self->queue_head = (self->queue_head + self->queue_cap - 1) % self->queue_cap;
        self->queue_len++;
        self->queue [self->queue_head] = (s_task_t) { NULL, 0, false, ranges };
    }
    if (helpers == 1)
        pthread_cond_signal (&self->wake);
    else
        pthread_cond_broadcast (&self->wake);
    pthread_mutex_unlock (&self->lock);
    s_for_work (ranges);
    //  Every range is taken now; the ones still running finish without
    //  waiting on anything.
    pthread_mutex_lock (&ranges->lock);
    while (ranges->done < ranges->ranges)
        pthread_cond_wait (&ranges->done_cond, &ranges->lock);
    pthread_mutex_unlock (&ranges->lock);
    s_for_unlink (ranges);
}

ps_opt_runner_t
ps_pool_runner (ps_pool_t *self)
{
    assert (self);
    return (ps_opt_runner_t) { ps_pool_for, self };
}
