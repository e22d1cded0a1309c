//  Sharing the cores among a local cluster's processes (see ps_cores.h).

#include "ps_cores.h"

//  An evaluator's threads: standalone evaluates the 10k Fashion-MNIST
//  test images in about 0.4 s on 2.
#define S_EVALUATOR_THREADS 2

void
ps_cores_split (int cores, int nworkers, int nservers, bool may_evaluate,
                ps_cores_split_t *split)
{
    if (cores < 1)
        cores = 1;
    if (nworkers < 1)
        nworkers = 1;
    if (nservers < 0)
        nservers = 0;
    int total = cores;
    bool evaluator = may_evaluate && cores >= nworkers + nservers + S_EVALUATOR_THREADS;
    bool idle = may_evaluate && !evaluator;
    if (evaluator)
        cores -= S_EVALUATOR_THREADS;
    int server_threads = nservers > 0 ? cores / 4 / nservers : 0;
    //  Every worker keeps a core of its own before a server has a pool.
    while (server_threads > 0 && cores - nservers * server_threads < nworkers)
        server_threads--;
    int worker_threads = (cores - nservers * server_threads) / nworkers;
    *split = (ps_cores_split_t) {
        .cores = total,
        .worker_threads = worker_threads > 0 ? worker_threads : 1,
        .server_threads = server_threads,
        .io_threads = 1,
        .evaluator = evaluator || idle,
        .evaluator_idle = idle,
        .evaluator_threads = evaluator ? S_EVALUATOR_THREADS
                           : idle ? (total < S_EVALUATOR_THREADS ? total : S_EVALUATOR_THREADS)
                           : 0,
    };
}
