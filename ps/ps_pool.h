//  The apply pool of a ps-server: threads that run the tasks of jobs, so
//  that one request's partitions are updated in parallel.
//
//  A job is a request split into tasks, one per partition. It may have a
//  scan phase: every task's scan runs first, and only when the last scan
//  is done does the job say whether its tasks run (a push whose gradients
//  are all finite) or it is finished at once (one holding a NaN). A job's
//  ps_pool_job_t is the first member of the caller's own job struct, which
//  the ops receive back. When a job's last task is done, the pool posts it
//  to the serving thread over an inproc socket (ps_pool_collect): ZeroMQ
//  sockets are used from one thread only, so replies go out from there.

#ifndef PS_POOL_H_INCLUDED
#define PS_POOL_H_INCLUDED

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "ps_error.h"
#include "ps_optimizer.h"

typedef struct _ps_pool_t ps_pool_t;
typedef struct ps_pool_job_t ps_pool_job_t;

//  How the pool runs a job's tasks; called on pool threads.
typedef struct {
    void (*scan) (ps_pool_job_t *job, size_t index);
    //  After the last scan: true to run the tasks, false to finish now.
    bool (*scanned) (ps_pool_job_t *job);
    void (*run) (ps_pool_job_t *job, size_t index);
} ps_pool_ops_t;

struct ps_pool_job_t {
    const ps_pool_ops_t *ops;
    size_t ntasks;
    atomic_size_t scanning;     //  scans still to run
    atomic_size_t pending;      //  tasks still to run
};

//  A pool of nthreads (0..256) threads; with none, the caller runs every
//  job itself. Returns NULL and sets err when a thread or a socket cannot
//  be made.
ps_pool_t *ps_pool_new (int nthreads, ps_error_t *err);

//  Stop the threads once the queued tasks are done, and destroy the pool.
void ps_pool_destroy (ps_pool_t **self_p);

//  Queue job's tasks, its scans first when scan is true. The job belongs to
//  the pool until ps_pool_collect returns it.
void ps_pool_submit (ps_pool_t *self, ps_pool_job_t *job, bool scan);

//  The socket to poll for finished jobs.
void *ps_pool_done_socket (ps_pool_t *self);

//  Take one finished job without waiting: returns 1 and sets *job, 0 when
//  none is finished, or PS_EIO when the socket fails (errno kept).
int ps_pool_collect (ps_pool_t *self, ps_pool_job_t **job);

//  Jobs submitted and not collected yet.
size_t ps_pool_busy (ps_pool_t *self);

//  The number of threads.
int ps_pool_size (ps_pool_t *self);

//  Run fn (arg, begin, end) over [0, n) in ranges of grain elements (the
//  last one shorter) on the calling thread and the pool's threads, and
//  return once every range is done: a ps_opt_runner_t's run, for one
//  partition's update applied in parallel under its lock. Any thread may
//  call it, a pool thread too. The pool's threads join at the front of the
//  queue; each thread, the caller included, takes the next range not taken
//  yet until none is left, and the caller then waits only for ranges being
//  run, never for a thread to come free, so it cannot wait on itself or on
//  another caller. fn must not block on anything the pool runs.
void ps_pool_for (void *self, size_t n, size_t grain, ps_opt_range_fn *fn, void *arg);

//  A runner that applies on self's threads (ps_pool_for).
ps_opt_runner_t ps_pool_runner (ps_pool_t *self);

#endif
