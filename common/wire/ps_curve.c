//  CurveZMQ identities, trust and peers; see ps_curve.h.

#include "ps_curve.h"
#include "ps_file.h"
#include "ps_log.h"
#include "ps_tfconfig.h"

#include <assert.h>
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

//  The ZAP domain of every secured socket.
#define S_DOMAIN "ps-cluster"

//  A data-plane password: 32 random bytes in hex (no character that the
//  password file's "task=password" lines could trip over).
#define S_TOKEN_BYTES 32
#define S_TOKEN_HEX   (2 * S_TOKEN_BYTES)

//  The certificates' metadata key that records the data plane.
#define S_PLANE_KEY "data-plane"

//  Keys refused something are remembered up to this many, so that a peer
//  cycling through keys cannot grow the set without bound; past it every
//  refusal is logged again, which is what an attack of that size deserves.
#define S_MAX_REFUSED 4096

struct _ps_curve_t {
    char task [PS_CURVE_TASK_MAX];
    char public_dir [PATH_MAX];
    zcert_t *cert;              //  this process's key pair
    zhashx_t *refused;          //  keys refused something, logged once
    bool plain;                 //  the cluster's data plane is PLAIN (ps_curve.h)
    //  The passwords of a PLAIN data plane, or else of the same-host ipc
    //  connections to the servers; "" when the keys have none (keys made
    //  before every key directory had them: then ipc stays CurveZMQ).
    char token [S_TOKEN_HEX + 1];   //  this task's password ("" for a server)
    char passwords [PATH_MAX];  //  a server's: every task's password ("" otherwise)
};

//  The process's zauth actor, shared by every ps_curve_t of the process
//  (ZeroMQ allows one ZAP handler per context).
static pthread_mutex_t s_auth_lock = PTHREAD_MUTEX_INITIALIZER;
static zactor_t *s_auth;
static int s_auth_refs;
static char s_auth_dir [PATH_MAX];

static pthread_once_t s_context_once = PTHREAD_ONCE_INIT;
static void *s_context;

static void
s_context_init (void)
{
    //  The programs block their stop signals and read them through a
    //  signalfd (ps_signal); CZMQ's own handlers would only get in the way
    //  of a process that does not block them (a test, a benchmark).
    zsys_handler_set (NULL);
    s_context = zsys_init ();
}

void *
ps_curve_context (void)
{
    pthread_once (&s_context_once, s_context_init);
    return s_context;
}

//  The file stem of task: "ps:1" gives "ps-1". Checks the role and the
//  index.
static int
s_stem (const char *task, char *stem, size_t len, ps_error_t *err)
{
    char role [16];
    int index;
    if (strlen (task) >= PS_CURVE_TASK_MAX)
        return ps_error_set (err, PS_EINVAL, "task \"%.40s...\" is too long", task);
    if (ps_tfconfig_parse_task (task, role, sizeof role, &index, err))
        return PS_EINVAL;
    if (strcmp (role, "chief") && strcmp (role, "ps") && strcmp (role, "worker")
    &&  strcmp (role, "evaluator"))
        return ps_error_set (err, PS_EINVAL, "task \"%s\": the role is not chief, ps, worker "
                             "or evaluator", task);
    if (strcmp (role, "chief") == 0 && index != 0)
        return ps_error_set (err, PS_EINVAL, "task \"%s\": the only chief is chief:0", task);
    snprintf (stem, len, "%s-%d", role, index);
    return PS_OK;
}

static bool
s_is_dir (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 && S_ISDIR (st.st_mode);
}

//  Write text to path, created with mode 0600 (it is a secret). Returns 0
//  or PS_EIO naming the path.
static int
s_write_secret (const char *path, const char *text, ps_error_t *err)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return ps_error_set (err, PS_EIO, "cannot create %s: %s", path, strerror (errno));
    int rc = PS_OK;
    if (ps_file_write_all (fd, text, strlen (text), NULL) != 0)
        rc = ps_error_set (err, PS_EIO, "cannot write %s: %s", path, strerror (errno));
    if (close (fd) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "cannot close %s: %s", path, strerror (errno));
    return rc;
}

