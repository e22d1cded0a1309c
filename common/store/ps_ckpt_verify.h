//  Checking and finding checkpoints: the reading half of the checkpoint
//  module (ps_checkpoint.h writes them, ps_ckpt_layout.h names them).
//
//  A checkpoint is usable only when its manifest parses, names this format
//  and version, agrees with its directory's name, lists well-formed
//  entries, and every file it lists is there with the size and CRC-32
//  recorded. A resume takes the newest checkpoint that passes, warning
//  about each newer one that does not; the coordinator checks its root the
//  same way before a run starts, so a mistake is reported at once.

#ifndef PS_CKPT_VERIFY_H_INCLUDED
#define PS_CKPT_VERIFY_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ps_error.h"

//  Check one checkpoint directory: the manifest parses, has the right
//  format and version, a step that matches the directory's name when it is
//  named ckpt-<step>, and well-formed file entries (plain names, each the
//  ps_snapshot_filename of its partition, none twice); and every file it
//  lists exists with the size and CRC-32 recorded (the CRC being the
//  file's trailer, which must also match the bytes before it, read through
//  in chunks). *manifest (may be NULL) receives the parsed manifest
//  (json_decref it), and NULL on error. Returns 0, or PS_ECORRUPT /
//  PS_ENOTFOUND / PS_EVERSION / PS_EIO, PS_EINVAL for a path that is not a
//  regular file (a FIFO, never opened for reading), or PS_ETOOBIG for a
//  manifest over 256 MiB, with a message naming the file and what is wrong.
int ps_checkpoint_verify (const char *dir, json_t **manifest, ps_error_t *err);

//  Find the newest checkpoint in root that verifies, logging a warning
//  (ps_warn) for each newer one that does not. Only directories named
//  exactly ckpt-<step> count; .tmp and other entries are ignored. dir
//  receives its path, *manifest (manifest may be NULL) its manifest
//  (json_decref it; NULL on error). Returns 0, PS_ENOTFOUND when root holds
//  no valid checkpoint (or does not exist), PS_EIO when root cannot be
//  read, or PS_EINVAL when len is too small for the path.
int ps_checkpoint_latest (const char *root, char *dir, size_t len, json_t **manifest,
                          ps_error_t *err);

//  Check, before a run starts, that root can hold this run's checkpoints,
//  so that a mistake is reported at once rather than when the first
//  checkpoint is due or a resume is tried (after every process has
//  registered). root must be a directory, or be creatable as one (it is
//  created then, with its parents), and this process must be able to
//  create a file in it (a probe file, removed again). With resume, root
//  must already exist and hold a checkpoint that verifies
//  (ps_checkpoint_latest, which warns about each newer one that does not).
//  Returns 0, or PS_EINVAL (not a directory, cannot be created, not
//  writable) or PS_ENOTFOUND (nothing to resume), with a message that
//  begins "checkpoint directory ROOT: ". Only this process's access is
//  checked; the ps-servers write into root too, from their own machines.
int ps_checkpoint_check_root (const char *root, bool resume, ps_error_t *err);

#endif
