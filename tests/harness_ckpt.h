//  The checkpoint tests' fixture (test_checkpoint, test_ckpt_verify): a
//  temporary directory per case with a checkpoint root under it that does
//  not exist yet, real snapshot files of a small model written by
//  ps_partition_save as two servers would write them, the coordinator's
//  part of a manifest, and a whole checkpoint begun, snapshot and
//  committed, so that the programs that write checkpoints and those that
//  read them start from the same files. Each helper fails the running
//  case, naming what went wrong, when it cannot do its part.

#ifndef PS_HARNESS_CKPT_H_INCLUDED
#define PS_HARNESS_CKPT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "harness_case.h"
#include "ps_checkpoint.h"

//  The number of snapshot files of harness_ckpt_snapshot's model.
#define HARNESS_CKPT_FILES 3

//  The fixture of harness_ckpt_setup: the case's directory, and a
//  checkpoint root in it ("run/ckpts") that does not exist yet.
typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char root [128];
} harness_ckpt_fixture_t;

//  A cmocka setup giving the case a fresh directory and the fixture above;
//  harness_dir_teardown removes both.
int harness_ckpt_setup (void **state);

//  Whether anything, a dangling symbolic link included, is at path.
bool harness_ckpt_exists (const char *path);

//  Replace path with text.
void harness_ckpt_write_text (const char *path, const char *text);

//  dir/name into buf of len bytes.
void harness_ckpt_join (char *buf, size_t len, const char *dir, const char *name);

//  The path of the checkpoint directory of step in root, with suffix
//  (".tmp" and the like, or "") after its name, into buf of len bytes.
void harness_ckpt_dir (char *buf, size_t len, const char *root, uint64_t step,
                       const char *suffix);

//  The snapshot files of a small model, as two servers would write them
//  into dir: a [6, 4] kernel in two partitions and a [4] bias, each
//  after one update. seed makes the contents differ from one checkpoint to
//  the next. files receives HARNESS_CKPT_FILES descriptions.
void harness_ckpt_snapshot (const char *dir, uint64_t seed, ps_snap_file_t *files);

//  The coordinator's part of a manifest (schemas/checkpoint.md) for the
//  model above at step, with lr as given.
json_t *harness_ckpt_manifest (uint64_t step, double lr);

//  Begin, snapshot and commit a checkpoint at step in root, keeping keep;
//  files (may be NULL) receives the snapshot files' descriptions and dir
//  (may be NULL) the checkpoint's path.
void harness_ckpt_commit (const char *root, uint64_t step, int keep, double lr,
                          ps_snap_file_t *files, char *dir, size_t len);

//  The JSON file at path, parsed.
json_t *harness_ckpt_load_json (const char *path);

#endif
