//  Integration test harness; see harness.h.

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void
s_sleep_ms (int ms)
{
    struct timespec pause = { ms / 1000, (long) (ms % 1000) * 1000000 };
    nanosleep (&pause, NULL);
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

int
harness_server_start (harness_server_t *server, const char *const *args)
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
    const char *argv [32] = { binary, "--bind", "tcp://127.0.0.1:0",
                              "--endpoint-file", server->endpoint_file };
    int argc = 5;
    for (int i = 0; args && args [i] && argc < 31; i++)
        argv [argc++] = args [i];
    argv [argc] = NULL;
    server->pid = fork ();
    if (server->pid < 0)
        return -1;
    if (server->pid == 0) {
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
        s_sleep_ms (10);
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
        s_sleep_ms (5);
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
