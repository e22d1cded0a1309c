//  The cluster tests' library: runs of the coordinator (a local cluster,
//  or one started by hand) as real processes on 127.0.0.1, training the
//  cnn on subsets of the real Fashion-MNIST; waiting for and reading the
//  events of its metrics file; and the checks every completed run must
//  pass. The tests of test_cluster*.c are built from these, one program
//  per concept (see test_cluster.c's opening comment for the list).
//
//  A completed run ends with exit status 0 and a "done" record in which
//  every step was trained and every partition of every variable was
//  updated exactly once per step (a server's ledger applies a step id once
//  and counts a second push of it as a duplicate), with the record's
//  counters agreeing with the events before it. In sync mode a partition
//  applies a round's steps as one update, so "exactly once per step" reads
//  there as: every step in every partition's ledger once, and the same
//  number of updates everywhere, one per round.
//
//  PS_TEST_SCALE (default 1) scales the data subsets, for slow builds
//  (the sanitizer build runs the cluster tests at 0.25); PS_TEST_FILTER (a
//  cmocka pattern) runs only the cases it matches.

#ifndef PS_HARNESS_CLUSTER_H_INCLUDED
#define PS_HARNESS_CLUSTER_H_INCLUDED

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

struct CMUnitTest;

#define CLUSTER_BATCH         64
#define CLUSTER_MAX_ARGS      64
#define CLUSTER_MAX_RUNS      8
#define CLUSTER_MAX_PIDS      32
//  A whole run, however slow the build; a hang fails the test instead.
#define CLUSTER_RUN_MS        240000
//  Waiting for an event that follows a failure at once.
#define CLUSTER_EVENT_MS      20000
//  The heartbeat settings of the failure cases. A case whose victim must
//  be found by its silence (SIGSTOP, a hung worker), or whose killed
//  server must fail the workers' calls to it quickly, judges silences
//  after CLUSTER_TIMEOUT_MS. A case that kills a worker or the
//  coordinator needs no silence judged (the supervisor reports the death
//  at once; PR_SET_PDEATHSIG ends the children), so it judges none that
//  a stall of a loaded machine could make: a live process declared
//  failed would add failures, registrations and duplicates to the counts
//  it checks. (A mirrored member's kill keeps the short one: the ring's
//  own timeout, which bounds a collective the dead member was in, is
//  twice the workers' client timeout, which is the heartbeat timeout.)
#define CLUSTER_HEARTBEAT_MS     100
#define CLUSTER_TIMEOUT_MS       1000
#define CLUSTER_KILL_TIMEOUT_MS  60000
//  The coordinator's heartbeat timeout when none is given.
#define CLUSTER_DEFAULT_TIMEOUT_MS 3000

//  One run of the coordinator: its arguments, its directory, and once it
//  has finished its exit status and the events of its metrics file.
typedef struct {
    const char *name;
    char dir [64];              //  everything of this run lives here
    char metrics [PATH_MAX];
    char log [PATH_MAX];        //  the coordinator's stdout and stderr
    char log_dir [PATH_MAX];    //  --log-dir: the local children's logs
    char job [PATH_MAX];
    const char *argv [CLUSTER_MAX_ARGS];
    int argc;
    char *owned [CLUSTER_MAX_ARGS];
    int nowned;
    pid_t pid;
    double start_ms;
    int status;
    double wall_s;
    json_t *rows;
} cluster_run_t;

//  What an event must be: its name, and when given its role, its task and
//  a minimum of one integer field.
typedef struct {
    const char *event;
    const char *role;           //  NULL: any
    int task;                   //  -1: any
    const char *key;            //  NULL: no minimum (booleans count as 0 or 1)
    json_int_t min;
} cluster_match_t;

//  The ssp cases' staleness bound, and the mode flags of ssp and sync runs.
#define CLUSTER_STALENESS     3
extern const char *const cluster_ssp_args [];
extern const char *const cluster_sync_args [];

//  The cnn's variables, every one of which a completed run updates.
#define CLUSTER_CNN_VARS      6
extern const char *const cluster_cnn_vars [CLUSTER_CNN_VARS];

//  A test program's main: reads PS_TEST_SCALE and PS_TEST_FILTER, makes
//  this process the reaper of orphans (the children of a coordinator
//  killed by a test), and runs the group's cases (each with
//  cluster_teardown). Returns the exit status.
int cluster_main (const char *name, const struct CMUnitTest *tests, size_t count);
#define CLUSTER_MAIN(name, tests) \
    cluster_main ((name), (tests), sizeof (tests) / sizeof ((tests) [0]))

//  PS_TEST_SCALE's factor.
double cluster_scale (void);

//  A process started by hand: the teardown kills it if the case fails;
//  untracked once the case has seen it exit.
void cluster_track_pid (pid_t pid);
void cluster_untrack_pid (pid_t pid);

//  A new run in a fresh directory, with a job file whose metrics window is
//  short enough to give several progress events in a run of seconds.
cluster_run_t *cluster_run_new (const char *name);

void cluster_run_destroy (cluster_run_t *run);

int cluster_teardown (void **state);

const char *cluster_arg (cluster_run_t *run, const char *fmt, ...);

void cluster_args (cluster_run_t *run, const char *const *args);

//  A new run called name whose command line is run's first argc arguments
//  (those it had before cluster_run_start added its own), with its own
//  metrics file and log directory in place of run's, and --resume: the
//  same cluster resumed from run's checkpoints.
cluster_run_t *cluster_run_resumed (const cluster_run_t *run, int argc, const char *name);

//  The data subsets, scaled by PS_TEST_SCALE: whole batches, never tiny.
int cluster_limit (int n);

int cluster_test_limit (int n);

uint64_t cluster_steps_per_epoch (int limit);

