//  Task addresses and bind endpoints; see ps_address.h.

#include "ps_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ps_log.h"
#include "ps_parse.h"

//  A DNS name has at most 253 bytes; an IPv6 literal fewer.
#define S_HOST_MAX  254

//  A "host:port" split in two: the host without its brackets.
typedef struct {
    char host [S_HOST_MAX];
    bool bracketed;             //  an IPv6 literal, written in brackets
    const char *port;           //  the text after the colon
} s_hostport_t;

static const char s_forms [] = "expected \"host:port\", \"tcp://host:port\" or \"ipc://path\"";

static bool
s_starts (const char *text, const char *prefix)
{
    return strncmp (text, prefix, strlen (prefix)) == 0;
}

//  Split "host:port" or "[v6]:port".
static int
s_split (const char *text, s_hostport_t *hp, ps_error_t *err)
{
    const char *colon;
    const char *host = text;
    size_t host_len;
    hp->bracketed = text [0] == '[';
    if (hp->bracketed) {
        const char *close = strchr (text, ']');
        if (!close || close [1] != ':')
            return ps_error_set (err, PS_EINVAL, "expected \"[IPv6 address]:port\"");
        host = text + 1;
        host_len = (size_t) (close - host);
        colon = close + 1;
    }
    else {
        colon = strrchr (text, ':');
        if (!colon)
            return ps_error_set (err, PS_EINVAL, "no port (expected \"host:port\")");
        host_len = (size_t) (colon - text);
        if (memchr (text, ':', host_len))
            return ps_error_set (err, PS_EINVAL, "an IPv6 host is written in brackets, as in "
                                 "\"[::1]:2222\"");
    }
    if (host_len == 0)
        return ps_error_set (err, PS_EINVAL, "no host (expected \"host:port\")");
    if (host_len >= sizeof hp->host)
        return ps_error_set (err, PS_EINVAL, "the host has %zu bytes, expected at most %zu",
                             host_len, sizeof hp->host - 1);
    memcpy (hp->host, host, host_len);
    hp->host [host_len] = 0;
    hp->port = colon + 1;
    return PS_OK;
}

//  A DNS name: labels of 1..63 letters, digits, '-' (not first or last)
//  or '_' (compose and Kubernetes names), joined by dots, with at most a
//  final dot; not only digits, which would be a malformed IPv4 address.
static bool
s_dns_name (const char *host)
{
    size_t len = strlen (host);
    if (len == 0 || len > 253)
        return false;
    bool letters = false;
    const char *label = host;
    while (*label) {
        const char *end = label;
        while (*end && *end != '.') {
            char c = *end;
            bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            if (!alnum && c != '-' && c != '_')
                return false;
            letters = letters || !(c >= '0' && c <= '9');
            end++;
        }
        size_t n = (size_t) (end - label);
        if (n == 0 || n > 63 || label [0] == '-' || end [-1] == '-')
            return false;
        label = *end ? end + 1 : end;
    }
    return letters;
}

//  Check the host: an IP literal (IPv6 only in brackets), a DNS name, or
//  with star_ok "*" (every interface).
static int
s_check_host (const s_hostport_t *hp, bool star_ok, ps_error_t *err)
{
    unsigned char addr [sizeof (struct in6_addr)];
    if (hp->bracketed) {
        if (inet_pton (AF_INET6, hp->host, addr) != 1)
            return ps_error_set (err, PS_EINVAL, "host \"[%s]\" is not an IPv6 address",
                                 hp->host);
        return PS_OK;
    }
    if (star_ok && strcmp (hp->host, "*") == 0)
        return PS_OK;
    if (inet_pton (AF_INET, hp->host, addr) != 1 && !s_dns_name (hp->host))
        return ps_error_set (err, PS_EINVAL, "host \"%s\" is neither an IP address nor a DNS "
                             "name", hp->host);
    return PS_OK;
}

//  The IP address, as endpoint text ("10.0.0.1", "[fe80::1]"), that a
//  host name resolves to here; an IPv4 address when there is one.
static int
s_resolve (const char *host, char *ip, size_t len, ps_error_t *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *found;
    int rc = getaddrinfo (host, NULL, &hints, &found);
    if (rc != 0)
        return ps_error_set (err, PS_EINVAL, "host %s does not resolve (%s); the task binds "
                             "the address its name resolves to", host, gai_strerror (rc));
    const struct addrinfo *pick = found;
    for (const struct addrinfo *a = found; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    char text [INET6_ADDRSTRLEN];
    const void *addr = pick->ai_family == AF_INET
                     ? (const void *) &((const struct sockaddr_in *) pick->ai_addr)->sin_addr
                     : (const void *) &((const struct sockaddr_in6 *) pick->ai_addr)->sin6_addr;
    bool ok = inet_ntop (pick->ai_family, addr, text, sizeof text) != NULL;
    bool v6 = pick->ai_family == AF_INET6;
    freeaddrinfo (found);
    if (!ok)
        return ps_error_set (err, PS_EINVAL, "host %s: cannot print its address", host);
    int n = snprintf (ip, len, v6 ? "[%s]" : "%s", text);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "host %s: its address %s is too long", host, text);
    return PS_OK;
}

