//  The listening endpoint and its connections; see ps_listener.h.

#include "ps_listener.h"
#include "ps_log.h"
#include "ps_parse.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <zmq.h>

//  Descriptors kept free for everything but connections: snapshot and
//  restore files, the link to the coordinator, ZeroMQ's own, and the
//  connections accepted in a burst before the monitor's events are read.
#define S_FD_RESERVE  32

//  Below this many connections under the limit, the server warns at start.
#define S_FEW_CONNECTIONS  16

typedef struct {
    int fd;
    bool closing;               //  shut down; its DISCONNECTED is to come
} s_conn_t;

struct _ps_listener_t {
    void *socket;               //  watched, not owned
    void *events;               //  PAIR: the monitor's events
    char endpoint [256];
    char monitor [64];          //  the monitor's inproc endpoint
    DIR *fds;                   //  /proc/self/fd, open for good (see s_count_others)
    //  The local address of every connection accepted through the
    //  endpoint: a tcp port (on whichever of the host's addresses), or an
    //  ipc path (an abstract name with its NUL first).
    sa_family_t family;         //  AF_INET (tcp, IPv4 or IPv6) or AF_UNIX (ipc)
    in_port_t port;             //  tcp, host byte order
    char path [sizeof ((struct sockaddr_un *) 0)->sun_path];
    size_t path_len;            //  ipc
    //  The same-host ipc path bound beside a tcp endpoint (ps_host.h), or
    //  none: its connections count as the endpoint's.
    char also [sizeof ((struct sockaddr_un *) 0)->sun_path];
    size_t also_len;
    long limit;                 //  RLIMIT_NOFILE, soft
    size_t high;                //  most connections kept
    s_conn_t *conns;            //  accepted and not yet disconnected, oldest first
    size_t nconns, cap;
    size_t live;                //  of them, those not being shut down
    bool refusing;              //  in an episode of shutting new ones down
    uint64_t refused;           //  connections shut down in this episode
};

//  Raise the soft limit on descriptors to the hard one; returns the soft
//  limit in force.
static long
s_raise_limit (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0) {
        ps_warn ("getrlimit (RLIMIT_NOFILE): %s", strerror (errno));
        return 1024;
    }
    if (limit.rlim_cur < limit.rlim_max) {
        rlim_t before = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit (RLIMIT_NOFILE, &limit) == 0)
            ps_info ("file-descriptor limit raised from %llu to %llu",
                     (unsigned long long) before, (unsigned long long) limit.rlim_max);
        else {
            ps_warn ("cannot raise the file-descriptor limit from %llu to %llu: %s",
                     (unsigned long long) before, (unsigned long long) limit.rlim_max,
                     strerror (errno));
            limit.rlim_cur = before;
        }
    }
    return limit.rlim_cur > (rlim_t) INT32_MAX ? INT32_MAX : (long) limit.rlim_cur;
}

//  Learn from the endpoint bound the local address of its connections.
static int
s_learn_address (ps_listener_t *self, ps_error_t *err)
{
    const char *tcp = "tcp://", *ipc = "ipc://";
    if (strncmp (self->endpoint, tcp, strlen (tcp)) == 0) {
        //  ZeroMQ writes the port last: "tcp://[::1]:5555".
        const char *colon = strrchr (self->endpoint, ':');
        uint64_t port;
        if (ps_parse_uint ("port", colon + 1, 1, 65535, &port, err) != 0)
            return ps_error_prefix (err, PS_EINVAL, "bound %s", self->endpoint);
        self->family = AF_INET;
        self->port = (in_port_t) port;
        return PS_OK;
    }
    const char *path = self->endpoint + strlen (ipc);
    if (strncmp (self->endpoint, ipc, strlen (ipc)) == 0 && strlen (path) < sizeof self->path) {
        self->family = AF_UNIX;
        self->path_len = strlen (path);
        memcpy (self->path, path, self->path_len);
        if (self->path [0] == '@')
            self->path [0] = 0;
        return PS_OK;
    }
    return ps_error_set (err, PS_EINVAL, "bound %s: expected tcp://HOST:PORT or ipc://PATH "
                         "to count its connections", self->endpoint);
}

