//  Unit tests for same-host peers (common/wire/ps_host.c): the host
//  identity from PS_HOST_ID (made safe for an endpoint set); endpoint sets
//  and the pick of one (ipc:// on the same host only and with its socket
//  there, tcp elsewhere, for a plain endpoint and under PS_SAME_HOST=tcp);
//  whether memory is shared with a set's process (not with another host,
//  user or /dev/shm, nor under PS_SAME_HOST=ipc at either end, said by
//  shm=off); the private ipc
//  directory, made with mode 0700 and refused when open to others or
//  named with a comma; the ipc endpoint named after the tcp one.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "ps_file.h"
#include "ps_host.h"

static char s_tmp [64];

static int
s_setup (void **state)
{
    (void) state;
    snprintf (s_tmp, sizeof s_tmp, "/tmp/test_host.XXXXXX");
    return mkdtemp (s_tmp) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    (void) state;
    ps_error_t err;
    return ps_file_remove_tree (s_tmp, &err) == 0 ? 0 : -1;
}

static void
test_identity (void **state)
{
    (void) state;
    //  main set PS_HOST_ID before anything read it; it is read once.
    assert_string_equal (ps_host_id (), "test_host_1");
    assert_int_equal (setenv ("PS_HOST_ID", "another", 1), 0);
    assert_string_equal (ps_host_id (), "test_host_1");
}

