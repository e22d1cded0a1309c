//  Integration test harness; see harness.h.

#include "harness.h"

#include "ps_clock.h"
#include "ps_dataset.h"

#include <arpa/inet.h>
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void
harness_sleep_ms (int ms)
{
    struct timespec pause = { ms / 1000, (long) (ms % 1000) * 1000000L };
    while (nanosleep (&pause, &pause) != 0 && errno == EINTR)
        ;
}

static void
s_print_log (const char *path)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return;
    char line [512];
    fprintf (stderr, "---- %s\n", path);
    while (fgets (line, sizeof line, file))
        fputs (line, stderr);
    fclose (file);
}

//  Removes the key directory at exit, in the process that made it only:
//  a forked child that exits must not take it away from its parent.
static char s_keys_root [64];
static pid_t s_keys_owner;

static void
s_remove_keys (void)
{
    if (getpid () == s_keys_owner)
        harness_rmtree (s_keys_root);
}

const char *
harness_keys (void)
{
    static char dir [128];
    if (*dir)
        return dir;
    const char *inherited = getenv (HARNESS_KEYS_ENV);
    if (inherited && *inherited) {
        if (strlen (inherited) >= sizeof dir) {
            fprintf (stderr, "harness: %s names a directory of more than %zu bytes\n",
                     HARNESS_KEYS_ENV, sizeof dir - 1);
            exit (1);
        }
        snprintf (dir, sizeof dir, "%s", inherited);
        return dir;
    }
    harness_tmpdir (s_keys_root, sizeof s_keys_root);
    snprintf (dir, sizeof dir, "%s/keys", s_keys_root);
    const char *tasks [1 + 8 + 8 + 1];
    char names [18][16];
    size_t n = 0;
    snprintf (names [n], sizeof names [n], "chief:0");
    tasks [n] = names [n];
    n++;
    for (int i = 0; i < 8; i++) {
        snprintf (names [n], sizeof names [n], "ps:%d", i);
        tasks [n] = names [n];
        n++;
        snprintf (names [n], sizeof names [n], "worker:%d", i);
        tasks [n] = names [n];
        n++;
    }
    snprintf (names [n], sizeof names [n], "evaluator:0");
    tasks [n] = names [n];
    n++;
    ps_error_t err;
    if (ps_curve_keygen (dir, tasks, n, false, &err) != 0) {
        fprintf (stderr, "harness: cannot make the test's keys: %s\n", err.msg);
        exit (1);
    }
    s_keys_owner = getpid ();
    atexit (s_remove_keys);
    return dir;
}

int
harness_finish (int failures)
{
    if (failures == 0)
        return 0;
    fflush (stdout);
    fflush (stderr);
    s_remove_keys ();
    _exit (failures < 255 ? failures : 255);
}

//  The identities handed out, destroyed at exit: before CZMQ's own exit
//  handler (registered earlier, so run later), which would otherwise find
//  their authenticator still running.
#define S_MAX_CURVES 32
static struct {
    char task [PS_CURVE_TASK_MAX];
    ps_curve_t *curve;
    pid_t owner;
} s_curves [S_MAX_CURVES];

static void
s_destroy_curves (void)
{
    for (int i = 0; i < S_MAX_CURVES; i++)
        if (s_curves [i].curve && s_curves [i].owner == getpid ())
            ps_curve_destroy (&s_curves [i].curve);
}

ps_curve_t *
harness_curve (const char *task)
{
    static bool registered;
    int free_slot = -1;
    for (int i = 0; i < S_MAX_CURVES; i++) {
        if (s_curves [i].curve && s_curves [i].owner == getpid ()
        &&  strcmp (s_curves [i].task, task) == 0)
            return s_curves [i].curve;
        if (!s_curves [i].curve && free_slot < 0)
            free_slot = i;
    }
    ps_error_t err;
    ps_curve_t *curve = free_slot >= 0 ? ps_curve_new (harness_keys (), task, &err) : NULL;
    if (!curve) {
        fprintf (stderr, "harness: identity %s: %s\n", task,
                 free_slot >= 0 ? err.msg : "too many identities");
        exit (1);
    }
    if (!registered) {
        atexit (s_destroy_curves);
        registered = true;
    }
    snprintf (s_curves [free_slot].task, sizeof s_curves [free_slot].task, "%s", task);
    s_curves [free_slot].curve = curve;
    s_curves [free_slot].owner = getpid ();
    return curve;
}