//  Whether descriptor fd is open and not a connection accepted through the
//  endpoint: not a socket, a listening one, or one with another local
//  address. A descriptor closed meanwhile is neither.
static bool
s_is_other (ps_listener_t *self, int fd)
{
    union {
        struct sockaddr any;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
    } addr;
    socklen_t len = sizeof addr;
    int listening = 0;
    socklen_t size = sizeof listening;
    //  Not a socket, or closed meanwhile: ZeroMQ's I/O thread closes
    //  connections while they are counted, between any two calls.
    if (getsockname (fd, &addr.any, &len) != 0
    ||  getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0)
        return errno != EBADF;
    if (listening)
        return true;
    if (self->family == AF_INET && addr.any.sa_family == AF_INET)
        return ntohs (addr.in.sin_port) != self->port;
    if (self->family == AF_INET && addr.any.sa_family == AF_INET6)
        return ntohs (addr.in6.sin6_port) != self->port;
    if (addr.any.sa_family == AF_UNIX) {
        //  A path's length counts its terminating NUL; an abstract name,
        //  which starts with one, is as long as it was bound.
        size_t name_len = len - offsetof (struct sockaddr_un, sun_path);
        if (name_len > 0 && addr.un.sun_path [0])
            name_len = strnlen (addr.un.sun_path, name_len);
        bool ours = (self->family == AF_UNIX && name_len == self->path_len
                     && memcmp (addr.un.sun_path, self->path, name_len) == 0)
                 || (self->also_len && name_len == self->also_len
                     && memcmp (addr.un.sun_path, self->also, name_len) == 0);
        return !ours;
    }
    return true;
}

//  The descriptors open that are not connections accepted through the
//  endpoint, or -1. Each descriptor is asked what it is, so that the count
//  holds however far the monitor's events lag behind ZeroMQ's I/O thread,
//  which accepts and closes connections all the while: counting all of
//  them less the connections reported so far would take those accepted
//  but not yet reported for something else. The directory stays open
//  because counting is needed most when descriptors have run out.
static long
s_count_others (ps_listener_t *self)
{
    rewinddir (self->fds);
    long count = 0;
    while (true) {
        errno = 0;
        struct dirent *entry = readdir (self->fds);
        if (!entry)
            return errno ? -1 : count;
        if (entry->d_name [0] != '.')
            count += s_is_other (self, atoi (entry->d_name));
    }
}

//  Set the high-water mark from the descriptors open now that are not
//  connections. Returns 0, or -1 (the mark unchanged) when they cannot be
//  counted.
static int
s_measure (ps_listener_t *self)
{
    long others = s_count_others (self);
    if (others < 0)
        return -1;
    long room = self->limit - others - S_FD_RESERVE;
    self->high = room > 0 ? (size_t) room : 1;
    return 0;
}

