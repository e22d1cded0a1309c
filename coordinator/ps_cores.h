//  How a local cluster shares the machine's cores among its processes, so
//  that it does not oversubscribe them by default.
//
//  The cores are those this process may use (ps_cpus.h). When the mode
//  allows one, an evaluator task evaluates beside training rather than on a
//  worker, whose training would stop for each: where every worker and
//  server can keep a core and 2 remain, it takes those 2 (2 threads: as
//  fast as standalone's evaluation); where they cannot, it computes in the
//  cores' idle time (ps-worker --idle-priority, SCHED_IDLE) on up to 2
//  threads, which count against no one's cores: it runs only while training
//  leaves a core idle (waiting on its push-pulls), and the final evaluation
//  goes to a worker (ps_coord.h, idle_evaluator). Of the rest, a quarter
//  goes to the ps-servers' apply pools, split evenly (0 threads each,
//  applying on the serving thread, when the quarter is less than one core a
//  server, or when the workers would not keep a core each), and the rest to
//  the workers' compute threads, split evenly, at least 1 each. Every
//  process keeps ZeroMQ's one I/O thread (a mirrored ring's transport has
//  its own 2). Workers compute about 70% of a step and the servers apply in
//  the rest, so the workers get most cores; explicit thread options win
//  over the split.

#ifndef PS_CORES_H_INCLUDED
#define PS_CORES_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int cores;                  //  what was split
    int worker_threads;         //  compute threads of each worker
    int server_threads;         //  apply-pool threads of each ps-server (0: none)
    int io_threads;             //  ZeroMQ I/O threads of every process
    bool evaluator;             //  whether an evaluator task evaluates
    bool evaluator_idle;        //  in the cores' idle time, on no cores of its own
    int evaluator_threads;      //  its compute threads (0 without one)
} ps_cores_split_t;

//  Split cores among nworkers workers, nservers servers and, when
//  may_evaluate (the mode lets an evaluator evaluate), an evaluator: on
//  cores of its own where they allow, else in their idle time.
void ps_cores_split (int cores, int nworkers, int nservers, bool may_evaluate,
                     ps_cores_split_t *split);

#endif