//  The job of a run: the cnn on limit training examples for epochs epochs.
void cluster_job_args (cluster_run_t *run, int limit, int test_limit, int epochs);

//  A local cluster of 2 servers and 2 workers.
void cluster_local_args (cluster_run_t *run, int limit, int test_limit, int epochs);

//  Heartbeats every CLUSTER_HEARTBEAT_MS, silences judged after
//  timeout_ms (CLUSTER_TIMEOUT_MS or CLUSTER_KILL_TIMEOUT_MS).
void cluster_heartbeat_args (cluster_run_t *run, int timeout_ms);

//  A run's mode flags (NULL: the default, async).
void cluster_mode_args (cluster_run_t *run, const char *const *mode);

//  Whether argv (NULL-terminated) holds arg.
bool cluster_has_arg (const char *const *argv, const char *arg);

//  A coordinator started by hand is secured by the test's keys (a local
//  one makes its own), unless the run asks for --insecure or other keys.
void cluster_run_start (cluster_run_t *run, const char *const *env);

bool cluster_running (cluster_run_t *run);

//  Wait for the coordinator to exit and read its metrics. The log is
//  printed when the exit status is not the one expected.
void cluster_run_finish (cluster_run_t *run, int expect_status);

void cluster_print_logs (cluster_run_t *run);

//  No log of the run (the coordinator's, its children's, and those of the
//  processes started by hand) holds a sanitizer's report: a child that a
//  sanitizer stopped would be restarted, and the run could still pass.
void cluster_check_logs (cluster_run_t *run);

json_int_t cluster_int (const json_t *obj, const char *key);

double cluster_real (const json_t *obj, const char *key);

const char *cluster_str (const json_t *obj, const char *key);

cluster_match_t cluster_ev (const char *event, const char *role, int task);

cluster_match_t cluster_ev_min (const char *event, const char *role, int task, const char *key, json_int_t min);

bool cluster_match (const json_t *row, void *arg);

//  The rows that match, in order.
size_t cluster_count_match (const json_t *rows, cluster_match_t match);

size_t cluster_count (const json_t *rows, const char *event);

//  The nth event (0-based; -1: the last) that matches, borrowed, or NULL.
json_t *cluster_find_match (const json_t *rows, cluster_match_t match, int nth);

json_t *cluster_find (const json_t *rows, const char *event, int nth);

//  The position of an event in the rows.
size_t cluster_index_of (const json_t *rows, const json_t *event);

//  Wait for an event of the running coordinator; fails the test, with
//  the logs, when none comes within timeout_ms or the coordinator ends.
json_t *cluster_wait_event (cluster_run_t *run, cluster_match_t match, int timeout_ms);

//  The pid of the newest process that registered as role:task.
pid_t cluster_task_pid (cluster_run_t *run, const char *role, int task);

//  Every process that registered is gone within timeout_ms.
void cluster_check_no_children (cluster_run_t *run, int timeout_ms, double *gone_ms);

//  The run completed: exit status 0, no "failed" event, one "done" record
//  with every one of total steps trained, every partition of every cnn
//  variable (each part of each variable exactly once over the servers)
//  updated exactly total times, and the record's counters agreeing with
//  the events: checkpoints, worker failures, recoveries, and the steps the
//  workers completed (total, plus the steps a recovery rewound, less the
//  steps a resumed checkpoint held). Returns the duplicate pushes summed
//  over the partitions.
uint64_t cluster_check_done (cluster_run_t *run, uint64_t total, int nservers);

//  The same checks for a model whose variables are vars [0 .. nvars), at
//  most CLUSTER_MAX_VARS (the dense variables of a CTR model; its tables
//  are the caller's to check).
#define CLUSTER_MAX_VARS      16
uint64_t cluster_check_done_vars (cluster_run_t *run, uint64_t total, int nservers,
                                  const char *const *vars, size_t nvars);

//  An ssp run's done record (mode: the run's mode flags; NULL, async, or
//  another mode than ssp: nothing to check) says how far ahead of the
//  slowest live worker each step started: never more than the bound, in a
//  histogram of 0 .. S that counts every step handed out (each of the
//  run's steps at least once).
void cluster_check_staleness (cluster_run_t *run, const char *const *mode);

//  A line for the log of the test run.
void cluster_summary (cluster_run_t *run, const char *fmt, ...);

//  The evaluation after epoch e + 1 (0-based e) is of the parameters once
//  that epoch's steps were all done: the steps done then, at least the
//  epoch's end (asynchronous workers may have finished a step or two of the
//  next epoch before the epoch's last). The last is after the last step.
void cluster_check_eval_step (const json_t *eval, int e, uint64_t per_epoch, uint64_t total);

//  n loopback ports, all different, that nobody listens on now.
void cluster_free_ports (int *ports, int n);

//  Start ps-server or ps-worker with args, env and a log in the run's
//  directory; the teardown kills it if the test fails.
pid_t cluster_start_task (cluster_run_t *run, const char *program, const char *const *args, const char *const *env, const char *name);

//  The newest ckpt-* directory in root (empty when none); count gets how
//  many there are. Names sort by step (a fixed number of digits).
void cluster_checkpoints (const char *root, char names [][64], int max, int *count);

//  The run completed in mirrored mode: every batch trained once (the
//  schedule's count, and each final member's replica ledger recording
//  every batch with none refused as a repeat), the replicas bitwise equal
//  at every evaluation, no server used, and the record's counters agreeing
//  with the events. Returns the done record.
json_t *cluster_check_mirrored (cluster_run_t *run, uint64_t total, int members);

//  Run the cnn on a local cluster on all of the data for 5 epochs in mode
//  (its flags), to its end.
cluster_run_t *cluster_full_run (const char *name, const char *const *mode);

#endif