int
harness_clients_open (harness_clients_t *clients, const char *const *endpoints, int nservers,
                      int timeout_ms, bool insecure, ps_error_t *err)
{
    clients->control = ps_client_new (endpoints, nservers, timeout_ms,
                                      insecure ? NULL : harness_curve ("chief:0"), err);
    clients->data = clients->control
                  ? ps_client_new (endpoints, nservers, timeout_ms,
                                   insecure ? NULL : harness_curve ("worker:0"), err)
                  : NULL;
    if (!clients->data) {
        harness_clients_close (clients);
        return err ? err->code : PS_EINVAL;
    }
    return 0;
}

int
harness_clients_add_variable (harness_clients_t *clients, const char *name,
                              const ps_shape_t *shape, const ps_init_t *init, int nparts,
                              const int64_t *splits, const int *servers, ps_error_t *err)
{
    int var = ps_client_add_variable (clients->control, name, shape, init, nparts, splits,
                                      servers, err);
    if (var < 0)
        return var;
    //  The clients declared the same variables before, so the data client
    //  gives this one the same index, or refuses it for the same reason.
    int same = ps_client_add_variable (clients->data, name, shape, init, nparts, splits,
                                       servers, err);
    assert (same == var);
    return same;
}

void
harness_clients_close (harness_clients_t *clients)
{
    ps_client_destroy (&clients->control);
    ps_client_destroy (&clients->data);
}

int
harness_server_start (harness_server_t *server, int index, const char *const *args)
{
    return harness_server_start_nofile (server, index, args, 0);
}

int
harness_server_start_nofile (harness_server_t *server, int index, const char *const *args,
                             long nofile)
{
    const char *binary = getenv ("PS_SERVER");
    if (!binary) {
        fprintf (stderr, "harness: PS_SERVER is not set\n");
        return -1;
    }
    static int counter;
    memset (server, 0, sizeof *server);
    snprintf (server->endpoint_file, sizeof server->endpoint_file,
              "/tmp/ps-harness-%d-%d.endpoint", getpid (), counter);
    snprintf (server->log, sizeof server->log, "/tmp/ps-harness-%d-%d.log", getpid (), counter++);
    unlink (server->endpoint_file);
    const char *argv [40] = { binary, "--bind", "tcp://127.0.0.1:0",
                              "--endpoint-file", server->endpoint_file };
    int argc = 5;
    bool insecure = false;
    for (int i = 0; args && args [i] && argc < 33; i++) {
        argv [argc++] = args [i];
        insecure |= strcmp (args [i], "--insecure") == 0;
    }
    char task [32];
    snprintf (task, sizeof task, "ps:%d", index);
    argv [argc++] = "--task";
    argv [argc++] = task;
    if (!insecure) {
        argv [argc++] = "--keys";
        argv [argc++] = harness_keys ();
    }
    argv [argc] = NULL;
    server->pid = fork ();
    if (server->pid < 0)
        return -1;
    if (server->pid == 0) {
        struct rlimit limit = { (rlim_t) nofile, (rlim_t) nofile };
        if (nofile > 0 && setrlimit (RLIMIT_NOFILE, &limit) != 0)
            _exit (126);
        int fd = open (server->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2 (fd, 2);
            dup2 (fd, 1);
            close (fd);
        }
        execv (binary, (char *const *) argv);
        _exit (127);
    }
    for (int waited = 0; waited < 10000; waited += 10) {
        FILE *file = fopen (server->endpoint_file, "r");
        if (file) {
            char *got = fgets (server->endpoint, sizeof server->endpoint, file);
            fclose (file);
            if (got && strchr (server->endpoint, '\n')) {
                *strchr (server->endpoint, '\n') = 0;
                return 0;
            }
        }
        if (!harness_server_alive (server))
            break;
        harness_sleep_ms (10);
    }
    fprintf (stderr, "harness: ps-server did not start\n");
    s_print_log (server->log);
    //  A server that hangs on start must not outlive the test.
    if (server->pid > 0) {
        kill (server->pid, SIGKILL);
        waitpid (server->pid, NULL, 0);
        server->pid = 0;
    }
    return -1;
}

bool
harness_server_alive (harness_server_t *server)
{
    if (server->pid <= 0)
        return false;
    int status;
    pid_t rc = waitpid (server->pid, &status, WNOHANG);
    if (rc == server->pid) {
        server->pid = -status - 1;      //  remember the status, mark as gone
        return false;
    }
    return rc == 0;
}

