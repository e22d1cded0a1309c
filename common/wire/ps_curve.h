//  CurveZMQ for the cluster's sockets: who this process is, whom it
//  trusts, and who an authenticated peer is.
//
//  Every process of a secured cluster has its own certificate: a CurveZMQ
//  key pair with metadata naming its task ("role" chief, ps, worker or
//  evaluator, and "task", such as "ps:1"). A key directory holds the
//  public certificates of the whole cluster in public/<role>-<index>.cert
//  and, beside public/, the secret certificates of the tasks that run from
//  it (<role>-<index>.cert_secret, mode 0600 or stricter). One command
//  makes a cluster's directory (ps_curve_keygen, `coordinator keygen`);
//  each process needs public/ and its own secret file.
//
//  Sockets that accept connections (the coordinator's and each ps-server's
//  ROUTER, a ring member's PULL) are CURVE servers. ZeroMQ asks CZMQ's
//  zauth actor about each peer that connects: it admits only keys whose
//  certificate is in public/, and attaches that certificate's metadata to
//  every message the peer sends, where ps_curve_peer_task reads it. A
//  peer without a trusted key gets no answer at all. zauth serves only the
//  sockets of CZMQ's process-wide ZeroMQ context, so every listening
//  socket is made in ps_curve_context (), secured or not. Connecting
//  sockets are CURVE clients that know their server's public key, so a
//  process cannot be talked into connecting to an impostor either.
//
//  One trust directory per process: the first ps_curve_t starts zauth on
//  its public/, later ones must name the same directory, and the last one
//  destroyed stops it.

#ifndef PS_CURVE_H_INCLUDED
#define PS_CURVE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include <zmq.h>

#include "ps_error.h"

//  Longest task name ("evaluator:65535") and key directory accepted.
#define PS_CURVE_TASK_MAX  32
#define PS_CURVE_DIR_MAX   200

typedef struct _ps_curve_t ps_curve_t;

//  Make a cluster's key directory: dir (created with mode 0700; it must
//  not exist yet, or be empty) gets public/ with a certificate for each
//  of the ntasks tasks ("chief:0", "ps:0", "worker:3", ...) and the
//  secret certificate of each beside it, each task's password
//  (<role>-<index>.password) and the servers' file of every task's
//  (passwords), all mode 0600. With plain, the certificates say that the
//  data plane is PLAIN; else the passwords serve the same-host ipc
//  connections to the servers (below). Returns 0, or PS_EINVAL naming a bad task
//  name or a duplicate, PS_EEXIST when dir holds files, or PS_EIO naming
//  the file that could not be written.
int ps_curve_keygen (const char *dir, const char *const *tasks, size_t ntasks, bool plain,
                     ps_error_t *err);

//  Load the identity of task from dir: its secret certificate (refused
//  when its file is readable or writable by group or others, as ssh
//  refuses a private key, when it is malformed, or when its public key is
//  not the one public/ holds for task), and start authenticating peers
//  against public/. Returns NULL and sets err naming the file and what
//  was wrong.
ps_curve_t *ps_curve_new (const char *dir, const char *task, ps_error_t *err);

void ps_curve_destroy (ps_curve_t **self_p);

//  What every program does with its --keys DIR and --insecure options, for
//  task: with keys_dir (NULL: the environment variable PS_KEYS, unless
//  insecure), load that identity into *curve; with insecure,
//  warn that nothing is authenticated or encrypted and set *curve to NULL;
//  with neither, or both, refuse with an error that says what to pass.
//  Returns 0 or a negative code with err set.
int ps_curve_open (const char *keys_dir, bool insecure, const char *task, ps_curve_t **curve,
                   ps_error_t *err);

//  This process's task, as given to ps_curve_new.
const char *ps_curve_task (ps_curve_t *self);

//  The ZeroMQ context in which every listening socket is made (CZMQ's
//  process-wide one, with CZMQ's own signal handling off: the programs
//  read their stop signals through ps_signal). It lives until the process
//  exits; never terminate it.
void *ps_curve_context (void);

//  Make socket, before it binds, a CURVE server with this process's key,
//  whose peers zauth authenticates. Returns 0 or PS_EIO.
int ps_curve_server (ps_curve_t *self, void *socket, ps_error_t *err);

//  Make socket, before it connects, a CURVE client of task server_task
//  ("ps:1", "chief:0", ...), whose public key comes from public/. Returns
//  0, PS_ENOTFOUND when public/ has no certificate for that task, or
//  PS_EIO.
int ps_curve_client (ps_curve_t *self, void *socket, const char *server_task,
                     ps_error_t *err);