int
ps_curve_keygen (const char *dir, const char *const *tasks, size_t ntasks, bool plain,
                 ps_error_t *err)
{
    assert (dir);
    if (strlen (dir) > PS_CURVE_DIR_MAX)
        return ps_error_set (err, PS_EINVAL, "key directory \"%.40s...\" is longer than %d "
                             "characters", dir, PS_CURVE_DIR_MAX);
    if (ntasks == 0)
        return ps_error_set (err, PS_EINVAL, "no tasks to make keys for");
    //  Every name is checked before anything is written.
    char (*stems) [PS_CURVE_TASK_MAX] = calloc (ntasks, sizeof *stems);
    if (!stems)
        abort ();
    int rc = PS_OK;
    for (size_t i = 0; i < ntasks && rc == PS_OK; i++) {
        rc = s_stem (tasks [i], stems [i], sizeof stems [i], err);
        for (size_t j = 0; j < i && rc == PS_OK; j++)
            if (strcmp (stems [i], stems [j]) == 0)
                rc = ps_error_set (err, PS_EINVAL, "task \"%s\" is listed twice", tasks [i]);
    }
    if (rc)
        goto done;
    if (mkdir (dir, 0700) != 0 && errno != EEXIST) {
        rc = ps_error_set (err, PS_EIO, "cannot create %s: %s", dir, strerror (errno));
        goto done;
    }
    DIR *handle = opendir (dir);
    if (!handle) {
        rc = ps_error_set (err, PS_EIO, "cannot open %s: %s", dir, strerror (errno));
        goto done;
    }
    struct dirent *entry;
    while ((entry = readdir (handle)))
        if (strcmp (entry->d_name, ".") && strcmp (entry->d_name, "..")) {
            rc = ps_error_set (err, PS_EEXIST, "%s is not empty (it holds %s): keys are made "
                               "in a new directory, never over old ones", dir, entry->d_name);
            break;
        }
    closedir (handle);
    if (rc)
        goto done;
    //  The directory holds secret keys: only its owner may enter it.
    if (chmod (dir, 0700) != 0) {
        rc = ps_error_set (err, PS_EIO, "chmod 0700 %s: %s", dir, strerror (errno));
        goto done;
    }
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/public", dir);
    if (mkdir (path, 0755) != 0) {
        rc = ps_error_set (err, PS_EIO, "cannot create %s: %s", path, strerror (errno));
        goto done;
    }
    //  Each task has a password, in its own file, and the servers have
    //  every task's, in one: a PLAIN data plane's, or else the same-host
    //  ipc connections' (ps_curve.h).
    char *passwords = calloc (ntasks, PS_CURVE_TASK_MAX + S_TOKEN_HEX + 2);
    if (!passwords)
        abort ();
    for (size_t i = 0; i < ntasks && rc == PS_OK; i++) {
        zcert_t *cert = zcert_new ();
        if (!cert)
            abort ();
        char role [16];
        int index;
        ps_tfconfig_parse_task (tasks [i], role, sizeof role, &index, NULL);
        zcert_set_meta (cert, "role", "%s", role);
        zcert_set_meta (cert, "task", "%s:%d", role, index);
        zcert_set_meta (cert, S_PLANE_KEY, "%s", plain ? "plain" : "curve");
        unsigned char bytes [S_TOKEN_BYTES];
        char token [S_TOKEN_HEX + 2];
        if (getrandom (bytes, sizeof bytes, 0) != (ssize_t) sizeof bytes) {
            rc = ps_error_set (err, PS_EIO, "getrandom: %s", strerror (errno));
            zcert_destroy (&cert);
            break;
        }
        for (int b = 0; b < S_TOKEN_BYTES; b++)
            snprintf (token + 2 * b, 3, "%02x", bytes [b]);
        snprintf (passwords + strlen (passwords), PS_CURVE_TASK_MAX + S_TOKEN_HEX + 2,
                  "%s:%d=%s\n", role, index, token);
        strcat (token, "\n");
        snprintf (path, sizeof path, "%s/%s.password", dir, stems [i]);
        rc = s_write_secret (path, token, err);
        snprintf (path, sizeof path, "%s/public/%s.cert", dir, stems [i]);
        if (zcert_save_public (cert, path) != 0)
            rc = ps_error_set (err, PS_EIO, "cannot write %s: %s", path, strerror (errno));
        snprintf (path, sizeof path, "%s/%s.cert_secret", dir, stems [i]);
        if (rc == PS_OK && zcert_save_secret (cert, path) != 0)
            rc = ps_error_set (err, PS_EIO, "cannot write %s: %s", path, strerror (errno));
        zcert_destroy (&cert);
    }
    if (rc == PS_OK) {
        snprintf (path, sizeof path, "%s/passwords", dir);
        rc = s_write_secret (path, passwords, err);
    }
    free (passwords);
done:
    free (stems);
    return rc;
}