int
harness_server_stop (harness_server_t *server, int sig)
{
    if (server->pid < 0) {
        int status = -server->pid - 1;
        return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
    }
    if (server->pid == 0)
        return -1;
    kill (server->pid, sig);
    for (int waited = 0; waited < 10000; waited += 5) {
        int status;
        pid_t rc = waitpid (server->pid, &status, WNOHANG);
        if (rc == server->pid) {
            server->pid = 0;
            unlink (server->endpoint_file);
            return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
        }
        harness_sleep_ms (5);
    }
    kill (server->pid, SIGKILL);
    waitpid (server->pid, NULL, 0);
    server->pid = 0;
    s_print_log (server->log);
    return -1;
}

void
harness_tmpdir (char *buf, size_t len)
{
    snprintf (buf, len, "/tmp/ps-test-XXXXXX");
    if (!mkdtemp (buf)) {
        perror ("mkdtemp");
        abort ();
    }
}

void
harness_rmtree (const char *dir)
{
    char command [512];
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    if (system (command) != 0)
        fprintf (stderr, "harness: cannot remove %s\n", dir);
}

//  A field of /proc/PID/status in KiB (VmRSS, VmHWM), or -1.
long
harness_status_kib (pid_t pid, const char *field)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *handle = fopen (path, "r");
    if (!handle)
        return -1;
    char line [256];
    long value = -1;
    size_t len = strlen (field);
    while (fgets (line, sizeof line, handle))
        if (strncmp (line, field, len) == 0 && line [len] == ':') {
            value = strtol (line + len + 1, NULL, 10);
            break;
        }
    fclose (handle);
    return value;
}

