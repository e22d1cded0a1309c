//  Task addresses: the "host:port" strings of a cluster spec (TF_CONFIG),
//  and the ZeroMQ endpoints that processes bind.
//
//  A task address is "host:port", or as a ps-cluster extension a ZeroMQ
//  endpoint "tcp://host:port" or "ipc://path". The host is a DNS name
//  (labels of letters, digits, '-' and '_'), an IPv4 literal, or an IPv6
//  literal in brackets ("[::1]:2222"); the port is a decimal number in
//  1..65535. Peers connect to an address as it is written, so a name is
//  resolved by ZeroMQ at each connection.
//
//  Binding never widens what was written. The process whose address it is
//  binds an IP literal as given, "localhost" as 127.0.0.1, and a name at
//  the address it resolves to here (logged), so a name binds one
//  interface, never all of them; a name that does not resolve is an
//  error. A --bind option is a ZeroMQ endpoint and may also say "*" for
//  every interface and 0 or "*" for a free port: both only when written.

#ifndef PS_ADDRESS_H_INCLUDED
#define PS_ADDRESS_H_INCLUDED

#include <stddef.h>

#include "ps_error.h"

//  Check a task address as described above. Returns 0, or PS_EINVAL with
//  a message saying what is wrong with it (the port and its range, the
//  host); the caller names where the address came from.
int ps_address_check (const char *address, ps_error_t *err);

//  The endpoint that the task with this (checked) address binds, into buf
//  (len bytes). Returns 0, or PS_EINVAL when a host name does not resolve
//  or buf is too small, with a message naming the host.
int ps_address_bind (const char *address, char *buf, size_t len, ps_error_t *err);

//  Check an endpoint given on the command line to bind, "tcp://HOST:PORT"
//  (HOST as for a task address or "*"; PORT 0..65535 or "*", where 0 and
//  "*" pick a free port) or "ipc://PATH", and write the endpoint to bind
//  into buf, a host name resolved as for ps_address_bind. Returns 0, or
//  PS_EINVAL with a message saying what is wrong; the caller names the
//  option.
int ps_address_bind_option (const char *endpoint, char *buf, size_t len, ps_error_t *err);

#endif
