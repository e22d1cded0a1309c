//  Test harness for integration tests: starts real ps-server processes on
//  127.0.0.1 with a free port, learns the bound endpoint from the server's
//  --endpoint-file, and stops them with a signal of the test's choosing.
//  The server binary comes from the PS_SERVER environment variable, which
//  meson sets.
//  For tests of whole programs it also starts any program with its own
//  environment and log, waits for processes, and reads the JSON-lines
//  metrics files they write.
//  And it splits a test program into groups of cases that meson runs as
//  tests of their own, so that a case that cannot run here is counted as
//  skipped, never as passed.

#ifndef PS_HARNESS_H_INCLUDED
#define PS_HARNESS_H_INCLUDED

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

#include "ps_client.h"
#include "ps_curve.h"

typedef struct {
    pid_t pid;
    char endpoint [256];
    char endpoint_file [256];
    char log [256];             //  the server's stderr, for failed tests
} harness_server_t;

//  Start a server as task ps:index, secured by the harness's keys (see
//  harness_keys) unless args hold --insecure, with extra arguments
//  (NULL-terminated list, may be NULL). Returns 0 once it is serving, -1
//  when it did not start within 10 s (its log is printed).
int harness_server_start (harness_server_t *server, int index, const char *const *args);

//  harness_server_start, with the server's file-descriptor limit
//  (RLIMIT_NOFILE, soft and hard) set to nofile.
int harness_server_start_nofile (harness_server_t *server, int index, const char *const *args,
                                 long nofile);

//  Send sig and wait for exit. Returns the exit status (0..255), 128+signal
//  when killed by a signal, or -1 when it did not exit within 10 s.
int harness_server_stop (harness_server_t *server, int sig);

//  True while the server process has not exited.
bool harness_server_alive (harness_server_t *server);

//  A field of /proc/PID/status in KiB (VmRSS, VmHWM), or -1.
long harness_status_kib (pid_t pid, const char *field);

//  The key directory of this test process (ps_curve.h), made on first use
//  and removed when the process exits: chief:0, ps:0..7, worker:0..7 and
//  evaluator:0. Exits the process, saying why, when it cannot be made.
//  A process whose environment names a directory in HARNESS_KEYS_ENV uses
//  that one instead, and leaves it in place: that is how a test hands its
//  keys to a program it runs anew (test_ring's ring members).
const char *harness_keys (void);
#define HARNESS_KEYS_ENV "PS_HARNESS_KEYS"

//  The identity of task in harness_keys (), for clients and sockets the
//  test makes itself. The harness keeps it until the process exits (also
//  when a test fails half-way), so the caller must not destroy it. Exits
//  on failure.
ps_curve_t *harness_curve (const char *task);

//  What a test program that makes sockets in ps_curve_context () returns
//  from main, given the number of cmocka tests that failed: 0 when none
//  did. When some did, the process ends here at once, after removing the
//  harness's keys: a failed test may have left such sockets open, and
//  CZMQ's exit handler, which terminates that context, would wait for
//  them forever instead of reporting the failure.
int harness_finish (int failures);

//  A ps-server takes control requests (create, set_optimizer, fence,
//  snapshot, restore, shutdown) only from chief:0 and pushes only from
//  workers, so a test that does both talks to its servers through two
//  clients that declare the same variables: control, as chief:0, and
//  data, as worker:0.
typedef struct {
    ps_client_t *control;
    ps_client_t *data;
} harness_clients_t;

//  Connect both clients to nservers servers (server i is task ps:i) with
//  the harness's identities, or unsecured when insecure is true (servers
//  started with --insecure). Returns 0, or a negative code with err set
//  and nothing left open.
int harness_clients_open (harness_clients_t *clients, const char *const *endpoints,
                          int nservers, int timeout_ms, bool insecure, ps_error_t *err);

//  Declare a variable on both clients (see ps_client_add_variable).
//  Returns its index, or a negative code with err set.
int harness_clients_add_variable (harness_clients_t *clients, const char *name,
                                  const ps_shape_t *shape, const ps_init_t *init, int nparts,
                                  const int64_t *splits, const int *servers, ps_error_t *err);

//  Destroy both clients (harmless when they are closed already).
void harness_clients_close (harness_clients_t *clients);

//  The median of n >= 1 samples, which it sorts in place (the benchmarks'
//  figure of a repeated timing).
double harness_median (double *samples, int n);

//  The CPU time (user + system, in clock ticks) process pid has used, from
//  /proc/PID/stat, or -1.
long harness_cpu_ticks (pid_t pid);

//  The file descriptors process pid has open, from /proc/PID/fd, or -1.
long harness_open_fds (pid_t pid);

//  The CPU time process pid uses while a busy loop beside it (a child
//  process) gets spin_ticks of CPU: the yardstick for a process that should
//  sleep, under whatever load the machine carries. A process that spins
//  gets about as much as the loop, one that sleeps until it has work none;
//  on a loaded machine the window stretches until the loop has had its
//  share. The window opens once pid has used no CPU for 1 s (or after 10
//  s), so that work it had left (a heap release, connections to deal with)
//  is done whatever the load. Sets *used and *spun (the loop's, at least
//  spin_ticks), in ticks, and *wall_ms (the window's length) and returns 0,
//  or -1 when a CPU time cannot be read or the loop did not get its share
//  within 60 s.
int harness_cpu_beside_spinner (pid_t pid, long spin_ticks, long *used, long *spun,
                                double *wall_ms);

