//  The coordinator's Prometheus endpoint (see ps_exporter.h).

#include "ps_exporter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "ps_log.h"

//  How long an idle connection is kept, and how many are served at once:
//  a scraper or two, and a person with curl.
#define S_CONNECTION_TIMEOUT_S  10
#define S_CONNECTIONS           16

struct _ps_exporter_t {
    struct MHD_Daemon *daemon;
    int fd;                     //  the listening socket, ours to close
    int port;
    pthread_mutex_t lock;       //  guards text
    char *text;
};

static const char s_content_type [] = "text/plain; version=0.0.4; charset=utf-8";

//  Queue a response of body (copied, or owned when own is true) with status.
static enum MHD_Result
s_respond (struct MHD_Connection *connection, unsigned status, char *body, size_t size,
           bool own)
{
    struct MHD_Response *response = MHD_create_response_from_buffer (
        size, body, own ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!response) {
        if (own)
            free (body);
        return MHD_NO;
    }
    enum MHD_Result rc = MHD_add_response_header (response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                                  s_content_type);
    if (rc == MHD_YES)
        rc = MHD_queue_response (connection, status, response);
    MHD_destroy_response (response);
    return rc;
}

//  A request, on libmicrohttpd's thread: GET (or HEAD) /metrics gets the
//  latest text, any other path 404, any other method 405.
static enum MHD_Result
s_handle (void *arg, struct MHD_Connection *connection, const char *url, const char *method,
          const char *version, const char *upload_data, size_t *upload_data_size,
          void **state)
{
    (void) version;
    (void) upload_data;
    ps_exporter_t *self = arg;
    //  The first call for a request comes before its body, and the calls
    //  after it bring the body in parts: a body (none is expected) is read
    //  and dropped, and the request answered on the last call, which has
    //  no data.
    if (!*state) {
        *state = self;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    static char not_found [] = "not found: the metrics are at /metrics\n";
    static char not_allowed [] = "method not allowed: use GET\n";
    if (strcmp (method, MHD_HTTP_METHOD_GET) != 0 && strcmp (method, MHD_HTTP_METHOD_HEAD) != 0)
        return s_respond (connection, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
                          strlen (not_allowed), false);
    if (strcmp (url, "/metrics") != 0)
        return s_respond (connection, MHD_HTTP_NOT_FOUND, not_found, strlen (not_found), false);
    if (pthread_mutex_lock (&self->lock) != 0)
        abort ();
    char *copy = strdup (self->text ? self->text : "");
    if (pthread_mutex_unlock (&self->lock) != 0)
        abort ();
    if (!copy)
        return MHD_NO;
    return s_respond (connection, MHD_HTTP_OK, copy, strlen (copy), true);
}

//  A listening socket on addr:port, or -1 with err set.
static int
s_listen (const char *addr, int port, int *bound_port, ps_error_t *err)
{
    struct sockaddr_storage storage;
    memset (&storage, 0, sizeof storage);
    struct sockaddr_in *in4 = (struct sockaddr_in *) &storage;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &storage;
    socklen_t len;
    if (inet_pton (AF_INET, addr, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons ((uint16_t) port);
        len = sizeof *in4;
    }
    else
    if (inet_pton (AF_INET6, addr, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons ((uint16_t) port);
        len = sizeof *in6;
    }
    else {
        ps_error_set (err, PS_EINVAL, "--metrics-addr \"%s\": expected an IPv4 or IPv6 "
                      "address, such as 127.0.0.1 or ::1", addr);
        return -1;
    }
    int fd = socket (storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;
    if (fd < 0
    ||  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0
    ||  bind (fd, (struct sockaddr *) &storage, len) != 0
    ||  listen (fd, S_CONNECTIONS) != 0
    ||  getsockname (fd, (struct sockaddr *) &storage, &len) != 0) {
        ps_error_set (err, PS_EIO, "the metrics endpoint cannot listen on %s port %d: %s",
                      addr, port, strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    *bound_port = ntohs (storage.ss_family == AF_INET ? in4->sin_port : in6->sin6_port);
    return fd;
}

ps_exporter_t *
ps_exporter_new (const char *addr, int port, ps_error_t *err)
{
    ps_exporter_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    if ((self->fd = s_listen (addr, port, &self->port, err)) < 0) {
        free (self);
        return NULL;
    }
    if (pthread_mutex_init (&self->lock, NULL) != 0)
        abort ();
    //  MHD_USE_ITC lets ps_exporter_destroy take the socket back
    //  (MHD_quiesce_daemon), so that it is closed once, here.
    self->daemon = MHD_start_daemon (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL
                                     | MHD_USE_ITC, 0, NULL,
                                     NULL, s_handle, self,
                                     MHD_OPTION_LISTEN_SOCKET, self->fd,
                                     MHD_OPTION_CONNECTION_TIMEOUT,
                                     (unsigned) S_CONNECTION_TIMEOUT_S,
                                     MHD_OPTION_CONNECTION_LIMIT, (unsigned) S_CONNECTIONS,
                                     MHD_OPTION_END);
    if (!self->daemon) {
        ps_error_set (err, PS_EIO, "the metrics endpoint on %s port %d cannot start its HTTP "
                      "server (libmicrohttpd)", addr, self->port);
        close (self->fd);
        pthread_mutex_destroy (&self->lock);
        free (self);
        return NULL;
    }
    return self;
}

void
ps_exporter_destroy (ps_exporter_t **self_p)
{
    ps_exporter_t *self = *self_p;
    if (!self)
        return;
    //  Quiesced, the daemon leaves the listening socket to us.
    MHD_quiesce_daemon (self->daemon);
    MHD_stop_daemon (self->daemon);
    if (close (self->fd) != 0)
        ps_warn ("closing the metrics endpoint's socket: %s", strerror (errno));
    pthread_mutex_destroy (&self->lock);
    free (self->text);
    free (self);
    *self_p = NULL;
}

int
ps_exporter_port (const ps_exporter_t *self)
{
    return self->port;
}

void
ps_exporter_publish (ps_exporter_t *self, char *text)
{
    if (pthread_mutex_lock (&self->lock) != 0)
        abort ();
    char *old = self->text;
    self->text = text;
    if (pthread_mutex_unlock (&self->lock) != 0)
        abort ();
    free (old);
}