//  Write "tcp://HOST:PORT" to bind for a checked host and port: an IP
//  literal or "*" as given, localhost as 127.0.0.1, a name resolved.
static int
s_bind_tcp (const s_hostport_t *hp, char *buf, size_t len, ps_error_t *err)
{
    char host [S_HOST_MAX + 2];
    unsigned char addr [sizeof (struct in_addr)];
    bool resolved = false;
    if (hp->bracketed)
        snprintf (host, sizeof host, "[%s]", hp->host);
    else
    if (strcmp (hp->host, "*") == 0 || inet_pton (AF_INET, hp->host, addr) == 1)
        snprintf (host, sizeof host, "%s", hp->host);
    else
    if (strcmp (hp->host, "localhost") == 0)
        snprintf (host, sizeof host, "127.0.0.1");
    else {
        int rc = s_resolve (hp->host, host, sizeof host, err);
        if (rc)
            return rc;
        resolved = true;
    }
    int n = snprintf (buf, len, "tcp://%s:%s", host, hp->port);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "the endpoint tcp://%s:%s is longer than %zu bytes",
                             host, hp->port, len - 1);
    //  Debian maps a machine's own name to 127.0.1.1 unless told its
    //  address: a task bound there is out of its peers' reach, so say so.
    if (resolved && (s_starts (host, "127.") || strcmp (host, "[::1]") == 0))
        ps_warn ("host %s resolves to %s: binding %s, a loopback address, which only this "
                 "machine reaches", hp->host, host, buf);
    else
    if (resolved)
        ps_info ("host %s resolves to %s: binding %s", hp->host, host, buf);
    return PS_OK;
}

//  An ipc:// endpoint needs a path.
static int
s_check_ipc (const char *endpoint, ps_error_t *err)
{
    if (endpoint [strlen ("ipc://")] == 0)
        return ps_error_set (err, PS_EINVAL, "ipc:// needs a path (ipc:///run/ps/0.sock)");
    return PS_OK;
}

static int
s_copy (const char *endpoint, char *buf, size_t len, ps_error_t *err)
{
    int n = snprintf (buf, len, "%s", endpoint);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "longer than %zu bytes", len - 1);
    return PS_OK;
}

int
ps_address_check (const char *address, ps_error_t *err)
{
    if (s_starts (address, "ipc://"))
        return s_check_ipc (address, err);
    if (strstr (address, "://") && !s_starts (address, "tcp://"))
        return ps_error_set (err, PS_EINVAL, "%s", s_forms);
    s_hostport_t hp;
    uint64_t port;
    int rc = s_split (s_starts (address, "tcp://") ? address + strlen ("tcp://") : address,
                      &hp, err);
    if (rc == PS_OK)
        rc = s_check_host (&hp, false, err);
    if (rc == PS_OK)
        rc = ps_parse_uint ("port", hp.port, 1, 65535, &port, err);
    return rc;
}

int
ps_address_bind (const char *address, char *buf, size_t len, ps_error_t *err)
{
    if (s_starts (address, "ipc://"))
        return s_copy (address, buf, len, err);
    s_hostport_t hp;
    int rc = s_split (s_starts (address, "tcp://") ? address + strlen ("tcp://") : address,
                      &hp, err);
    return rc ? rc : s_bind_tcp (&hp, buf, len, err);
}

int
ps_address_bind_option (const char *endpoint, char *buf, size_t len, ps_error_t *err)
{
    if (s_starts (endpoint, "ipc://")) {
        int rc = s_check_ipc (endpoint, err);
        return rc ? rc : s_copy (endpoint, buf, len, err);
    }
    if (!s_starts (endpoint, "tcp://"))
        return ps_error_set (err, PS_EINVAL, "expected tcp://HOST:PORT or ipc://PATH");
    s_hostport_t hp;
    uint64_t port;
    int rc = s_split (endpoint + strlen ("tcp://"), &hp, err);
    if (rc == PS_OK)
        rc = s_check_host (&hp, true, err);
    if (rc == PS_OK && strcmp (hp.port, "*") != 0)
        rc = ps_parse_uint ("port", hp.port, 0, 65535, &port, err);
    return rc ? rc : s_bind_tcp (&hp, buf, len, err);
}
