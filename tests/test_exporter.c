//  Unit tests for the coordinator's Prometheus endpoint
//  (coordinator/ps_exporter.c), over real HTTP on loopback: an empty text
//  before the first publish, the published text with the exposition
//  format's content type, a later publish replacing it, 404 for another
//  path, 405 for another method (its body read, not left on the
//  connection), and the errors of an address that is not one and a port
//  in use.

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ps_exporter.h"

//  Send request to 127.0.0.1:port and return the whole answer (the server
//  closes the connection: the request says so), or fail the case.
static char *
s_http (int port, const char *request)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    //  A hung server fails the case instead of the suite's time limit.
    struct timeval timeout = { .tv_sec = 30 };
    assert_int_equal (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout), 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    size_t len = strlen (request);
    assert_int_equal (send (fd, request, len, 0), (ssize_t) len);
    size_t size = 0, cap = 4096;
    char *answer = malloc (cap);
    assert_non_null (answer);
    ssize_t n;
    while ((n = recv (fd, answer + size, cap - size - 1, 0)) > 0) {
        size += (size_t) n;
        if (cap - size < 2) {
            cap *= 2;
            answer = realloc (answer, cap);
            assert_non_null (answer);
        }
    }
    assert_int_equal (n, 0);
    answer [size] = 0;
    close (fd);
    return answer;
}

//  The body of an answer: what follows the blank line.
static const char *
s_body (const char *answer)
{
    const char *blank = strstr (answer, "\r\n\r\n");
    assert_non_null (blank);
    return blank + 4;
}

static void
test_serves_what_is_published (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_exporter_t *exporter = ps_exporter_new ("127.0.0.1", 0, &err);
    assert_non_null (exporter);
    int port = ps_exporter_port (exporter);
    assert_true (port > 0);
    const char *get = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

    char *answer = s_http (port, get);
    assert_non_null (strstr (answer, "HTTP/1.1 200"));
    assert_string_equal (s_body (answer), "");
    free (answer);

    char *text = strdup ("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n");
    ps_exporter_publish (exporter, text);
    answer = s_http (port, get);
    assert_non_null (strstr (answer, "HTTP/1.1 200"));
    assert_non_null (strstr (answer, "text/plain; version=0.0.4"));
    assert_string_equal (s_body (answer), "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n");
    free (answer);

    ps_exporter_publish (exporter, strdup ("a_total 2\n"));
    answer = s_http (port, get);
    assert_string_equal (s_body (answer), "a_total 2\n");
    free (answer);

    answer = s_http (port, "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_non_null (strstr (answer, "HTTP/1.1 404"));
    assert_non_null (strstr (s_body (answer), "/metrics"));
    free (answer);

    answer = s_http (port, "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                           "Content-Length: 5\r\n\r\nhello");
    assert_non_null (strstr (answer, "HTTP/1.1 405"));
    free (answer);

    ps_exporter_destroy (&exporter);
    assert_null (exporter);
    ps_exporter_destroy (&exporter);
}

static void
test_refusals (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    assert_null (ps_exporter_new ("localhost", 0, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "\"localhost\": expected an IPv4 or IPv6 address"));

    ps_exporter_t *first = ps_exporter_new ("127.0.0.1", 0, &err);
    assert_non_null (first);
    char port [16];
    snprintf (port, sizeof port, "port %d", ps_exporter_port (first));
    assert_null (ps_exporter_new ("127.0.0.1", ps_exporter_port (first), &err));
    assert_int_equal (err.code, PS_EIO);
    assert_non_null (strstr (err.msg, port));
    assert_non_null (strstr (err.msg, "in use"));
    ps_exporter_destroy (&first);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_serves_what_is_published),
        cmocka_unit_test (test_refusals),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
