//  The layout of a checkpoint root: how checkpoint directories are named,
//  how paths in it are joined, which entries are checkpoints, and which
//  file names a checkpoint may list (schemas/checkpoint.md).
//
//  A checkpoint root holds one directory per checkpoint, named
//  ckpt-<global step, 12 or more digits>; a checkpoint being written is
//  ckpt-<step>.tmp, and one being replaced may be ckpt-<step>.old. Only the
//  canonical name without a suffix counts as a checkpoint, so whatever a
//  crash leaves behind is never read. This module is the one place that
//  knows those names; the writer (ps_checkpoint.h) and the reader
//  (ps_ckpt_verify.h) both go through it, and neither reads or writes a
//  file through it: it only names, checks names and lists the root.

#ifndef PS_CKPT_LAYOUT_H_INCLUDED
#define PS_CKPT_LAYOUT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

#define PS_CHECKPOINT_FORMAT    "ps-cluster-checkpoint"
#define PS_CHECKPOINT_VERSION   1
#define PS_CHECKPOINT_MANIFEST  "MANIFEST.json"

//  The directory name of the checkpoint at step, with suffix ("", ".tmp"
//  or ".old") appended, into buf of len bytes (64 hold any of them).
void ps_ckpt_layout_dirname (char *buf, size_t len, uint64_t step, const char *suffix);

//  True when name is exactly the name ps_ckpt_layout_dirname gives a step
//  with no suffix, and then *step is that step.
bool ps_ckpt_layout_parse (const char *name, uint64_t *step);

//  True when the last component of the path dir (trailing slashes
//  ignored) is a checkpoint's name, and then *step is its step.
bool ps_ckpt_layout_dir_step (const char *dir, uint64_t *step);

//  Join dir and name into buf of len bytes. Returns 0, or PS_EINVAL naming
//  both when buf is too small.
int ps_ckpt_layout_join (char *buf, size_t len, const char *dir, const char *name,
                         ps_error_t *err);

//  Check that path fits a caller's buffer of len bytes. Returns 0, or
//  PS_EINVAL naming the path and both sizes.
int ps_ckpt_layout_check_room (const char *path, size_t len, ps_error_t *err);

//  True when file is a plain file name: not empty, no '/', not "." or "..".
bool ps_ckpt_layout_plain_name (const char *file);

//  Check one listed file's name: a plain name, and the name the servers
//  give partition part of var (ps_snapshot_filename), var being a valid
//  variable name. context ("file <manifest>" or "checkpoint <dir>") and
//  index say where the entry came from, for the message. Returns 0 or
//  code (PS_EINVAL for a caller's list, PS_ECORRUPT for a manifest's).
int ps_ckpt_layout_check_file (const char *file, const char *var, uint32_t part,
                               const char *context, size_t index, int code, ps_error_t *err);

//  Find a name listed twice among count names (the array is sorted in
//  place). Returns the name, or NULL when they are all distinct.
const char *ps_ckpt_layout_find_duplicate (const char **names, size_t count);

//  The steps of the checkpoint directories in root, newest first, in a new
//  array (*steps, free it) of *count. Entries that are not exactly
//  checkpoint names, and entries that are not directories (symbolic links
//  included), are left out. Returns 0, PS_ENOTFOUND when root does not
//  exist, or PS_EIO.
int ps_ckpt_layout_list (const char *root, uint64_t **steps, size_t *count, ps_error_t *err);

#endif
