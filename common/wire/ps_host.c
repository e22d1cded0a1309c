//  Host identity and same-host ipc:// endpoints; see ps_host.h.

#include "ps_host.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ps_log.h"

static char s_id [PS_HOST_ID_MAX];
static pthread_once_t s_id_once = PTHREAD_ONCE_INIT;

//  Where shm_open keeps its objects on Linux.
#define S_SHM_DIR "/dev/shm"

static char s_shm [64];
static pthread_once_t s_shm_once = PTHREAD_ONCE_INIT;

//  Append the first line of file to buf (of len bytes), keeping only the
//  characters an endpoint set can carry. Returns whether it read any.
static bool
s_append_file (char *buf, size_t len, const char *file)
{
    FILE *f = fopen (file, "r");
    if (!f)
        return false;
    char line [PS_HOST_ID_MAX];
    bool read = fgets (line, sizeof line, f) != NULL;
    if (fclose (f) != 0)
        ps_warn ("closing %s: %s", file, strerror (errno));
    if (!read)
        return false;
    line [strcspn (line, "\r\n")] = '\0';
    if (!line [0])
        return false;
    size_t used = strlen (buf);
    snprintf (buf + used, len - used, "%s%s", used ? "-" : "", line);
    return true;
}

//  Keep letters, digits, '.', '_' and '-'; anything else becomes '_', so
//  that an identity never breaks the set it is written in.
static void
s_sanitise (char *text)
{
    for (char *p = text; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
              || *p == '.' || *p == '_' || *p == '-'))
            *p = '_';
}

static void
s_read_id (void)
{
    const char *forced = getenv ("PS_HOST_ID");
    if (forced && *forced) {
        snprintf (s_id, sizeof s_id, "%s", forced);
        s_sanitise (s_id);
        return;
    }
    //  The host name too: containers of one machine often share the
    //  machine-id of their image and the kernel's boot id, but each has a
    //  host name (and a /tmp) of its own.
    char id [PS_HOST_ID_MAX] = "";
    (void) s_append_file (id, sizeof id, "/etc/machine-id");
    char name [64];
    if (gethostname (name, sizeof name) == 0) {
        name [sizeof name - 1] = '\0';
        size_t used = strlen (id);
        snprintf (id + used, sizeof id - used, "%s%s", used ? "-" : "", name);
    }
    //  Without a boot id the machine alone names the host: a reboot then
    //  changes nothing that matters, since no process outlives it.
    if (id [0])
        (void) s_append_file (id, sizeof id, "/proc/sys/kernel/random/boot_id");
    s_sanitise (id);
    memcpy (s_id, id, sizeof s_id);
}

const char *
ps_host_id (void)
{
    if (pthread_once (&s_id_once, s_read_id) != 0)
        return "";
    return s_id;
}

bool
ps_host_same_host (void)
{
    const char *mode = getenv ("PS_SAME_HOST");
    return !(mode && strcmp (mode, "tcp") == 0);
}

//  The user and the /dev/shm (its device and inode, which differ in a
//  container of its own /dev/shm) that this process shares memory through.
static void
s_read_shm (void)
{
    struct stat st;
    if (stat (S_SHM_DIR, &st) == 0 && S_ISDIR (st.st_mode))
        snprintf (s_shm, sizeof s_shm, "%x.%jx.%jx", (unsigned) geteuid (),
                  (uintmax_t) st.st_dev, (uintmax_t) st.st_ino);
}

const char *
ps_host_shm_id (void)
{
    if (pthread_once (&s_shm_once, s_read_shm) != 0)
        return "";
    return s_shm;
}

bool
ps_host_shared_memory (void)
{
    const char *mode = getenv ("PS_SAME_HOST");
    return !(mode && (strcmp (mode, "tcp") == 0 || strcmp (mode, "ipc") == 0));
}

//  Make (or check) the private directory into dir.
static int
s_dir (char *dir, size_t len, ps_error_t *err)
{
    const char *runtime = getenv ("XDG_RUNTIME_DIR");
    int n = runtime && runtime [0] == '/'
          ? snprintf (dir, len, "%s/ps-cluster", runtime)
          : snprintf (dir, len, "/tmp/ps-cluster-ipc-%u", (unsigned) getuid ());
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "the ipc directory's path is too long");
    if (strpbrk (dir, ", "))
        return ps_error_set (err, PS_EINVAL, "the ipc directory %s holds a comma or a space, "
                             "which an endpoint set cannot carry", dir);
    if (mkdir (dir, 0700) != 0 && errno != EEXIST)
        return ps_error_set (err, PS_EIO, "cannot make the ipc directory %s: %s", dir,
                             strerror (errno));
    //  A directory someone else made, or left open to others, could hand
    //  our peers another process's socket: refuse it.
    struct stat st;
    if (lstat (dir, &st) != 0)
        return ps_error_set (err, PS_EIO, "the ipc directory %s: %s", dir, strerror (errno));
    if (!S_ISDIR (st.st_mode) || st.st_uid != getuid () || (st.st_mode & 077) != 0)
        return ps_error_set (err, PS_EIO, "the ipc directory %s must be a directory of user "
                             "%u with mode 0700 (it is %s of user %u, mode %03o)", dir,
                             (unsigned) getuid (), S_ISDIR (st.st_mode) ? "one" : "not one",
                             (unsigned) st.st_uid, (unsigned) (st.st_mode & 0777));
    return 0;
}

