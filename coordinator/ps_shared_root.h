//  The check that the checkpoint directory is shared: every ps-server
//  writes its snapshots into its own --checkpoint-root, and the
//  coordinator writes the manifest beside them in its --checkpoint-dir, so
//  a checkpoint exists only where the two are one directory (on several
//  machines, one on storage they all share). At start the coordinator has
//  each server write a probe file there (protocol.json, probe_root) and
//  looks for it in its own directory; a server whose file does not appear,
//  (within a few seconds: a network file system may show a new file late)
//  or that cannot write one, stops the run at once, named, with what to
//  do, instead of at its first checkpoint. It keeps nothing; the probe
//  files are removed once looked at.

#ifndef PS_SHARED_ROOT_H_INCLUDED
#define PS_SHARED_ROOT_H_INCLUDED

#include <stdint.h>

#include "ps_client.h"
#include "ps_error.h"

//  Probe each of the nservers servers of client (reached at endpoints)
//  against checkpoint_dir; nonce makes this coordinator's probe files its
//  own. Returns 0 when every server's probe appeared there; else PS_EINVAL
//  (or the call's error) with err naming the first server that cannot
//  reach the directory, the directory it writes to, and what to do.
int ps_shared_root_check (ps_client_t *client, int nservers, const char *const *endpoints,
                          const char *checkpoint_dir, uint64_t nonce, ps_error_t *err);

#endif