static int
s_compare_doubles (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

double
harness_median (double *samples, int n)
{
    assert (n >= 1);
    qsort (samples, (size_t) n, sizeof *samples, s_compare_doubles);
    return n % 2 ? samples [n / 2] : (samples [n / 2 - 1] + samples [n / 2]) / 2;
}

long
harness_cpu_ticks (pid_t pid)
{
    char path [64], line [1024];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *file = fopen (path, "r");
    if (!file)
        return -1;
    char *got = fgets (line, sizeof line, file);
    fclose (file);
    //  Fields 14 and 15 follow the command name, which ends with ')'.
    const char *rest = got ? strrchr (line, ')') : NULL;
    unsigned long utime, stime;
    if (!rest || sscanf (rest + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                         &utime, &stime) != 2)
        return -1;
    return (long) (utime + stime);
}

long
harness_open_fds (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/fd", (int) pid);
    DIR *dir = opendir (path);
    if (!dir)
        return -1;
    long count = 0;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        count += entry->d_name [0] != '.';
    closedir (dir);
    return count;
}

int
harness_cpu_beside_spinner (pid_t pid, long spin_ticks, long *used, long *spun,
                            double *wall_ms)
{
    //  Settle: a process that never falls quiet is measured after 10 s.
    double settle_end = ps_clock_ms () + 10000;
    double quiet_since = ps_clock_ms ();
    long ticks = harness_cpu_ticks (pid);
    while (ticks >= 0 && ps_clock_ms () < quiet_since + 1000 && ps_clock_ms () < settle_end) {
        harness_sleep_ms (50);
        long now = harness_cpu_ticks (pid);
        if (now != ticks)
            quiet_since = ps_clock_ms ();
        ticks = now;
    }
    fflush (stdout);
    fflush (stderr);
    pid_t spinner = fork ();
    if (spinner < 0)
        return -1;
    if (spinner == 0) {
        volatile unsigned long spins = 0;
        while (true)
            spins++;
    }
    //  The window: until the loop has had its share.
    long before = harness_cpu_ticks (pid);
    double start = ps_clock_ms ();
    *spun = 0;
    while (*spun >= 0 && *spun < spin_ticks && ps_clock_ms () < start + 60000) {
        harness_sleep_ms (20);
        *spun = harness_cpu_ticks (spinner);
    }
    long after = harness_cpu_ticks (pid);
    *wall_ms = ps_clock_ms () - start;
    //  The spinner is this process's child: it cannot refuse SIGKILL, and
    //  waiting for it reaps it.
    kill (spinner, SIGKILL);
    while (waitpid (spinner, NULL, 0) < 0 && errno == EINTR)
        ;
    *used = after - before;
    return before < 0 || after < 0 || *spun < spin_ticks ? -1 : 0;
}

//  ---------------------------------------------------------------------
//  Processes and files

pid_t
harness_spawn (const char *const *argv, const char *const *env, const char *log)
{
    fflush (stdout);
    fflush (stderr);
    pid_t pid = fork ();
    if (pid != 0)
        return pid < 0 ? -1 : pid;
    for (int i = 0; env && env [i]; i++) {
        const char *equals = strchr (env [i], '=');
        if (equals) {
            char name [256];
            size_t len = (size_t) (equals - env [i]);
            if (len >= sizeof name)
                _exit (127);
            memcpy (name, env [i], len);
            name [len] = 0;
            setenv (name, equals + 1, 1);
        }
        else
            unsetenv (env [i]);
    }
    if (log) {
        int fd = open (log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2 (fd, 1);
            dup2 (fd, 2);
            close (fd);
        }
    }
    execv (argv [0], (char *const *) argv);
    fprintf (stderr, "harness: cannot run %s: %s\n", argv [0], strerror (errno));
    _exit (127);
}

static int
s_exit_status (int status)
{
    return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

//  harness_wait, telling apart a process still running (-1) from one that
//  is not a child of this process, or was reaped already (-2).
static int
s_wait (pid_t pid, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (true) {
        int status;
        pid_t rc = waitpid (pid, &status, WNOHANG);
        if (rc == pid)
            return s_exit_status (status);
        if (rc < 0 && errno != EINTR)
            return -2;
        if (ps_clock_ms () >= deadline)
            return -1;
        harness_sleep_ms (5);
    }
}

int
harness_wait (pid_t pid, int timeout_ms)
{
    int status = s_wait (pid, timeout_ms);
    return status < 0 ? -1 : status;
}

bool
harness_running (pid_t pid)
{
    siginfo_t info = { 0 };
    return pid > 0 && waitid (P_PID, (id_t) pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0
        && info.si_pid != pid;
}

int
harness_wait_or_kill (pid_t pid, int timeout_ms)
{
    int status = s_wait (pid, timeout_ms);
    if (status == -2)
        return -1;
    if (status == -1 && pid > 0) {
        fprintf (stderr, "harness: process %d still running after %d ms; killing it\n",
                 (int) pid, timeout_ms);
        kill (pid, SIGKILL);
        waitpid (pid, NULL, 0);
    }
    return status;
}

bool
harness_pid_gone (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *file = fopen (path, "r");
    if (!file)
        return true;
    char line [512];
    bool zombie = false;
    if (fgets (line, sizeof line, file)) {
        //  "pid (comm) S ...": the state follows the last parenthesis.
        char *paren = strrchr (line, ')');
        zombie = paren && (paren [1] == ' ') && (paren [2] == 'Z' || paren [2] == 'X');
    }
    fclose (file);
    if (zombie)
        waitpid (pid, NULL, WNOHANG);
    return zombie;
}

int
harness_wait_gone (const pid_t *pids, size_t n, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (true) {
        int running = 0;
        for (size_t i = 0; i < n; i++)
            running += !harness_pid_gone (pids [i]);
        if (running == 0 || ps_clock_ms () >= deadline)
            return running;
        harness_sleep_ms (10);
    }
}

int
harness_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    socklen_t len = sizeof addr;
    int port = -1;
    if (bind (fd, (struct sockaddr *) &addr, sizeof addr) == 0
    &&  getsockname (fd, (struct sockaddr *) &addr, &len) == 0)
        port = ntohs (addr.sin_port);
    close (fd);
    return port;
}

void
harness_print_log (const char *path)
{
    s_print_log (path);
}

bool
harness_file_contains (const char *path, const char *text)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return false;
    fseek (file, 0, SEEK_END);
    long size = ftell (file);
    fseek (file, 0, SEEK_SET);
    char *data = malloc ((size_t) (size > 0 ? size : 0) + 1);
    size_t got = data ? fread (data, 1, (size_t) (size > 0 ? size : 0), file) : 0;
    fclose (file);
    if (!data)
        return false;
    data [got] = 0;
    bool found = strstr (data, text) != NULL;
    free (data);
    return found;
}

int
harness_write_file (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    if (!file)
        return -1;
    int rc = fputs (text, file) < 0 ? -1 : 0;
    if (fclose (file) != 0)
        rc = -1;
    return rc;
}

//  ---------------------------------------------------------------------
//  JSON-lines files

json_t *
harness_jsonl_read (const char *path)
{
    json_t *rows = json_array ();
    FILE *file = fopen (path, "r");
    if (!file)
        return rows;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline (&line, &cap, file)) > 0) {
        if (line [len - 1] != '\n')
            break;              //  still being written
        if (len == 1)
            continue;
        json_error_t error;
        json_t *row = json_loadb (line, (size_t) len, 0, &error);
        if (!row) {
            fprintf (stderr, "harness: %s: a line that is not JSON (%s): %s", path, error.text,
                     line);
            json_decref (rows);
            rows = NULL;
            break;
        }
        json_array_append_new (rows, row);
    }
    free (line);
    fclose (file);
    return rows;
}