int
ps_host_ipc_endpoint (const char *what, const char *tcp, char *buf, size_t len, ps_error_t *err)
{
    char dir [sizeof ((struct sockaddr_un *) 0)->sun_path];
    int rc = s_dir (dir, sizeof dir, err);
    if (rc)
        return rc;
    char name [sizeof dir];
    snprintf (name, sizeof name, "%s-%s", what,
              strncmp (tcp, "tcp://", 6) == 0 ? tcp + 6 : tcp);
    s_sanitise (name);
    char path [2 * sizeof dir];
    int n = snprintf (path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t) n >= sizeof dir)
        return ps_error_set (err, PS_EINVAL, "the ipc socket %s is longer than a socket's "
                             "path may be (%zu bytes)", path, sizeof dir - 1);
    n = snprintf (buf, len, "ipc://%s", path);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "no room for the endpoint ipc://%s", path);
    return 0;
}

//  The last element of set, after its first, that starts with prefix and
//  holds more than it, with its length in *len; NULL when there is none.
static const char *
s_element (const char *set, const char *prefix, size_t *len)
{
    const char *found = NULL;
    size_t prefix_len = strlen (prefix);
    for (const char *p = set + strcspn (set, ","); *p; ) {
        p += strspn (p, ",");
        size_t n = strcspn (p, ",");
        if (n > prefix_len && strncmp (p, prefix, prefix_len) == 0) {
            found = p;
            *len = n;
        }
        p += n;
    }
    return found;
}

//  Whether set's element prefix (such as "host=") holds exactly value,
//  which must not be empty.
static bool
s_says (const char *set, const char *prefix, const char *value)
{
    size_t len = 0, prefix_len = strlen (prefix);
    const char *element = s_element (set, prefix, &len);
    return element && *value && len - prefix_len == strlen (value)
        && strncmp (element + prefix_len, value, len - prefix_len) == 0;
}

int
ps_host_set (const char *tcp, const char *ipc, bool ipc_plain, char *buf, size_t len,
             ps_error_t *err)
{
    bool shm = ps_host_shared_memory () && *ps_host_shm_id ();
    //  A PLAIN ipc endpoint is written plain+ipc://PATH, an element that
    //  readers of an earlier build skip: they would offer CurveZMQ to it
    //  and be refused for ever, where over tcp they are served.
    int n = ipc && *ps_host_id ()
          ? snprintf (buf, len, "%s,%s%s,host=%s,shm=%s", tcp, ipc_plain ? "plain+" : "", ipc,
                      ps_host_id (), shm ? ps_host_shm_id () : "off")
          : snprintf (buf, len, "%s", tcp);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "no room for the endpoints of %s", tcp);
    return 0;
}

//  Whether the socket at path is this user's, in a directory of this
//  user's alone: no other user (root aside) can have put it there, so a
//  password sent over it reaches a process of this user.
static bool
s_private_socket (const char *path)
{
    char dir [sizeof ((struct sockaddr_un *) 0)->sun_path];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (!slash || slash == dir)
        return false;
    *slash = '\0';
    struct stat st, sock;
    return lstat (dir, &st) == 0 && S_ISDIR (st.st_mode) && st.st_uid == getuid ()
        && (st.st_mode & 077) == 0
        && lstat (path, &sock) == 0 && S_ISSOCK (sock.st_mode) && sock.st_uid == getuid ();
}

const char *
ps_host_ipc_of (const char *set, size_t *len, bool *plain)
{
    static const char plain_prefix [] = "plain+";
    const char *ipc = s_element (set, "ipc://", len);
    bool is_plain = false;
    if (!ipc && (ipc = s_element (set, "plain+ipc://", len))) {
        ipc += strlen (plain_prefix);
        *len -= strlen (plain_prefix);
        is_plain = true;
    }
    if (plain)
        *plain = is_plain;
    return ipc;
}

int
ps_host_pick (const char *set, bool plain_ok, char *buf, size_t len, bool *local, bool *plain,
              ps_error_t *err)
{
    if (local)
        *local = false;
    if (plain)
        *plain = false;
    size_t first = strcspn (set, ",");
    if (first == 0)
        return ps_error_set (err, PS_EINVAL, "an empty endpoint");
    const char *pick = set;
    size_t pick_len = first;
    size_t ipc_len = 0;
    bool ipc_plain = false;
    const char *ipc = ps_host_ipc_of (set, &ipc_len, &ipc_plain);
    //  An ipc endpoint that takes PLAIN (ps_curve.h) is for a process with
    //  a password, and only where the socket is private to this user.
    if (ipc_plain && !plain_ok)
        ipc = NULL;
    bool same = s_says (set, "host=", ps_host_id ());
    //  The socket must be there, seen from here: a process of the same
    //  identity that does not share this file system (a container of its
    //  own /tmp) is reached over tcp rather than never.
    char path [sizeof ((struct sockaddr_un *) 0)->sun_path];
    struct stat st;
    bool there = ipc && ipc_len - 6 < sizeof path;
    if (there) {
        memcpy (path, ipc + 6, ipc_len - 6);
        path [ipc_len - 6] = '\0';
        there = stat (path, &st) == 0 && S_ISSOCK (st.st_mode);
    }
    if (there && ipc_plain)
        there = s_private_socket (path);
    if (ipc && same && there && ps_host_same_host ()) {
        pick = ipc;
        pick_len = ipc_len;
        if (local)
            *local = true;
        if (plain)
            *plain = ipc_plain;
    }
    if (pick_len >= len)
        return ps_error_set (err, PS_EINVAL, "no room for the endpoint %.*s", (int) pick_len,
                             pick);
    memcpy (buf, pick, pick_len);
    buf [pick_len] = '\0';
    return 0;
}

bool
ps_host_shares_memory (const char *set)
{
    return ps_host_shared_memory () && s_says (set, "host=", ps_host_id ())
        && s_says (set, "shm=", ps_host_shm_id ());
}