//  Bind a Unix socket at path, as a peer's ipc:// endpoint leaves one.
static void
s_socket_file (const char *path)
{
    int fd = socket (AF_UNIX, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    assert_true (strlen (path) < sizeof addr.sun_path);
    memcpy (addr.sun_path, path, strlen (path) + 1);
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_int_equal (close (fd), 0);
}

static void
test_sets (void **state)
{
    (void) state;
    ps_error_t err;
    char set [PS_HOST_SET_MAX], out [256], path [128], ipc [160];
    bool local;
    snprintf (path, sizeof path, "%s/ps-x", s_tmp);
    snprintf (ipc, sizeof ipc, "ipc://%s", path);
    //  This host's set whose socket is not there (a process of this
    //  identity that shares no /tmp with this one): tcp.
    assert_int_equal (ps_host_set ("tcp://10.0.0.5:2222", ipc, false, set, sizeof set, &err), 0);
    char want [PS_HOST_SET_MAX];
    const char *shm = ps_host_shm_id ();
    assert_true (*shm);
    snprintf (want, sizeof want, "tcp://10.0.0.5:2222,%s,host=test_host_1,shm=%s", ipc, shm);
    assert_string_equal (set, want);
    assert_int_equal (ps_host_pick (set, false, out, sizeof out, &local, NULL, &err), 0);
    assert_string_equal (out, "tcp://10.0.0.5:2222");
    assert_false (local);
    //  A file that is no socket: tcp still.
    assert_int_equal (harness_write_file (path, "not a socket"), 0);
    assert_int_equal (ps_host_pick (set, false, out, sizeof out, &local, NULL, &err), 0);
    assert_false (local);
    assert_int_equal (unlink (path), 0);
    //  With the socket there: its ipc endpoint.
    s_socket_file (path);
    assert_int_equal (ps_host_pick (set, false, out, sizeof out, &local, NULL, &err), 0);
    assert_string_equal (out, ipc);
    assert_true (local);
    //  Another host's, or a host named only in part: the tcp endpoint.
    const char *others [] = { "host=test_host_2", "host=test_host_", "host=test_host_10",
                              "host=", NULL };
    for (size_t i = 0; i < sizeof others / sizeof others [0] + 2; i++) {
        char other [PS_HOST_SET_MAX];
        if (i < sizeof others / sizeof others [0])
            snprintf (other, sizeof other, "tcp://h:1,%s%s%s", ipc, others [i] ? "," : "",
                      others [i] ? others [i] : "");
        else
            snprintf (other, sizeof other, "%s", i == sizeof others / sizeof others [0]
                      ? "tcp://h:1,host=test_host_1" : "tcp://h:1");
        assert_int_equal (ps_host_pick (other, false, out, sizeof out, &local, NULL, &err), 0);
        assert_string_equal (out, "tcp://h:1");
        assert_false (local);
    }
    //  Memory is shared with a set of this host and this shared-memory
    //  identity, whether or not its socket is seen from here (strings
    //  alone decide, so that all members of a ring decide alike); not
    //  with another host's, another user's or another /dev/shm's, nor one
    //  without an identity or that says shm=off (as a set of a process
    //  under PS_SAME_HOST=ipc does), nor under PS_SAME_HOST=ipc here,
    //  which keeps the ipc endpoint.
    assert_true (ps_host_shares_memory (set));
    snprintf (want, sizeof want, "tcp://h:1,ipc:///nowhere/x,host=test_host_1,shm=%s", shm);
    assert_true (ps_host_shares_memory (want));
    snprintf (want, sizeof want, "tcp://h:1,%s,shm=%s,host=test_host_1", ipc, shm);
    assert_true (ps_host_shares_memory (want));
    const char *not_shared [] = { "host=test_host_2,shm=%s", "host=test_host_1",
                                  "host=test_host_1,shm=off", "host=test_host_1,shm=%sx",
                                  "host=test_host_1,shm=1%s", "shm=%s" };
    for (size_t i = 0; i < sizeof not_shared / sizeof not_shared [0]; i++) {
        char tail [128];
        snprintf (tail, sizeof tail, not_shared [i], shm);
        snprintf (want, sizeof want, "tcp://h:1,%s,%s", ipc, tail);
        if (ps_host_shares_memory (want))
            fail_msg ("memory shared with %s", want);
    }
    assert_int_equal (setenv ("PS_SAME_HOST", "ipc", 1), 0);
    assert_true (ps_host_same_host ());
    assert_false (ps_host_shared_memory ());
    assert_false (ps_host_shares_memory (set));
    assert_int_equal (ps_host_set ("tcp://h:1", ipc, false, set, sizeof set, &err), 0);
    snprintf (want, sizeof want, "tcp://h:1,%s,host=test_host_1,shm=off", ipc);
    assert_string_equal (set, want);
    assert_int_equal (ps_host_pick (set, false, out, sizeof out, &local, NULL, &err), 0);
    assert_string_equal (out, ipc);
    assert_true (local);
    assert_int_equal (unsetenv ("PS_SAME_HOST"), 0);
    assert_true (ps_host_shared_memory ());
    assert_false (ps_host_shares_memory (set));
    //  Without an ipc endpoint the set is the tcp endpoint alone.
    assert_int_equal (ps_host_set ("tcp://h:1", NULL, false, set, sizeof set, &err), 0);
    assert_string_equal (set, "tcp://h:1");
    //  Same-host peers turned off.
    assert_int_equal (setenv ("PS_SAME_HOST", "tcp", 1), 0);
    assert_false (ps_host_same_host ());
    snprintf (set, sizeof set, "tcp://h:1,%s,host=test_host_1", ipc);
    assert_int_equal (ps_host_pick (set, false, out, sizeof out, &local, NULL, &err), 0);
    assert_string_equal (out, "tcp://h:1");
    assert_false (local);
    assert_int_equal (unsetenv ("PS_SAME_HOST"), 0);
    assert_true (ps_host_same_host ());
    //  Empty, or no room.
    assert_int_equal (ps_host_pick ("", false, out, sizeof out, NULL, NULL, &err), PS_EINVAL);
    assert_int_equal (ps_host_pick (",ipc:///x", false, out, sizeof out, NULL, NULL, &err), PS_EINVAL);
    assert_int_equal (ps_host_pick ("tcp://h:1", false, out, 5, NULL, NULL, &err), PS_EINVAL);
    assert_int_equal (ps_host_set ("tcp://h:1", "ipc:///x", false, set, 12, &err), PS_EINVAL);
}

//  A server's set whose ipc endpoint takes PLAIN (ps_curve.h), written
//  plain+ipc://, which readers of an earlier build skip: picked, as its
//  ipc:// endpoint, only by a caller with a password, and only where the
//  socket and its directory are this user's alone; *plain says so.
static void
test_plain_sets (void **state)
{
    (void) state;
    ps_error_t err;
    char dir [128], path [160], ipc [192], set [PS_HOST_SET_MAX], out [256], want [PS_HOST_SET_MAX];
    bool local, plain;
    snprintf (dir, sizeof dir, "%s/private", s_tmp);
    assert_int_equal (mkdir (dir, 0700), 0);
    snprintf (path, sizeof path, "%s/ps-p", dir);
    snprintf (ipc, sizeof ipc, "ipc://%s", path);
    s_socket_file (path);
    assert_int_equal (ps_host_set ("tcp://h:1", ipc, true, set, sizeof set, &err), 0);
    snprintf (want, sizeof want, "tcp://h:1,plain+%s,host=test_host_1,shm=%s", ipc,
              ps_host_shm_id ());
    assert_string_equal (set, want);
    //  Its ipc endpoint, as the coordinator's registered event gives it.
    size_t ipc_len = 0;
    const char *found = ps_host_ipc_of (set, &ipc_len, &plain);
    assert_non_null (found);
    assert_int_equal (ipc_len, strlen (ipc));
    assert_memory_equal (found, ipc, ipc_len);
    assert_true (plain);
    assert_null (ps_host_ipc_of ("tcp://h:1,host=x", &ipc_len, &plain));
    assert_int_equal (ps_host_pick (set, true, out, sizeof out, &local, &plain, &err), 0);
    assert_string_equal (out, ipc);
    assert_true (local);
    assert_true (plain);
    //  No password: tcp, which stays CurveZMQ.
    assert_int_equal (ps_host_pick (set, false, out, sizeof out, &local, &plain, &err), 0);
    assert_string_equal (out, "tcp://h:1");
    assert_false (local);
    assert_false (plain);
    //  A directory others may enter or write: someone else could have put
    //  the socket there to take the password, so tcp.
    assert_int_equal (chmod (dir, 0755), 0);
    assert_int_equal (ps_host_pick (set, true, out, sizeof out, &local, &plain, &err), 0);
    assert_string_equal (out, "tcp://h:1");
    assert_false (plain);
    assert_int_equal (chmod (dir, 0700), 0);
    //  A socket of another user's (as root: a file given away).
    if (geteuid () == 0) {
        assert_int_equal (chown (path, 65534, 65534), 0);
        assert_int_equal (ps_host_pick (set, true, out, sizeof out, &local, &plain, &err), 0);
        assert_string_equal (out, "tcp://h:1");
        assert_int_equal (chown (path, 0, 0), 0);
    }
    //  A set whose ipc endpoint is CurveZMQ's: for anyone.
    assert_int_equal (ps_host_set ("tcp://h:1", ipc, false, set, sizeof set, &err), 0);
    found = ps_host_ipc_of (set, &ipc_len, &plain);
    assert_true (found && ipc_len == strlen (ipc) && memcmp (found, ipc, ipc_len) == 0);
    assert_false (plain);
    assert_int_equal (ps_host_pick (set, true, out, sizeof out, &local, &plain, &err), 0);
    assert_string_equal (out, ipc);
    assert_true (local);
    assert_false (plain);
    assert_int_equal (ps_host_pick (set, false, out, sizeof out, &local, &plain, &err), 0);
    assert_string_equal (out, ipc);
    assert_false (plain);
    assert_int_equal (unlink (path), 0);
    assert_int_equal (rmdir (dir), 0);
}

static void
test_directory (void **state)
{
    (void) state;
    ps_error_t err;
    char runtime [128], dir [160], ipc [256];
    snprintf (runtime, sizeof runtime, "%s/run", s_tmp);
    assert_int_equal (mkdir (runtime, 0700), 0);
    assert_int_equal (setenv ("XDG_RUNTIME_DIR", runtime, 1), 0);
    assert_int_equal (ps_host_ipc_endpoint ("ps", "tcp://127.0.0.1:5000", ipc, sizeof ipc, &err),
                      0);
    char want [300];
    snprintf (want, sizeof want, "ipc://%s/ps-cluster/ps-127.0.0.1_5000", runtime);
    assert_string_equal (ipc, want);
    snprintf (dir, sizeof dir, "%s/ps-cluster", runtime);
    struct stat st;
    assert_int_equal (lstat (dir, &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    assert_int_equal (st.st_mode & 0777, 0700);
    //  The same tcp endpoint, the same name (a restarted server's peers
    //  find it again); an IPv6 one is made safe.
    char again [256];
    assert_int_equal (ps_host_ipc_endpoint ("ps", "tcp://127.0.0.1:5000", again, sizeof again,
                                            &err), 0);
    assert_string_equal (again, ipc);
    assert_int_equal (ps_host_ipc_endpoint ("ring", "tcp://[::1]:7", again, sizeof again,
                                            &err), 0);
    snprintf (want, sizeof want, "ipc://%s/ps-cluster/ring-___1__7", runtime);
    assert_string_equal (again, want);
    //  Open to others: refused, naming the directory.
    assert_int_equal (chmod (dir, 0755), 0);
    assert_int_equal (ps_host_ipc_endpoint ("ps", "tcp://h:1", ipc, sizeof ipc, &err), PS_EIO);
    assert_non_null (strstr (err.msg, dir));
    assert_int_equal (chmod (dir, 0700), 0);
    //  A comma would break the sets it is written in.
    snprintf (runtime, sizeof runtime, "%s/a,b", s_tmp);
    assert_int_equal (mkdir (runtime, 0700), 0);
    assert_int_equal (setenv ("XDG_RUNTIME_DIR", runtime, 1), 0);
    assert_int_equal (ps_host_ipc_endpoint ("ps", "tcp://h:1", ipc, sizeof ipc, &err),
                      PS_EINVAL);
    //  Longer than a socket's path may be.
    char deep [200];
    snprintf (deep, sizeof deep, "%s/%0120d", s_tmp, 0);
    assert_int_equal (mkdir (deep, 0700), 0);
    assert_int_equal (setenv ("XDG_RUNTIME_DIR", deep, 1), 0);
    assert_int_equal (ps_host_ipc_endpoint ("ps", "tcp://h:1", ipc, sizeof ipc, &err),
                      PS_EINVAL);
    assert_int_equal (unsetenv ("XDG_RUNTIME_DIR"), 0);
}

int
main (void)
{
    if (setenv ("PS_HOST_ID", "test host,1", 1) != 0)
        return 1;
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_identity),
        cmocka_unit_test (test_sets),
        cmocka_unit_test (test_plain_sets),
        cmocka_unit_test (test_directory),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup, s_teardown));
}