//  A fresh directory under /tmp; the caller removes it with harness_rmtree.
void harness_tmpdir (char *buf, size_t len);
void harness_rmtree (const char *dir);

//  ---------------------------------------------------------------------
//  Processes and files, for tests that run whole programs (the
//  coordinator, ps-worker) and watch what they write.

//  Start argv [0] with argv (NULL-terminated). env is a NULL-terminated
//  list of "NAME=value" set in the child's environment, or "NAME" alone
//  to remove NAME (may be NULL). The child's stdout and stderr go to log
//  (truncated first; NULL: inherited). Returns the pid, or -1.
pid_t harness_spawn (const char *const *argv, const char *const *env, const char *log);

//  Wait up to timeout_ms for the child pid to exit. Returns its exit
//  status (0..255), 128 + signal when a signal killed it, or -1 when it
//  is still running at the deadline (it is left running).
int harness_wait (pid_t pid, int timeout_ms);

//  harness_wait, but a child still running at the deadline is killed with
//  SIGKILL and reaped, and -1 is returned (as it is, without a signal, for
//  a pid that is not a child of this process or was reaped already).
int harness_wait_or_kill (pid_t pid, int timeout_ms);

//  True while the child pid has not exited (it is not reaped here).
bool harness_running (pid_t pid);

//  True when no process pid is running: none exists, or it is a zombie
//  (reaped here when it is a child of this process, which it becomes for
//  orphans when this process is a child subreaper).
bool harness_pid_gone (pid_t pid);

//  Wait up to timeout_ms until every one of the n pids is gone. Returns
//  how many are still running.
int harness_wait_gone (const pid_t *pids, size_t n, int timeout_ms);

//  A TCP port on 127.0.0.1 that is free now, or -1.
int harness_free_port (void);

//  Sleep ms milliseconds, all of them, signals or not.
void harness_sleep_ms (int ms);

//  Print a file to stderr under a header line, for failed tests.
void harness_print_log (const char *path);

//  True when the file holds text.
bool harness_file_contains (const char *path, const char *text);

//  Write text to a new file (truncating). Returns 0 or -1.
int harness_write_file (const char *path, const char *text);

//  Lines over a pipe, between a test (or benchmark) and the processes it
//  forks. Write one line (a newline is added; at most 4095 bytes) in full.
//  Returns 0 or -1.
int harness_write_line (int fd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

//  Read one line (without its newline, cut to fit size) within
//  timeout_ms, a byte at a time so that nothing of the next line is taken.
//  Returns 0, or -1 at end of file, on an error or at the deadline.
int harness_read_line (int fd, char *line, size_t size, int timeout_ms);

//  ---------------------------------------------------------------------
//  JSON-lines files (the coordinator's and ps-worker's --metrics)

//  Every complete line of path (one ending in a newline: a line still
//  being written is left for the next read), parsed with jansson, as a
//  new JSON array. An empty array when the file does not exist yet; NULL
//  (after printing the line) when a complete line is not JSON.
json_t *harness_jsonl_read (const char *path);

typedef bool (harness_match_fn) (const json_t *row, void *arg);

//  Poll path every 10 ms until a line matches (match (row, arg) is true)
//  and return a new reference to it. Gives up and returns NULL after
//  timeout_ms, or once process pid (when > 0, a child) has exited and the
//  file holds no match.
json_t *harness_jsonl_wait (const char *path, harness_match_fn *match, void *arg, pid_t pid,
                            int timeout_ms);

//  The row's "event" is event.
bool harness_event_is (const json_t *row, const char *event);

//  Run a benchmark's peer, a program that times the same work with another
//  library (a PyTorch script) and writes its figures as JSON lines to out:
//  argv as harness_spawn, its stdout and stderr to log, killed after
//  timeout_ms. Returns its lines (harness_jsonl_read), a new array, when
//  it exited 0 and wrote at least one; otherwise NULL, with why it gave
//  none in why: "ARGV0 ARGV1 exited STATUS (its log's last non-blank
//  line)", STATUS -1 when it could not start or ran out of time. Sets
//  *status (when not NULL) to that status, 0 when it gave lines.
json_t *harness_peer_run (const char *const *argv, const char *out, const char *log,
                          int timeout_ms, char *why, size_t why_size, int *status);

//  ---------------------------------------------------------------------
//  Groups of cases that meson runs as tests of their own
//
//  cmocka reports a case that calls skip () and exits 0, so meson would
//  count a program whose cases on the real data set were skipped as
//  passed. Such cases (and a long run that sanitizer builds leave out)
//  form a group of their own instead: the same program, given the group's
//  name as its argument, is another meson test (test_idx_real, for
//  test_idx real). Where the group cannot run, that test prints one line
//  "SKIP: <what>: <why>" and exits 77, which meson counts as skipped and
//  the test command prints.

//  True when the program's argument is group, false without an argument
//  (the base cases, which run everywhere). Any other argument ends the
//  process with exit status 2, naming it and the group expected.
bool harness_group (int argc, char **argv, const char *group);

//  Print "SKIP: " and the reason on stdout, and end the process with exit
//  status 77 (meson's skip).
void harness_skip (const char *fmt, ...)
    __attribute__ ((format (printf, 1, 2), noreturn));

//  The directory of the real Fashion-MNIST files: $PS_DATA_DIR, which
//  meson sets, or else PS_DATASET_DEFAULT_DIR.
const char *harness_data_dir (void);

//  A skip (harness_skip), naming the file and why, unless the four
//  gzipped files of the real data set are readable in harness_data_dir ().
void harness_need_data (void);

#endif
