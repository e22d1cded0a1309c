//  Test harness for integration tests: starts real ps-server processes on
//  127.0.0.1 with a free port, learns the bound endpoint from the server's
//  --endpoint-file, and stops them with a signal of the test's choosing.
//  The server binary comes from the PS_SERVER environment variable, which
//  meson sets.

#ifndef PS_HARNESS_H_INCLUDED
#define PS_HARNESS_H_INCLUDED

#include <stdbool.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    char endpoint [256];
    char endpoint_file [256];
    char log [256];             //  the server's stderr, for failed tests
} harness_server_t;

//  Start a server with extra arguments (NULL-terminated list, may be
//  NULL). Returns 0 once it is serving, -1 when it did not start within
//  10 s (its log is printed).
int harness_server_start (harness_server_t *server, const char *const *args);

//  Send sig and wait for exit. Returns the exit status (0..255), 128+signal
//  when killed by a signal, or -1 when it did not exit within 10 s.
int harness_server_stop (harness_server_t *server, int sig);

//  True while the server process has not exited.
bool harness_server_alive (harness_server_t *server);

//  A field of /proc/PID/status in KiB (VmRSS, VmHWM), or -1.
long harness_status_kib (pid_t pid, const char *field);

//  A fresh directory under /tmp; the caller removes it with harness_rmtree.
void harness_tmpdir (char *buf, size_t len);
void harness_rmtree (const char *dir);

#endif
