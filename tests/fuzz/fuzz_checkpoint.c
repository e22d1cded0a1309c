//  Fuzz target: the checkpoint reader (common/store/ps_checkpoint): a manifest
//  and the snapshot files it lists, as the coordinator opens them to
//  resume a run.
//
//  The input is a small directory tree in the framing of fuzz_frames.h:
//  frames in pairs, a file's name then its content. A name is a path of
//  one or two components ("MANIFEST.json", "ckpt-000000000005/x.snap");
//  a name with an empty, ".", ".." or NUL-holding component, or more
//  components, is skipped with its content. A file whose name ends in
//  ".snap" gets its last four bytes replaced by the CRC-32 of the rest,
//  as the snapshot writer would, so mutations reach what lies behind the
//  trailer. The tree is written to an empty root, which is then read as
//  one checkpoint (ps_checkpoint_verify) and as a root of checkpoints
//  (ps_checkpoint_latest).
//
//  Oracles, beyond the sanitizers: a refusal has a message naming a path
//  under the root; an accepted checkpoint gives its manifest, a JSON
//  object, and the one ps_checkpoint_latest picks verifies on its own.

#include "fuzz_frames.h"
#include "fuzz_input.h"
#include "fuzz_scratch.h"
#include "ps_checkpoint.h"
#include "ps_log.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_MAX_FRAMES  64

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_checkpoint: %s: %s\n", what, detail);
    abort ();
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    //  ps_checkpoint_latest warns about every checkpoint it skips.
    ps_log_init ("fuzz_checkpoint", PS_LOG_ERROR);
    return 0;
}

//  Copy a frame holding a name into buf when it is one or two plain
//  components; returns false otherwise.
static bool
s_name (const fuzz_frame_t *frame, char *buf, size_t len, bool *nested)
{
    if (frame->size == 0 || frame->size >= len || memchr (frame->data, 0, frame->size))
        return false;
    memcpy (buf, frame->data, frame->size);
    buf [frame->size] = 0;
    char *slash = strchr (buf, '/');
    *nested = slash != NULL;
    if (slash && strchr (slash + 1, '/'))
        return false;
    char *parts [2] = { buf, slash ? slash + 1 : NULL };
    if (slash)
        *slash = 0;
    bool plain = true;
    for (int i = 0; i < 2 && parts [i]; i++)
        plain = plain && *parts [i] && strcmp (parts [i], ".") != 0
             && strcmp (parts [i], "..") != 0;
    if (slash)
        *slash = '/';
    return plain;
}

//  True when path exists and is (want_dir) or is not a directory.
static bool
s_exists_as (const char *path, bool want_dir)
{
    struct stat st;
    return lstat (path, &st) == 0 && S_ISDIR (st.st_mode) == want_dir;
}

//  Write the tree into root/. A file whose name is taken by a directory,
//  or whose directory's name is taken by a file, is left out.
static void
s_write_tree (const fuzz_frame_t *frames, size_t count)
{
    //  The scratch directory's path is at most 255 bytes.
    char root [512];
    fuzz_scratch_mkdir ("root", root, sizeof root);
    for (size_t i = 0; i + 1 < count; i += 2) {
        char name [256], rel [300], path [PATH_MAX];
        bool nested;
        if (!s_name (&frames [i], name, sizeof name, &nested))
            continue;
        snprintf (path, sizeof path, "%s/%s", root, name);
        if (s_exists_as (path, true))
            continue;
        if (nested) {
            *strrchr (path, '/') = 0;
            if (s_exists_as (path, false))
                continue;
            snprintf (rel, sizeof rel, "root/%s", name);
            *strrchr (rel, '/') = 0;
            fuzz_scratch_mkdir (rel, path, sizeof path);
        }
        const fuzz_frame_t *content = &frames [i + 1];
        size_t len = strlen (name);
        snprintf (rel, sizeof rel, "root/%s", name);
        if (len > 5 && strcmp (name + len - 5, ".snap") == 0) {
            uint8_t *sealed = fuzz_input_sealed (content->data, content->size);
            fuzz_scratch_write (rel, sealed, content->size, path, sizeof path);
            free (sealed);
        }
        else
            fuzz_scratch_write (rel, content->data, content->size, path, sizeof path);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    static fuzz_frame_t frames [S_MAX_FRAMES];
    size_t count = fuzz_frames_split (data, size, frames, S_MAX_FRAMES);
    s_write_tree (frames, count);
    char root [PATH_MAX];
    snprintf (root, sizeof root, "%s/root", fuzz_scratch_dir ());

    json_t *manifest = NULL;
    ps_error_t err = { 0 };
    if (ps_checkpoint_verify (root, &manifest, &err) == 0) {
        if (!json_is_object (manifest))
            s_fail ("an accepted checkpoint has no manifest", root);
    }
    else
    if (manifest || !strstr (err.msg, root))
        s_fail ("a refusal does not name a path under the root", err.msg);
    json_decref (manifest);

    char dir [PATH_MAX];
    manifest = NULL;
    if (ps_checkpoint_latest (root, dir, sizeof dir, &manifest, &err) == 0) {
        if (!json_is_object (manifest))
            s_fail ("the latest checkpoint has no manifest", dir);
        json_decref (manifest);
        if (ps_checkpoint_verify (dir, NULL, &err) != 0)
            s_fail ("the latest checkpoint does not verify on its own", err.msg);
    }
    else
    if (manifest || !strstr (err.msg, root))
        s_fail ("a refusal does not name the root", err.msg);
    fuzz_scratch_clear ();
    return 0;
}