//  A secret file must be present, regular, this user's, and private to it,
//  as ssh wants a private key. Returns 0 or a code with err naming it.
static int
s_check_private (const char *path, const char *what, const char *task, ps_error_t *err)
{
    struct stat st;
    if (stat (path, &st) != 0)
        return ps_error_set (err, PS_ENOTFOUND, "no %s for %s: %s: %s", what, task, path,
                             strerror (errno));
    if (!S_ISREG (st.st_mode))
        return ps_error_set (err, PS_EINVAL, "%s %s is not a regular file", what, path);
    if (st.st_mode & 077)
        return ps_error_set (err, PS_EINVAL, "%s %s is accessible by others (mode %04o): run "
                             "chmod 600 %s", what, path, (unsigned) (st.st_mode & 07777), path);
    if (st.st_uid != geteuid ())
        return ps_error_set (err, PS_EINVAL, "%s %s belongs to uid %u, not to this process's "
                             "uid %u", what, path, (unsigned) st.st_uid, (unsigned) geteuid ());
    return PS_OK;
}

//  Check a servers' file of every task's password: private, and every line
//  TASK=PASSWORD with a task name (so zauth's User-Id for a PLAIN peer,
//  the user name it proved, is always a task name: ps_curve_data_task).
static int
s_check_passwords (const char *path, const char *task, ps_error_t *err)
{
    int rc = s_check_private (path, "password file", task, err);
    char *text = NULL;
    size_t len = 0;
    if (rc == PS_OK)
        rc = ps_file_read (path, 1 << 20, &text, &len, err);
    int number = 0;
    for (char *line = text; rc == PS_OK && line && *line; ) {
        char *end = strchr (line, '\n');
        if (end)
            *end = '\0';
        number++;
        char *equals = strchr (line, '=');
        char stem [PS_CURVE_TASK_MAX];
        if (equals)
            *equals = '\0';
        if (!equals || s_stem (line, stem, sizeof stem, NULL) != PS_OK
        ||  strlen (equals + 1) != S_TOKEN_HEX
        ||  strspn (equals + 1, "0123456789abcdef") != S_TOKEN_HEX)
            rc = ps_error_set (err, PS_ECORRUPT, "password file %s: line %d: expected TASK="
                               "PASSWORD (a task such as worker:0, %d hex digits)", path, number,
                               S_TOKEN_HEX);
        line = end ? end + 1 : NULL;
    }
    free (text);
    return rc;
}

//  Read this task's data-plane password, <stem>.password in dir.
static int
s_read_token (ps_curve_t *self, const char *dir, const char *stem, ps_error_t *err)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/%s.password", dir, stem);
    int rc = s_check_private (path, "password file", self->task, err);
    char *text = NULL;
    size_t len = 0;
    if (rc == PS_OK)
        rc = ps_file_read (path, 4096, &text, &len, err);
    if (rc == PS_OK) {
        size_t n = strspn (text, "0123456789abcdef");
        if (n != S_TOKEN_HEX || (text [n] && strcmp (text + n, "\n") != 0))
            rc = ps_error_set (err, PS_ECORRUPT, "password file %s: expected %d hex digits",
                               path, S_TOKEN_HEX);
        else
            snprintf (self->token, sizeof self->token, "%.*s", S_TOKEN_HEX, text);
    }
    free (text);
    return rc;
}

//  Load the certificate stem_path (zcert_load reads stem_path + "_secret"
//  when there is one, else stem_path), refusing it when file, the one
//  expected, is missing or malformed.
static zcert_t *
s_load (const char *stem_path, const char *file, const char *what, ps_error_t *err)
{
    zcert_t *cert = zcert_load (stem_path);
    if (!cert) {
        struct stat st;
        if (stat (file, &st) != 0)
            ps_error_set (err, PS_ENOTFOUND, "%s %s: %s", what, file, strerror (errno));
        else
            ps_error_set (err, PS_ECORRUPT, "%s %s is not a CurveZMQ certificate (no "
                          "40-character curve/public-key)", what, file);
    }
    return cert;
}

