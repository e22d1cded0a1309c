//  Same-host peers: which machine a process runs on, and the ipc://
//  endpoints that processes of one machine reach each other on instead of
//  loopback TCP (as NCCL picks its intra-node transport by a host hash).
//
//  The host identity is the machine's /etc/machine-id, the host name and
//  the running kernel's boot id (/proc/sys/kernel/random/boot_id), so a
//  machine differs from its clones (machine-id), containers of one machine
//  (their host names) and its own earlier boots.
//  PS_HOST_ID, when set, replaces it (tests give processes of one machine
//  different identities with it). Two processes of one identity are
//  taken to share a file system for their ipc:// sockets.
//
//  A process that others connect to advertises an endpoint set: its TCP
//  endpoint, then optionally its ipc:// endpoint (written plain+ipc://PATH
//  for a ps-server whose ipc endpoint takes PLAIN: ps_curve.h, the
//  same-host data plane), its host identity and its shared-memory
//  identity (shm=off when it shares no memory, under PS_SAME_HOST=ipc),
//  separated by commas (lists of endpoints are separated by spaces;
//  elements a reader does not know are skipped, so a reader of an earlier
//  build takes a PLAIN endpoint's server over tcp):
//      tcp://10.0.0.5:2222,ipc:///run/user/1000/ps-cluster/ps-4242-1,host=ID,shm=SHM
//  A peer with the same identity connects to the ipc:// endpoint (when
//  its socket file is there to see, and, for plain+ipc://, when it has a
//  password and the socket and its directory are its user's alone), any
//  other to the first. A plain endpoint is a set of one. The ipc://
//  sockets live in a directory of this user's alone (mode 0700):
//  $XDG_RUNTIME_DIR/ps-cluster, or /tmp/ps-cluster-ipc-UID. A process
//  removes its socket's file when it closes the socket, before it lets go
//  of the TCP endpoint (ZeroMQ does not); a file left by a process that
//  was killed is replaced when its name is bound again. The directory
//  stays, for the user's next run.
//
//  Ring members that all share one host also share memory for their
//  all-reduces (worker/ps_ring_shm.h). PS_SAME_HOST=ipc keeps them on
//  ipc://; PS_SAME_HOST=tcp turns all of it off: nothing binds an ipc://
//  endpoint and every peer is reached over TCP.

#ifndef PS_HOST_H_INCLUDED
#define PS_HOST_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include "ps_error.h"

//  The longest host identity, and the longest endpoint set.
#define PS_HOST_ID_MAX      128
#define PS_HOST_SET_MAX     512

//  This process's host identity (read once; PS_HOST_ID wins). Returns ""
//  when none can be read, which matches no peer.
const char *ps_host_id (void);

//  Whether same-host peers use ipc:// (false under PS_SAME_HOST=tcp).
bool ps_host_same_host (void);

//  Whether ring members of one host share memory (false under
//  PS_SAME_HOST=tcp or PS_SAME_HOST=ipc).
bool ps_host_shared_memory (void);

//  This process's shared-memory identity: its user and the /dev/shm it
//  sees (device and inode), so that processes of one host identity that
//  cannot open each other's shared memory (other users, containers of
//  their own /dev/shm) tell so from their sets. "" when /dev/shm is not
//  there.
const char *ps_host_shm_id (void);

//  The ipc:// endpoint that the process bound at tcp (its bound TCP
//  endpoint) binds beside it, named after what (a word) and tcp's address,
//  in the private directory (made if need be). The name stays the same
//  for a process restarted on the same TCP endpoint, so that its peers'
//  reconnections find it, and only one process can hold it at a time, as
//  only one can hold the TCP endpoint. Returns 0, or PS_EIO / PS_EINVAL
//  with the directory and what is wrong with it (not ours, open to
//  others, the path too long for a socket's or holding a comma or a
//  space).
int ps_host_ipc_endpoint (const char *what, const char *tcp, char *buf, size_t len,
                          ps_error_t *err);

//  Write the set of tcp, ipc (may be NULL: tcp alone; written
//  plain+ipc://PATH with ipc_plain), this host's identity and this
//  process's shared-memory identity (or off) into buf. Returns 0, or
//  PS_EINVAL when it does not fit.
int ps_host_set (const char *tcp, const char *ipc, bool ipc_plain, char *buf, size_t len,
                 ps_error_t *err);

//  The ipc endpoint of set, as a ZeroMQ endpoint (ipc://PATH, also where
//  the set writes it plain+ipc://PATH), with its length in *len and, in
//  *plain (may be NULL), whether it takes PLAIN; NULL when set has none.
const char *ps_host_ipc_of (const char *set, size_t *len, bool *plain);

//  The endpoint of set to connect to from here, into buf: its ipc://
//  endpoint when its host identity is this process's, its socket is there
//  (seen from this process), same-host peers are on and, for a
//  plain+ipc:// endpoint, plain_ok (the caller has a password) and the
//  socket and its directory are this user's alone; else its first. The
//  endpoint picked is a ZeroMQ endpoint (ipc://PATH). *local (may be NULL)
//  says which, and *plain (may be NULL) whether it takes PLAIN. Returns 0, or PS_EINVAL when set is empty or buf
//  too small.
int ps_host_pick (const char *set, bool plain_ok, char *buf, size_t len, bool *local,
                  bool *plain, ps_error_t *err);

//  Whether this process and the one that advertised set share memory:
//  this process does (ps_host_shared_memory, and /dev/shm is there), and
//  set names this host identity and this shared-memory identity. It
//  compares strings alone, so processes that compare their sets in turn
//  all answer alike: a ring's members decide together from its list.
bool ps_host_shares_memory (const char *set);

#endif
