//  The checkpoint root: the one directory tree a ps-server writes
//  snapshots into and restores them from (--checkpoint-root). Snapshot and
//  restore requests come from the network and name a directory relative
//  to the root; this module turns such a name into a path, refusing
//  anything that would reach outside the root: an absolute path, a '.' or
//  '..' component, an empty or overlong name or component, a control
//  character, or a path that leads out through a symbolic link (found by
//  resolving it with realpath). Symbolic links that stay inside the root
//  are followed. It owns the root's resolved path and nothing else; the
//  snapshot files themselves are ps_partition's and ps_snapshot's.

#ifndef PS_CKPT_ROOT_H_INCLUDED
#define PS_CKPT_ROOT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include "ps_error.h"

typedef struct _ps_ckpt_root_t ps_ckpt_root_t;

//  Longest name a request may give (the bytes of a path relative to the
//  root), and longest component in it.
#define PS_CKPT_NAME_MAX  1024
#define PS_CKPT_COMPONENT_MAX  255

//  Take dir as the root, creating it (and its parents) when missing.
//  Returns NULL and sets err, naming dir, when it cannot be made or is not
//  a directory.
ps_ckpt_root_t *ps_ckpt_root_new (const char *dir, ps_error_t *err);

void ps_ckpt_root_destroy (ps_ckpt_root_t **self_p);

//  The root's absolute path, symbolic links resolved.
const char *ps_ckpt_root_path (ps_ckpt_root_t *self);

//  Resolve name, a directory relative to the root, into path (len bytes):
//  an absolute path inside the root. With create, the last component is
//  made when missing (its parent must exist). Returns 0; PS_EINVAL with a
//  message naming the problem when name is not a plain relative path or
//  leads outside the root; PS_ENOTFOUND when it does not exist (without
//  create); PS_EIO when a call fails. Messages quote name.
int ps_ckpt_root_resolve (ps_ckpt_root_t *self, const char *name, bool create, char *path,
                          size_t len, ps_error_t *err);

//  Check that the existing file path leads to a file inside the root,
//  symbolic links followed. Returns 0 (also when path does not exist: the
//  reader reports that), PS_EINVAL naming path when it leads outside, or
//  PS_EIO.
int ps_ckpt_root_check (ps_ckpt_root_t *self, const char *path, ps_error_t *err);

#endif