ps_curve_t *
ps_curve_new (const char *dir, const char *task, ps_error_t *err)
{
    assert (dir);
    assert (task);
    char stem [PS_CURVE_TASK_MAX];
    if (strlen (dir) > PS_CURVE_DIR_MAX) {
        ps_error_set (err, PS_EINVAL, "key directory \"%.40s...\" is longer than %d characters",
                      dir, PS_CURVE_DIR_MAX);
        return NULL;
    }
    if (s_stem (task, stem, sizeof stem, err))
        return NULL;
    ps_curve_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    snprintf (self->task, sizeof self->task, "%s", task);
    self->refused = zhashx_new ();
    if (!self->refused)
        abort ();
    char path [PATH_MAX], secret [PATH_MAX + 8];
    char real [PATH_MAX];
    zcert_t *public_cert = NULL;
    snprintf (path, sizeof path, "%s/public", dir);
    if (!s_is_dir (path) || !realpath (path, real)) {
        ps_error_set (err, PS_ENOTFOUND, "key directory %s has no public/ directory of the "
                      "cluster's certificates (make one with `coordinator keygen`)", dir);
        goto fail;
    }
    snprintf (self->public_dir, sizeof self->public_dir, "%s", real);
    //  The secret certificate: present, private, well formed, and the key
    //  pair public/ names for this task.
    snprintf (path, sizeof path, "%s/%s.cert", dir, stem);
    snprintf (secret, sizeof secret, "%s_secret", path);
    if (s_check_private (secret, "secret certificate", task, err))
        goto fail;
    self->cert = s_load (path, secret, "secret certificate", err);
    if (!self->cert)
        goto fail;
    char derived [41];
    if (zmq_curve_public (derived, zcert_secret_txt (self->cert)) != 0
    ||  strcmp (derived, zcert_public_txt (self->cert)) != 0) {
        ps_error_set (err, PS_ECORRUPT, "secret certificate %s: its secret key is missing or "
                      "does not belong to its public key", secret);
        goto fail;
    }
    snprintf (path, sizeof path, "%s/public/%s.cert", dir, stem);
    public_cert = s_load (path, path, "public certificate", err);
    if (!public_cert)
        goto fail;
    if (strcmp (zcert_public_txt (public_cert), zcert_public_txt (self->cert)) != 0) {
        ps_error_set (err, PS_EINVAL, "%s's secret certificate %s does not match its public "
                      "certificate %s: the key directory mixes two clusters' keys", task,
                      secret, path);
        goto fail;
    }
    zcert_destroy (&public_cert);
    //  The data plane the keys were made for: a PLAIN one needs this
    //  task's password, or, for a server, every task's. Keys of a CurveZMQ
    //  data plane have them too, for the same-host ipc connections, unless
    //  they were made before they did; a password file that is there must
    //  be private all the same.
    const char *plane = zcert_meta (self->cert, S_PLANE_KEY);
    self->plain = plane && strcmp (plane, "plain") == 0;
    bool server = strncmp (task, "ps:", 3) == 0;
    snprintf (path, sizeof path, "%s/passwords", dir);
    if (server && (self->plain || access (path, F_OK) == 0)) {
        if (s_check_passwords (path, task, err))
            goto fail;
        snprintf (self->passwords, sizeof self->passwords, "%s", path);
    }
    //  A task's own password, which a server needs only to connect to
    //  another server (as a client).
    snprintf (path, sizeof path, "%s/%s.password", dir, stem);
    if (((self->plain && !server) || access (path, F_OK) == 0)
    &&  s_read_token (self, dir, stem, err))
        goto fail;
    //  One ZAP handler per process, on one trust directory.
    pthread_mutex_lock (&s_auth_lock);
    if (s_auth_refs > 0 && strcmp (s_auth_dir, self->public_dir) != 0) {
        pthread_mutex_unlock (&s_auth_lock);
        ps_error_set (err, PS_EINVAL, "this process already trusts %s; it cannot also trust "
                      "%s", s_auth_dir, self->public_dir);
        goto fail;
    }
    if (s_auth_refs == 0) {
        ps_curve_context ();
        //  zauth's thread must never take a signal meant for the process
        //  (a SIGTERM it took would kill the process, since only the
        //  threads that read the signalfd block it): it starts with every
        //  signal blocked, whenever the caller blocks its own.
        sigset_t all, old;
        sigfillset (&all);
        pthread_sigmask (SIG_BLOCK, &all, &old);
        s_auth = zactor_new (zauth, NULL);
        pthread_sigmask (SIG_SETMASK, &old, NULL);
        if (!s_auth
        ||  zstr_sendx (s_auth, "CURVE", self->public_dir, NULL) != 0
        ||  zsock_wait (s_auth) != 0) {
            zactor_destroy (&s_auth);
            pthread_mutex_unlock (&s_auth_lock);
            ps_error_set (err, PS_EIO, "cannot start the authenticator (zauth)");
            goto fail;
        }
        snprintf (s_auth_dir, sizeof s_auth_dir, "%s", self->public_dir);
    }
    //  A server checks its peers' passwords too: a PLAIN data plane's, or
    //  its same-host ipc connections'.
    if (*self->passwords
    &&  (zstr_sendx (s_auth, "PLAIN", self->passwords, NULL) != 0 || zsock_wait (s_auth) != 0)) {
        if (s_auth_refs == 0)
            zactor_destroy (&s_auth);
        pthread_mutex_unlock (&s_auth_lock);
        ps_error_set (err, PS_EIO, "cannot give the authenticator (zauth) %s", self->passwords);
        goto fail;
    }
    if (self->plain)
        ps_warn ("the cluster's data plane is PLAIN: pushes and pulls are authenticated by "
                 "per-task passwords sent in the clear, and are not encrypted; use it only on "
                 "a network no one else can reach or watch (README.md, \"Security\")");
    s_auth_refs++;
    pthread_mutex_unlock (&s_auth_lock);
    return self;
fail:
    zcert_destroy (&public_cert);
    zcert_destroy (&self->cert);
    zhashx_destroy (&self->refused);
    free (self);
    return NULL;
}

