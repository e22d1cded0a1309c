//  The ring tests' fixture (tests/test_ring_*.c): a cluster of child
//  processes, each a member of a ring (worker/ps_ring.h) on real sockets,
//  that the parent orders through pipes; the members' inputs, generated
//  from (seed, rank); and the check of their results, bitwise between
//  members and against a float64 sum of the inputs within the rounding
//  bound n * FLT_EPSILON * sum |x| (exactly for integer-valued inputs).
//
//  Every child binds its own ring on loopback TCP (a wildcard port) or
//  IPC, sends its endpoint up a pipe, and forms the ring from the member
//  list the parent sends back; it then runs a scenario of its program,
//  named on its command line (harness_ring_start). A child runs its
//  program anew (exec) rather than going on from the fork: CZMQ's
//  authenticator, which a secured member needs, lives in a process-wide
//  ZeroMQ context that a forked child would inherit without its threads
//  once the parent has made one. The rings are secured as a cluster's
//  are: child i is worker:i (the harness's keys) and the parent's "form"
//  order carries each member's task.
//
//  Children never call cmocka: they report failures with distinct exit
//  codes (harness_ring_exit_name), which the parent asserts on. A
//  teardown kills and reaps whatever children a failed test left.

#ifndef HARNESS_RING_H_INCLUDED
#define HARNESS_RING_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_host.h"
#include "ps_ring.h"

#define HARNESS_RING_MAX_CHILDREN      6
#define HARNESS_RING_LINE_MAX          4096

//  How long the parent waits for a child's line or exit.
#define HARNESS_RING_WAIT_MS           30000

//  The short no-progress timeout of the abort tests, and how much later
//  than a deadline a collective or a watch may act on a loaded machine (or
//  under ASan), where a process may go unscheduled for a second or more:
//  still far below the ring's default timeout of 10 s, and the 20 s of the
//  rings a watch must abort early, so that waiting for those fails. The
//  survivors' ring after an abort keeps the timeout, and its members learn
//  to form it one after another from the parent, so the timeout must also
//  cover that skew on a loaded machine: at 300 ms a member once gave up
//  waiting for a peer that had not yet been told to form.
#define HARNESS_RING_TIMEOUT_MS        2000
#define HARNESS_RING_SLACK_MS          5000

//  The large size of the all-reduce cases.
#define HARNESS_RING_LARGE             1000003

//  Exit codes of the children.
#define HARNESS_RING_EXIT_PIPE         20
#define HARNESS_RING_EXIT_RING_NEW     21
#define HARNESS_RING_EXIT_FORM         22
#define HARNESS_RING_EXIT_ALLREDUCE    23
#define HARNESS_RING_EXIT_BROADCAST    24
#define HARNESS_RING_EXIT_BROADCAST_DATA 25
#define HARNESS_RING_EXIT_WRONG_CODE   26
#define HARNESS_RING_EXIT_TOO_SLOW     27
#define HARNESS_RING_EXIT_TOO_FAST     28
#define HARNESS_RING_EXIT_FILE         29
#define HARNESS_RING_EXIT_NO_FAILURE   30
#define HARNESS_RING_EXIT_MEMORY       31
#define HARNESS_RING_EXIT_EXEC         32

//  What an exit code of a child means.
const char *harness_ring_exit_name (int code);

//  The test's directory for result files and IPC endpoints.
const char *harness_ring_dir (void);

typedef struct {
    size_t count;
    uint64_t seed;
    bool integers;              //  small integers: every sum is exact
} harness_ring_case_t;

//  Member rank's input of a case: uniform in [-1, 1) times a power of two
//  in [2^-4, 2^4] (so that sums round), or integers in [-1000, 1000].
void harness_ring_fill (float *data, size_t count, uint64_t seed, int rank, bool integers);

//  The bytes a broadcast root sends.
void harness_ring_fill_bytes (unsigned char *data, size_t bytes, uint64_t seed, int root);

typedef struct {
    //  "tcp" or "ipc"; or "host": tcp, the members given as endpoint sets
    //  (ps_host.h) so that they reach each other over ipc://; or "hosts":
    //  the same, each child with a host identity of its own (PS_HOST_ID),
    //  so that they use tcp; or "mixed": "host" with child 0 under
    //  PS_SAME_HOST=ipc, so that no member shares memory.
    const char *transport;
    size_t chunk_bytes;         //  0: the ring's default
    int timeout_ms;             //  0: the ring's default
    bool insecure;              //  no CURVE: no identity, no member tasks
    size_t shm_bytes;           //  the shared-memory slot of a "host" ring (0: the default)
} harness_ring_net_t;

