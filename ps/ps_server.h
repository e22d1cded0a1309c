//  The ps-server: holds partitions of variables and their optimizer state,
//  and its shard of each embedding table (rows keyed by 64-bit ids,
//  created on first push), serves pulls, applies pushes asynchronously and
//  snapshots to disk.
//
//  Concurrency model. One thread (the caller of ps_server_run) owns the
//  ROUTER socket and the partition table: it receives, validates and
//  answers every request, and handles the control requests itself. Pushes
//  and pulls are split into one task per partition. Small requests run
//  inline on that thread, because handing them to another thread would
//  cost more than the work; larger ones go to a pool of --threads threads,
//  so that different partitions are updated in parallel while each
//  partition's own lock applies one update at a time. A push's gradients
//  are first scanned for NaN and infinities, one task per partition too,
//  and only once every one is found finite does any partition apply its
//  own. A pool thread that finishes a request's last task wakes the main
//  thread over an inproc socket, and the main thread sends the reply:
//  ZeroMQ sockets are used from one thread only. ZeroMQ's I/O thread does
//  the networking. Gradient frames are applied in place from the received
//  messages.
//
//  Sparse pulls and pushes of tables are served the same way, one task
//  per table (ps_sparsejob.h).
//
//  A snapshot or a restore waits, on the main thread, until the pool has
//  finished every job: since only the main thread starts jobs, none runs
//  while the files are written or the state replaced, so a snapshot is a
//  cut (each partition and table file holds exactly the steps of its
//  ledger) and no push lands half on the old state and half on the new.
//
//  The modules: ps_job (one data request), ps_sparsejob (one sparse
//  request), ps_pool (the threads), ps_control (the coordinator's requests
//  and the fence), ps_table (the partitions), ps_tables (the table
//  shards), ps_peers (back-pressure), ps_listener (connections) and
//  ps_ckpt_root (where snapshots may go). This file is the loop: it
//  receives, decodes with the generated codec (ps_proto.h), dispatches by
//  a table indexed by message type, and replies.
//
//  The main thread reads its socket whatever it holds: what it holds for
//  each peer is charged to that peer, and a peer that does not read its
//  replies is turned away alone (ps_peers.h). Its connections are kept
//  below the file-descriptor limit (ps_listener.h), and snapshots inside
//  the checkpoint root (ps_ckpt_root.h).
//
//  Security. With an identity (ps_curve_t) the ROUTER is a CURVE server:
//  only peers whose keys the cluster trusts get through at all, and each
//  request is then checked against its sender's role, as the 'senders'
//  column of schemas/protocol.json says (ps_proto_may_send). Control requests
//  (create, table_create, set_optimizer, snapshot, restore, fence,
//  shutdown) come only from the coordinator (chief:0); pushes, sparse ones
//  too, only from workers; pulls and sparse pulls from workers and
//  evaluators; ping and stats from any member. Anything else
//  gets an error reply of code "forbidden", logged once per key.

#ifndef PS_SERVER_H_INCLUDED
#define PS_SERVER_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_link.h"
#include "ps_optimizer.h"

typedef struct _ps_server_t ps_server_t;

typedef struct {
    const char *bind;           //  ZeroMQ endpoint; tcp port 0 or * picks a free port
    const char *name;           //  reported by ping, for example "ps:0"
    int threads;                //  apply pool size; 0 applies everything inline
    int64_t max_message;        //  ZMQ_MAXMSGSIZE in bytes; -1 = no limit
    size_t max_pending;         //  bytes held for all peers' requests and unsent replies
                                //  before the peers holding the most are refused
    size_t max_peer_pending;    //  the same for one peer; 0: max_pending
    ps_opt_config_t opt;        //  optimizer until set_optimizer says otherwise
    ps_curve_t *curve;          //  this server's identity (NULL: unsecured); the caller's
    const char *checkpoint_root;    //  snapshots stay inside it (created when missing);
                                    //  NULL: snapshot and restore are refused
    uint64_t memory_limit;      //  bytes the embedding tables may hold (0: no limit);
                                //  a push that could pass it is refused (ps_tables.h)
    bool same_host;             //  bind an ipc:// endpoint beside a tcp one (ps_host.h)
} ps_server_config_t;

//  Create a server and bind its socket. Returns NULL and sets err when the
//  endpoint cannot be bound, the checkpoint root cannot be made, or the
//  configuration is invalid.
ps_server_t *ps_server_new (const ps_server_config_t *config, ps_error_t *err);

void ps_server_destroy (ps_server_t **self_p);

//  The endpoint actually bound (with the port chosen for port 0).
const char *ps_server_endpoint (ps_server_t *self);

//  What peers are to be told to reach the server at: the endpoint set of
//  ps_host.h, the endpoint and, with same_host, the ipc:// endpoint bound
//  beside it and this host's identity (only the endpoint when none was
//  bound).
const char *ps_server_advert (ps_server_t *self);

//  How a stop signal ends a server that belongs to a cluster: docker
//  compose stop, scancel and a deleted Kubernetes Job signal every process
//  at once, and a server that exited at once would take the coordinator's
//  final checkpoint with it. So while link (the server's link to its
//  coordinator; NULL: none) is registered and the run is not over, the
//  first stop signal leaves the server serving until the coordinator's
//  shutdown request, the coordinator falls silent, or grace_ms pass; a
//  second signal stops it at once. Without a call, or with grace_ms 0, a
//  signal stops the server at once. The caller keeps link until
//  ps_server_run returns.
void ps_server_set_stop_grace (ps_server_t *self, int grace_ms, ps_link_t *link);

//  Serve until a shutdown request or until stop_fd (a signalfd, or -1)
//  becomes readable (see ps_server_set_stop_grace). The requests in
//  progress are finished and answered before it returns. Returns 0, or a
//  negative code after a fatal socket error.
int ps_server_run (ps_server_t *self, int stop_fd);

#endif
