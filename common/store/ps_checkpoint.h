//  Checkpoints: a directory of consistent snapshots of every partition plus
//  a manifest that says what they are (schemas/checkpoint.md).
//
//  A checkpoint root holds one directory per checkpoint, named
//  ckpt-<global step, 12 digits>, each holding the snapshot files the
//  servers wrote (schemas/snapshot.md) and MANIFEST.json. A checkpoint is
//  built in ckpt-<step>.tmp: the servers write their files there, then
//  ps_checkpoint_commit writes the manifest (temporary name, fsync, rename,
//  directory fsync), renames the directory to its final name and fsyncs the
//  root, so a crash at any point leaves either the whole checkpoint or an
//  ignored .tmp directory. Only then are checkpoints beyond the newest
//  `keep` removed.
//
//  The manifest is a JSON object. The caller supplies what the run needs to
//  resume (global step, done batches, job, data cursor, seeds); this module
//  adds the format name and version, the creation time and the list of
//  files, each with its size and CRC-32, and checks all of them when a
//  checkpoint is opened. Readers find the newest checkpoint that passes
//  those checks, warning about and skipping any that fail.
//
//  Snapshot files are written by the ps-servers themselves, so the root
//  must be a directory the servers and the coordinator share (the same
//  machine, or a shared volume).
//
//  The module is three file pairs, one a concept: this one writes and
//  commits checkpoints; ps_ckpt_verify.h checks and finds them (verify,
//  latest, the check of a root before a run); ps_ckpt_layout.h names them
//  (directory names, paths, listing a root, the file-name checks both
//  others share). This header includes the other two, so a caller needs
//  only this one.

#ifndef PS_CHECKPOINT_H_INCLUDED
#define PS_CHECKPOINT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ps_ckpt_layout.h"
#include "ps_ckpt_verify.h"
#include "ps_client.h"
#include "ps_error.h"

//  The manifest key by which an incremental checkpoint names its base,
//  the checkpoint (ckpt-<step>, of the same root) that holds the full
//  files its incremental ones are read on top of.
#define PS_CHECKPOINT_BASE  "base"

//  The words a manifest's "seeds" object gives after the seed, on how
//  every random stream is derived from it (the cluster's and standalone
//  training's checkpoints alike).
#define PS_CHECKPOINT_SEEDS_DERIVATION \
    "weights: ps_model_variable_seed (seed, variable); epoch order: ps_dataset_permutation " \
    "(seed, epoch); dropout: ps_step_dropout_seed (seed, step - 1)"

//  Create the root when missing (and its parents), then a fresh
//  ckpt-<step>.tmp in it (removing a stale one left by a crash, and
//  nothing else). tmpdir receives its path. Returns 0, PS_EINVAL when step
//  is 2^63 or more or len is too small for the path (nothing is created
//  then), or PS_EIO naming the directory.
int ps_checkpoint_begin (const char *root, uint64_t step, char *tmpdir, size_t len,
                         ps_error_t *err);

//  An empty scratch directory root/name (an old one and everything in it
//  removed first; root created when missing): where a checkpoint is
//  re-partitioned for another layout (ps_reshard.h) before it is loaded.
//  name must be a plain name that is not ckpt-<step>, so the directory is
//  never taken for a checkpoint. dir receives its path. Returns 0,
//  PS_EINVAL (a bad name, len too small) or PS_EIO naming the directory.
int ps_checkpoint_scratch (const char *root, const char *name, char *dir, size_t len,
                           ps_error_t *err);

//  Finish the checkpoint begun in tmpdir, which must be exactly the path
//  ps_checkpoint_begin gave for this root and step. Check that every file
//  listed is there, named ps_snapshot_filename (var, part), with the size
//  and CRC-32 trailer given. Write the manifest crash-safely: a copy of the
//  caller's object (which must not hold "format", "version", "created",
//  "step" or "files", and is not changed) with those keys added, "files"
//  holding one entry per file: {"file", "server", "var", "part", "bytes",
//  "crc32", "version"}. Rename tmpdir to ckpt-<step> (replacing a
//  checkpoint of the same step), fsync the root, and remove all but keep
//  (>= 1) checkpoints: the one just committed stays, with the newest others
//  by step and every checkpoint that one of those names as its base (a
//  failure to remove one is logged, not returned). A manifest's "base"
//  (PS_CHECKPOINT_BASE), when given, must name an older checkpoint of
//  root that is there (PS_EINVAL, PS_ENOTFOUND). dir (may be
//  NULL) receives the final path. Returns 0; PS_EINVAL for a bad argument
//  (keep, step, tmpdir, len, a reserved key, a bad or repeated file name),
//  found before anything is written; PS_ENOTFOUND / PS_ESHAPE / PS_ECORRUPT
//  for a file missing, of another size or with another trailer; PS_EIO when
//  a call fails; the message names the file or directory. On error the
//  final directory does not exist (or still holds the checkpoint it was to
//  replace), and tmpdir keeps the servers' files.
int ps_checkpoint_commit (const char *root, uint64_t step, const char *tmpdir,
                          json_t *manifest, const ps_snap_file_t *files, size_t nfiles,
                          int keep, char *dir, size_t len, ps_error_t *err);

//  The name of path relative to root: what a snapshot or restore request
//  names, since a ps-server reads and writes only inside its checkpoint
//  root (ps-server --checkpoint-root root). path must be one that
//  ps_checkpoint_begin, ps_checkpoint_scratch or ps_checkpoint_latest gave
//  for this root; the result points into it.
const char *ps_checkpoint_name (const char *root, const char *path);

#endif