int
ps_curve_open (const char *keys_dir, bool insecure, const char *task, ps_curve_t **curve,
               ps_error_t *err)
{
    *curve = NULL;
    //  The environment names the keys where a command line is awkward to
    //  change (containers, scripts); the command line wins over it.
    const char *env = getenv ("PS_KEYS");
    if (!keys_dir && !insecure && env && *env)
        keys_dir = env;
    if (keys_dir && insecure)
        return ps_error_set (err, PS_EINVAL, "--keys and --insecure contradict each other: a "
                             "cluster is secured or it is not");
    if (insecure) {
        ps_warn ("running with --insecure: no peer is authenticated and nothing is encrypted, "
                 "so any process that reaches this one's ports can read the model, change it "
                 "or stop the run (see README.md, \"Security\")");
        return PS_OK;
    }
    if (!keys_dir)
        return ps_error_set (err, PS_EINVAL, "the cluster is secured with CurveZMQ: pass --keys "
                             "DIR (or set PS_KEYS), a directory holding public/ and %s's secret "
                             "certificate (make a cluster's with `coordinator keygen`), or "
                             "--insecure (see README.md, \"Security\")", task);
    *curve = ps_curve_new (keys_dir, task, err);
    return *curve ? PS_OK : err ? err->code : PS_EINVAL;
}

void
ps_curve_destroy (ps_curve_t **self_p)
{
    assert (self_p);
    ps_curve_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock (&s_auth_lock);
    if (--s_auth_refs == 0)
        zactor_destroy (&s_auth);
    pthread_mutex_unlock (&s_auth_lock);
    zcert_destroy (&self->cert);
    zhashx_destroy (&self->refused);
    free (self);
    *self_p = NULL;
}

const char *
ps_curve_task (ps_curve_t *self)
{
    assert (self);
    return self->task;
}

int
ps_curve_server (ps_curve_t *self, void *socket, ps_error_t *err)
{
    assert (self);
    int on = 1;
    if (zmq_setsockopt (socket, ZMQ_CURVE_SERVER, &on, sizeof on) != 0
    ||  zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, zcert_secret_key (self->cert), 32) != 0
    ||  zmq_setsockopt (socket, ZMQ_ZAP_DOMAIN, S_DOMAIN, strlen (S_DOMAIN)) != 0)
        return ps_error_set (err, PS_EIO, "CURVE server options: %s", zmq_strerror (errno));
    return PS_OK;
}