ps_listener_t *
ps_listener_new (void *ctx, void *socket, const char *endpoint, ps_error_t *err)
{
    assert (ctx && socket && endpoint);
    ps_listener_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->socket = socket;
    self->limit = s_raise_limit ();
    if (!(self->fds = opendir ("/proc/self/fd"))) {
        ps_error_set (err, PS_EIO, "cannot open /proc/self/fd to count the descriptors "
                      "open: %s", strerror (errno));
        ps_listener_destroy (&self);
        return NULL;
    }
    //  The monitor's endpoint lives in the socket's context, which may
    //  outlive this listener (ps_curve_context): a name made from the
    //  object's address could be an earlier, destroyed listener's, still
    //  bound there, so every listener of the process gets a number of its
    //  own.
    static atomic_uint_fast64_t serial;
    snprintf (self->monitor, sizeof self->monitor, "inproc://ps-listener-%" PRIuFAST64,
              atomic_fetch_add (&serial, 1));
    //  The monitor is connected before the bind, so that no connection
    //  goes uncounted, and with no high-water mark: ZeroMQ drops the
    //  events a full queue has no room for, and a lost event would leave
    //  the count wrong for good. The events of one connection arrive in
    //  order from ZeroMQ's one I/O thread (the default).
    int linger = 0, hwm = 0;
    if (zmq_socket_monitor (socket, self->monitor, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED
                                                   | ZMQ_EVENT_ACCEPT_FAILED) != 0
    ||  !(self->events = zmq_socket (ctx, ZMQ_PAIR))
    ||  zmq_setsockopt (self->events, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  zmq_setsockopt (self->events, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0
    ||  zmq_connect (self->events, self->monitor) != 0) {
        ps_error_set (err, PS_EIO, "cannot monitor the connections of %s: %s", endpoint,
                      zmq_strerror (errno));
        ps_listener_destroy (&self);
        return NULL;
    }
    if (zmq_bind (socket, endpoint) != 0) {
        ps_error_set (err, PS_EIO, "cannot bind %s: %s", endpoint, zmq_strerror (errno));
        ps_listener_destroy (&self);
        return NULL;
    }
    size_t len = sizeof self->endpoint;
    if (zmq_getsockopt (socket, ZMQ_LAST_ENDPOINT, self->endpoint, &len) != 0) {
        ps_error_set (err, PS_EIO, "ZMQ_LAST_ENDPOINT: %s", zmq_strerror (errno));
        ps_listener_destroy (&self);
        return NULL;
    }
    if (s_learn_address (self, err) != 0) {
        ps_listener_destroy (&self);
        return NULL;
    }
    if (s_measure (self) != 0) {
        ps_error_set (err, PS_EIO, "cannot count the descriptors open in /proc/self/fd: %s",
                      strerror (errno));
        ps_listener_destroy (&self);
        return NULL;
    }
    if (self->high < S_FEW_CONNECTIONS)
        ps_warn ("only %zu connections fit under the file-descriptor limit of %ld",
                 self->high, self->limit);
    else
        ps_debug ("up to %zu connections under the file-descriptor limit of %ld", self->high,
                  self->limit);
    return self;
}

void
ps_listener_destroy (ps_listener_t **self_p)
{
    assert (self_p);
    ps_listener_t *self = *self_p;
    if (!self)
        return;
    if (zmq_socket_monitor (self->socket, NULL, 0) != 0)
        ps_warn ("stopping the connection monitor: %s", zmq_strerror (errno));
    if (self->events)
        zmq_close (self->events);
    if (self->fds)
        closedir (self->fds);
    free (self->conns);
    free (self);
    *self_p = NULL;
}

int
ps_listener_bind_also (ps_listener_t *self, const char *ipc, ps_error_t *err)
{
    assert (self && !self->also_len);
    const char *path = ipc + strlen ("ipc://");
    if (strncmp (ipc, "ipc://", 6) != 0 || !*path || path [0] == '@'
    ||  strlen (path) >= sizeof self->also)
        return ps_error_set (err, PS_EINVAL, "cannot bind %s beside %s: expected ipc://PATH of "
                             "at most %zu bytes", ipc, self->endpoint, sizeof self->also - 1);
    if (zmq_bind (self->socket, ipc) != 0)
        return ps_error_set (err, PS_EIO, "cannot bind %s: %s", ipc, zmq_strerror (errno));
    self->also_len = strlen (path);
    memcpy (self->also, path, self->also_len);
    //  Its connections are counted from now on; the mark stays as it was,
    //  since the socket bound costs no more than the one descriptor.
    return PS_OK;
}

const char *
ps_listener_endpoint (ps_listener_t *self)
{
    assert (self);
    return self->endpoint;
}

void *
ps_listener_events (ps_listener_t *self)
{
    assert (self);
    return self->events;
}

static void
s_accepted (ps_listener_t *self, int fd)
{
    if (self->nconns == self->cap) {
        self->cap = self->cap ? 2 * self->cap : 64;
        self->conns = realloc (self->conns, self->cap * sizeof *self->conns);
        if (!self->conns)
            abort ();
    }
    self->conns [self->nconns++] = (s_conn_t) { fd, false };
    self->live++;
}

static void
s_disconnected (ps_listener_t *self, int fd)
{
    for (size_t i = self->nconns; i-- > 0; )
        if (self->conns [i].fd == fd) {
            if (!self->conns [i].closing)
                self->live--;
            memmove (&self->conns [i], &self->conns [i + 1],
                     (self->nconns - i - 1) * sizeof *self->conns);
            self->nconns--;
            return;
        }
}

//  Read one event; returns 1, 0 when there is none, or -1 on an error.
static int
s_read_event (ps_listener_t *self, uint16_t *event, uint32_t *value)
{
    zmq_msg_t frame;
    zmq_msg_init (&frame);
    if (zmq_msg_recv (&frame, self->events, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close (&frame);
        return errno == EAGAIN ? 0 : -1;
    }
    //  A monitor event is a frame of 6 bytes (the event, a value), then a
    //  frame with the endpoint, which is not needed here.
    bool valid = zmq_msg_size (&frame) == 6 && zmq_msg_more (&frame);
    if (valid) {
        memcpy (event, zmq_msg_data (&frame), sizeof *event);
        memcpy (value, (char *) zmq_msg_data (&frame) + 2, sizeof *value);
    }
    while (zmq_msg_more (&frame))
        if (zmq_msg_recv (&frame, self->events, 0) < 0) {
            zmq_msg_close (&frame);
            return -1;
        }
    zmq_msg_close (&frame);
    return valid ? 1 : 0;
}

int
ps_listener_handle (ps_listener_t *self, ps_error_t *err)
{
    assert (self);
    //  Every waiting event is taken before any connection is shut down, so
    //  that the descriptors listed are the connections open now.
    bool exhausted = false;
    uint16_t event;
    uint32_t value;
    int got;
    while ((got = s_read_event (self, &event, &value)) == 1) {
        if (event == ZMQ_EVENT_ACCEPTED)
            s_accepted (self, (int) value);
        else
        if (event == ZMQ_EVENT_DISCONNECTED)
            s_disconnected (self, (int) value);
        else
        if (event == ZMQ_EVENT_ACCEPT_FAILED && (value == EMFILE || value == ENFILE))
            exhausted = true;
    }
    if (got < 0)
        return ps_error_set (err, PS_EIO, "reading the connection monitor of %s: %s",
                             self->endpoint, zmq_strerror (errno));
    //  What is not a connection is counted again when descriptors ran out
    //  and before any connection is shut down for the mark. A burst of
    //  connections runs them out (ZeroMQ accepts as many as there are
    //  descriptors free before their events are read here), but so does
    //  something else holding more than it did; and the server opens
    //  descriptors after its listener first counted (its same-host socket,
    //  its threads' mailboxes, files), which connections that come one at
    //  a time, never making accept fail, would not have counted.
    if (exhausted || self->live > self->high) {
        size_t before = self->high;
        if (s_measure (self) != 0)
            ps_warn ("cannot count the descriptors open in /proc/self/fd: %s", strerror (errno));
        else
        if (exhausted && self->high < before)
            ps_warn ("descriptors ran out with %zu connections open: keeping at most %zu "
                     "from now on", self->nconns, self->high);
    }
    //  The newest go first: the peers connected before keep their service.
    for (size_t i = self->nconns; i-- > 0 && self->live > self->high; ) {
        s_conn_t *conn = &self->conns [i];
        if (conn->closing)
            continue;
        //  The descriptor is ZeroMQ's: shutting the connection down makes
        //  it see the end of the stream and close it.
        if (shutdown (conn->fd, SHUT_RDWR) != 0 && errno != ENOTCONN)
            ps_debug ("shutdown of connection %d: %s", conn->fd, strerror (errno));
        conn->closing = true;
        self->live--;
        self->refused++;
        if (!self->refusing)
            ps_warn ("%zu connections, near the file-descriptor limit of %ld: shutting new "
                     "connections down until some close", self->live, self->limit);
        self->refusing = true;
    }
    size_t margin = self->high / 16 + 1;
    if (self->refusing && self->live + margin <= self->high) {
        ps_info ("%zu connections open: keeping new ones again (%llu shut down meanwhile)",
                 self->live, (unsigned long long) self->refused);
        self->refusing = false;
        self->refused = 0;
    }
    return PS_OK;
}