json_t *
harness_jsonl_wait (const char *path, harness_match_fn *match, void *arg, pid_t pid,
                    int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (true) {
        //  Whether the process has ended is known before the last read, so
        //  that a line it wrote just before exiting is still seen.
        bool ended = pid > 0 && !harness_running (pid);
        json_t *rows = harness_jsonl_read (path);
        if (!rows)
            return NULL;
        size_t i;
        json_t *row;
        json_array_foreach (rows, i, row)
            if (match (row, arg)) {
                json_incref (row);
                json_decref (rows);
                return row;
            }
        json_decref (rows);
        if (ended || ps_clock_ms () >= deadline)
            return NULL;
        harness_sleep_ms (10);
    }
}

bool
harness_event_is (const json_t *row, const char *event)
{
    const char *name = json_string_value (json_object_get (row, "event"));
    return name && strcmp (name, event) == 0;
}

json_t *
harness_peer_run (const char *const *argv, const char *out, const char *log, int timeout_ms,
                  char *why, size_t why_size, int *status_p)
{
    pid_t pid = harness_spawn (argv, NULL, log);
    int status = pid > 0 ? harness_wait_or_kill (pid, timeout_ms) : -1;
    if (status_p)
        *status_p = status;
    json_t *lines = harness_jsonl_read (out);
    if (status == 0 && lines && json_array_size (lines) > 0)
        return lines;
    json_decref (lines);
    //  The peer's last line of output says why it gave no figure.
    char last [400] = "no output", line [400];
    FILE *file = fopen (log, "r");
    while (file && fgets (line, sizeof line, file))
        if (line [strspn (line, " \n")])
            snprintf (last, sizeof last, "%s", line);
    if (file)
        fclose (file);
    last [strcspn (last, "\n")] = 0;
    snprintf (why, why_size, "%s %s exited %d (%s)", argv [0], argv [1] ? argv [1] : "",
              status, last);
    return NULL;
}

int
harness_write_line (int fd, const char *fmt, ...)
{
    char line [4096];
    va_list args;
    va_start (args, fmt);
    int len = vsnprintf (line, sizeof line - 1, fmt, args);
    va_end (args);
    if (len < 0 || len >= (int) sizeof line - 1)
        return -1;
    line [len++] = '\n';
    for (int done = 0; done < len; ) {
        ssize_t wrote = write (fd, line + done, (size_t) (len - done));
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0)
            return -1;
        done += (int) wrote;
    }
    return 0;
}

int
harness_read_line (int fd, char *line, size_t size, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    size_t len = 0;
    while (true) {
        int left = (int) (deadline - ps_clock_ms ());
        struct pollfd item = { .fd = fd, .events = POLLIN };
        int ready = poll (&item, 1, left > 0 ? left : 0);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return -1;
        char c;
        ssize_t got = read (fd, &c, 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        if (c == '\n') {
            line [len] = 0;
            return 0;
        }
        if (len + 1 < size)
            line [len++] = c;
    }
}

//  ---------------------------------------------------------------------
//  Groups of cases

bool
harness_group (int argc, char **argv, const char *group)
{
    if (argc < 2)
        return false;
    if (argc == 2 && strcmp (argv [1], group) == 0)
        return true;
    fprintf (stderr, "%s: unexpected argument \"%s\"; expected none (the base cases) or "
             "\"%s\"\n", argv [0], argv [1], group);
    exit (2);
}

void
harness_skip (const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    printf ("SKIP: ");
    vprintf (fmt, args);
    printf ("\n");
    va_end (args);
    fflush (stdout);
    exit (77);
}

const char *
harness_data_dir (void)
{
    const char *dir = getenv ("PS_DATA_DIR");
    return dir && *dir ? dir : PS_DATASET_DEFAULT_DIR;
}

void
harness_need_data (void)
{
    const char *files [] = { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz" };
    for (size_t i = 0; i < sizeof files / sizeof files [0]; i++) {
        char path [PATH_MAX];
        snprintf (path, sizeof path, "%s/%s", harness_data_dir (), files [i]);
        if (access (path, R_OK) != 0)
            harness_skip ("%s: %s (the real Fashion-MNIST data set; set PS_DATA_DIR, or "
                          "install Debian's dataset-fashion-mnist)", path, strerror (errno));
    }
}