//  The metadata properties ZeroMQ attaches to each frame received on a
//  CURVE server socket: the sender's task, from its certificate, and its
//  public key (Z85 text). ps_msg_property reads them from a ps_msg_t.
#define PS_CURVE_PEER_TASK  "task"
#define PS_CURVE_PEER_KEY   "User-Id"

//  The data plane: the connections of workers, evaluators and the
//  coordinator to the ps-servers, which carry the gradients and values.
//  It is CurveZMQ like the rest, unless the cluster's keys were made for
//  a PLAIN data plane (`coordinator keygen --data-plane plain`): CurveZMQ
//  encrypts every byte, which on large pushes costs much of a small
//  machine's CPU, while PLAIN authenticates each connection by its task's
//  password, sent in the clear, and encrypts nothing. The control plane
//  (every process's link to the coordinator) and the ring stay CurveZMQ.

//  Whether this cluster's data plane is PLAIN.
bool ps_curve_plain (ps_curve_t *self);

//  ps_curve_server and ps_curve_client for a data-plane socket: a
//  ps-server's ROUTER, and a client's connection to it.
int ps_curve_data_server (ps_curve_t *self, void *socket, ps_error_t *err);
int ps_curve_data_client (ps_curve_t *self, void *socket, const char *server_task,
                          ps_error_t *err);

//  The same-host data plane. A ps-server's ipc:// endpoint (ps_host.h) is
//  a socket in a directory that only its user may enter (mode 0700,
//  checked by both ends), so only processes of that user, or root, can
//  connect to it, and no other user can read or change what crosses it:
//  the kernel guards it as CurveZMQ guards a network. Processes of the
//  same user can read the cluster's keys anyway. So, where the keys have
//  passwords, the servers take same-host connections over ipc with PLAIN,
//  each task proving itself by its password, and encrypt nothing; tcp
//  stays CurveZMQ. ZeroMQ takes a connection's mechanism from the options
//  a socket had when it bound the endpoint, so one ROUTER serves both.
//  Keys made before every key directory had passwords keep ipc CurveZMQ.

//  Whether this process serves the same-host PLAIN plane: the data plane
//  is CurveZMQ and its keys hold every task's password (a server's).
bool ps_curve_local_serves (ps_curve_t *self);

//  Whether this process can connect over it: the data plane is CurveZMQ
//  and its keys hold its own password.
bool ps_curve_local_connects (ps_curve_t *self);

//  Make socket, after it bound its tcp endpoint with ps_curve_data_server
//  and before it binds its ipc one, a PLAIN server for the latter.
//  Only where ps_curve_local_serves. Returns 0 or PS_EIO.
int ps_curve_local_server (ps_curve_t *self, void *socket, ps_error_t *err);

//  Make socket, before it connects to a server's ipc endpoint, a PLAIN
//  client with this task's password. Only where ps_curve_local_connects.
//  Returns 0 or PS_EIO.
int ps_curve_local_client (ps_curve_t *self, void *socket, ps_error_t *err);

//  A data-plane peer's task, from two properties of a message it sent:
//  user_id (PS_CURVE_PEER_KEY) and cert_task (PS_CURVE_PEER_TASK; either
//  may be NULL). A peer that connected with PLAIN proved a user name, its
//  task, which zauth gives as its User-Id; one that connected with
//  CurveZMQ has its key's Z85 text there, and its certificate's task in
//  cert_task. The task property is read only for the latter: both come
//  from zauth, whose properties win over any a peer sends of itself, but
//  zauth gives a PLAIN peer no task property, so one a PLAIN peer sent
//  would stand. A server's passwords file is refused unless every user
//  in it is a task name, so a PLAIN peer's User-Id always is one.
const char *ps_curve_data_task (const char *user_id, const char *cert_task);

//  The authenticated task of the peer that sent frame, or NULL when the
//  socket is not secured.
const char *ps_curve_peer_task (zmq_msg_t *frame);

//  The public key of the peer that sent frame, or "" when the socket is
//  not secured.
const char *ps_curve_peer_key (zmq_msg_t *frame);

//  Whether the authenticated task `peer` (NULL: none) has role `role`
//  ("worker" matches "worker:3").
bool ps_curve_task_is (const char *peer, const char *role);

//  True the first time a peer's key is refused something, false after:
//  refusals are logged once per key, never once per message.
bool ps_curve_first_refusal (ps_curve_t *self, const char *key);

#endif