typedef struct {
    int index;                  //  among the cluster's children; task worker:index
    int in, out;                //  pipes from and to the parent
    bool secured;
    ps_ring_t *ring;
} harness_ring_child_t;

//  What a child does once its ring is bound; arg is the scenario's own
//  text, from the parent.
typedef int (harness_ring_scenario_fn) (harness_ring_child_t *child, const char *arg);

//  A scenario a child can run, by name.
typedef struct {
    const char *name;
    harness_ring_scenario_fn *fn;
} harness_ring_scenario_t;

//  A child's line on stderr, naming the program, the child and its pid.
void harness_ring_child_say (const harness_ring_child_t *child, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

//  Wait for the parent's next order: "form ID RANK N ENDPOINT... TASK..."
//  forms the ring (the tasks are the members' worker task indices);
//  "leave" makes the child exit. Returns 0 when formed, 1 for leave, or an
//  exit code.
int harness_ring_child_form (harness_ring_child_t *child);

//  Wait for the parent to say `word`. Returns 0 or an exit code.
int harness_ring_child_expect (harness_ring_child_t *child, const char *word);

//  Run one all-reduce case as the current rank and write the result to
//  <dir>/<tag>-<case>-<child>.f32. Returns 0 or an exit code.
int harness_ring_child_case (harness_ring_child_t *child, const char *tag, int k,
                             const harness_ring_case_t *c);

//  Send the ring's counters up as "stats COLLECTIVES STALE MALFORMED SENT
//  RECEIVED SHARED". Returns 0 or an exit code.
int harness_ring_child_stats (harness_ring_child_t *child);

typedef struct {
    int n;
    pid_t pid [HARNESS_RING_MAX_CHILDREN];
    int to [HARNESS_RING_MAX_CHILDREN];
    int from [HARNESS_RING_MAX_CHILDREN];
    bool reaped [HARNESS_RING_MAX_CHILDREN];
    char endpoint [HARNESS_RING_MAX_CHILDREN][PS_HOST_SET_MAX];
} harness_ring_cluster_t;

//  Start n children running the scenario named scenario with its text arg,
//  and read their endpoints.
void harness_ring_cluster_start (harness_ring_cluster_t *cluster, int n,
                                 const harness_ring_net_t *net, const char *scenario,
                                 const char *arg);

//  Reap child i and return its exit code (128 + signal when killed), or
//  -1 when it had to be killed for not exiting in time.
int harness_ring_cluster_reap (harness_ring_cluster_t *cluster, int i);

//  Read child i's next line, which must start with prefix; returns what
//  follows the prefix (in line). A child that died instead is reported
//  with its exit code.
const char *harness_ring_cluster_expect (harness_ring_cluster_t *cluster, int i,
                                         const char *prefix, char *line, size_t size);

//  Say word to child i.
void harness_ring_cluster_say (harness_ring_cluster_t *cluster, int i, const char *word);

//  Form ring ring_id of the children order [0 .. n): child order [p] is
//  member p, of task worker:order [p].
void harness_ring_cluster_form (harness_ring_cluster_t *cluster, uint64_t ring_id,
                                const int *order, int n);

//  Form the ring of all children in index order.
void harness_ring_cluster_form_all (harness_ring_cluster_t *cluster, uint64_t ring_id);

//  Wait for every child not reaped yet and assert it exited with 0.
void harness_ring_cluster_finish (harness_ring_cluster_t *cluster);

//  A cmocka teardown: kill and reap whatever a failed test left running.
int harness_ring_teardown (void **state);

//  Check case k of the children in members (n of them, each in its
//  ring's rank order): bitwise the same everywhere, and the sum of the
//  n ranks' inputs within rounding.
void harness_ring_check_case (const char *tag, int k, const harness_ring_case_t *c,
                              const int *members, int n);

//  The cmocka group setup and teardown of a ring test program: the test's
//  directory, and the keys its children are workers of.
int harness_ring_setup_group (void **state);
int harness_ring_teardown_group (void **state);

//  Start a ring test program called program: tune the heap as ps-worker
//  does (so messages are allocated as the worker's are) and start the log.
//  When argv makes this process a child of harness_ring_cluster_start,
//  run its scenario (one of count in scenarios), set *status to the
//  child's exit status and return true; otherwise return false and let
//  the program run its tests.
bool harness_ring_start (const char *program, int argc, char *argv [],
                         const harness_ring_scenario_t *scenarios, size_t count, int *status);

#endif