int
ps_curve_client (ps_curve_t *self, void *socket, const char *server_task, ps_error_t *err)
{
    assert (self);
    char stem [PS_CURVE_TASK_MAX];
    if (s_stem (server_task, stem, sizeof stem, err))
        return PS_EINVAL;
    char path [PATH_MAX + PS_CURVE_TASK_MAX + 8];
    snprintf (path, sizeof path, "%s/%s.cert", self->public_dir, stem);
    zcert_t *server = s_load (path, path, "public certificate", err);
    if (!server)
        return PS_ENOTFOUND;
    int rc = PS_OK;
    if (zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, zcert_public_key (server), 32) != 0
    ||  zmq_setsockopt (socket, ZMQ_CURVE_PUBLICKEY, zcert_public_key (self->cert), 32) != 0
    ||  zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, zcert_secret_key (self->cert), 32) != 0)
        rc = ps_error_set (err, PS_EIO, "CURVE client options: %s", zmq_strerror (errno));
    zcert_destroy (&server);
    return rc;
}

bool
ps_curve_plain (ps_curve_t *self)
{
    assert (self);
    return self->plain;
}

//  Make socket a PLAIN server whose peers zauth checks against the
//  passwords file.
static int
s_plain_server (void *socket, ps_error_t *err)
{
    int on = 1;
    if (zmq_setsockopt (socket, ZMQ_PLAIN_SERVER, &on, sizeof on) != 0
    ||  zmq_setsockopt (socket, ZMQ_ZAP_DOMAIN, S_DOMAIN, strlen (S_DOMAIN)) != 0)
        return ps_error_set (err, PS_EIO, "PLAIN server options: %s", zmq_strerror (errno));
    return PS_OK;
}

//  Make socket a PLAIN client that proves this task by its password.
static int
s_plain_client (ps_curve_t *self, void *socket, ps_error_t *err)
{
    if (zmq_setsockopt (socket, ZMQ_PLAIN_USERNAME, self->task, strlen (self->task)) != 0
    ||  zmq_setsockopt (socket, ZMQ_PLAIN_PASSWORD, self->token, strlen (self->token)) != 0)
        return ps_error_set (err, PS_EIO, "PLAIN client options: %s", zmq_strerror (errno));
    return PS_OK;
}

int
ps_curve_data_server (ps_curve_t *self, void *socket, ps_error_t *err)
{
    assert (self);
    return self->plain ? s_plain_server (socket, err) : ps_curve_server (self, socket, err);
}

int
ps_curve_data_client (ps_curve_t *self, void *socket, const char *server_task, ps_error_t *err)
{
    assert (self);
    return self->plain ? s_plain_client (self, socket, err)
                       : ps_curve_client (self, socket, server_task, err);
}

bool
ps_curve_local_serves (ps_curve_t *self)
{
    assert (self);
    return !self->plain && *self->passwords;
}

bool
ps_curve_local_connects (ps_curve_t *self)
{
    assert (self);
    return !self->plain && *self->token;
}

int
ps_curve_local_server (ps_curve_t *self, void *socket, ps_error_t *err)
{
    assert (self && ps_curve_local_serves (self));
    return s_plain_server (socket, err);
}

int
ps_curve_local_client (ps_curve_t *self, void *socket, ps_error_t *err)
{
    assert (self && ps_curve_local_connects (self));
    return s_plain_client (self, socket, err);
}

const char *
ps_curve_data_task (const char *user_id, const char *cert_task)
{
    //  A Z85 key is 40 characters, and s_stem wants a known role of
    //  under 16 before a colon and a number after it: no key passes.
    char stem [PS_CURVE_TASK_MAX];
    return user_id && s_stem (user_id, stem, sizeof stem, NULL) == PS_OK ? user_id : cert_task;
}

const char *
ps_curve_peer_task (zmq_msg_t *frame)
{
    //  zmq_msg_gets sets errno EINVAL for a property the message lacks,
    //  which is every property on an unsecured socket.
    return zmq_msg_gets (frame, PS_CURVE_PEER_TASK);
}

const char *
ps_curve_peer_key (zmq_msg_t *frame)
{
    const char *key = zmq_msg_gets (frame, PS_CURVE_PEER_KEY);
    return key ? key : "";
}

bool
ps_curve_task_is (const char *peer, const char *role)
{
    size_t len = strlen (role);
    return peer && strncmp (peer, role, len) == 0 && peer [len] == ':';
}

bool
ps_curve_first_refusal (ps_curve_t *self, const char *key)
{
    assert (self);
    if (zhashx_lookup (self->refused, key))
        return false;
    if (zhashx_size (self->refused) < S_MAX_REFUSED)
        zhashx_insert (self->refused, key, (void *) "refused");
    return true;
}
