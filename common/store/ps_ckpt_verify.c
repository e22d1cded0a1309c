//  Reading checkpoints: see ps_ckpt_verify.h, and schemas/checkpoint.md
//  for the manifest.
//
//  Nothing here trusts a manifest: every key it depends on is checked for
//  type and range, file names must be plain names of snapshot files
//  (ps_ckpt_layout.h), and every listed file is read through once to
//  check its CRC.

#include "ps_ckpt_verify.h"
#include "ps_ckpt_layout.h"
#include "ps_file.h"
#include "ps_log.h"
#include "ps_snapshot.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

//  A manifest holds a few hundred bytes per partition plus the caller's
//  keys, so anything near this size is not one of ours; refusing it keeps
//  a damaged or foreign file from costing that much memory.
#define S_MANIFEST_MAX  ((size_t) 256 << 20)

//  Snapshot files are read through in pieces of this size to check their
//  CRC, however large they are.
#define S_CRC_CHUNK     ((size_t) 1 << 20)

//  ---------------------------------------------------------------------
//  Verify

//  Read and parse the manifest at path. Returns PS_ENOTFOUND when it is
//  missing, PS_EINVAL when it is not a regular file, PS_ETOOBIG when it is
//  larger than any manifest, PS_EIO when it cannot be read, PS_ECORRUPT
//  when it is not a JSON object.
static int
s_load_manifest (const char *path, json_t **manifest_p, ps_error_t *err)
{
    char *text;
    size_t size;
    int rc = ps_file_read (path, S_MANIFEST_MAX, &text, &size, err);
    if (rc == PS_OK) {
        json_error_t jerr;
        json_t *manifest = json_loadb (text, size, JSON_REJECT_DUPLICATES, &jerr);
        if (!manifest)
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: not valid JSON: line %d, column %d: %s",
                               path, jerr.line, jerr.column, jerr.text);
        else
        if (!json_is_object (manifest)) {
            json_decref (manifest);
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: expected a JSON object", path);
        }
        else
            *manifest_p = manifest;
    }
    free (text);
    return rc;
}

//  The value of key in object as an integer in [0, max], or false when it
//  is missing, not an integer or out of range.
static bool
s_get_uint (const json_t *object, const char *key, uint64_t max, uint64_t *value)
{
    const json_t *item = json_object_get (object, key);
    if (!json_is_integer (item))
        return false;
    json_int_t v = json_integer_value (item);
    if (v < 0 || (uint64_t) v > max)
        return false;
    *value = (uint64_t) v;
    return true;
}

//  Check the keys this module wrote: format first and version second, so
//  that a foreign file or a newer format is reported as such, then step
//  (which must match the directory's name, when it has a checkpoint's
//  name), created and files.
static int
s_check_header (const char *dir, const char *path, const json_t *manifest, ps_error_t *err)
{
    const char *format = json_string_value (json_object_get (manifest, "format"));
    if (!format)
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"format\" is missing or not a string,"
                             " expected \"%s\"", path, PS_CHECKPOINT_FORMAT);
    if (strcmp (format, PS_CHECKPOINT_FORMAT) != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: format \"%s\", expected \"%s\"",
                             path, format, PS_CHECKPOINT_FORMAT);
    const json_t *version = json_object_get (manifest, "version");
    if (!json_is_integer (version))
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"version\" is missing or not an integer,"
                             " expected %d", path, PS_CHECKPOINT_VERSION);
    if (json_integer_value (version) != PS_CHECKPOINT_VERSION)
        return ps_error_set (err, PS_EVERSION, "file %s: version %lld, expected %d",
                             path, (long long) json_integer_value (version), PS_CHECKPOINT_VERSION);
    uint64_t step, named;
    if (!s_get_uint (manifest, "step", INT64_MAX, &step))
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: \"step\" is missing or not an integer >= 0", path);
    if (ps_ckpt_layout_dir_step (dir, &named) && named != step)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: step %llu, expected %llu as the directory is named", path,
                             (unsigned long long) step, (unsigned long long) named);
    if (!json_is_string (json_object_get (manifest, "created")))
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"created\" is missing or not a string",
                             path);
    if (!json_is_array (json_object_get (manifest, "files")))
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"files\" is missing or not an array",
                             path);
    return PS_OK;
}

//  Check every entry of "files" for its keys, types and name, then that no
//  file is listed twice. Reads nothing from the disk.
static int
s_check_entries (const char *path, const json_t *list, ps_error_t *err)
{
    size_t count = json_array_size (list);
    for (size_t i = 0; i < count; i++) {
        const json_t *entry = json_array_get (list, i);
        if (!json_is_object (entry))
            return ps_error_set (err, PS_ECORRUPT, "file %s: files[%zu] is not an object", path, i);
        const char *file = json_string_value (json_object_get (entry, "file"));
        const char *var = json_string_value (json_object_get (entry, "var"));
        if (!file || !var)
            return ps_error_set (err, PS_ECORRUPT, "file %s: files[%zu]: \"file\" or \"var\" is"
                                 " missing or not a string", path, i);
        static const struct {
            const char *key;
            uint64_t max;
        } fields [] = {
            { "server", INT32_MAX }, { "part", UINT32_MAX }, { "bytes", INT64_MAX },
            { "crc32", UINT32_MAX }, { "version", INT64_MAX },
        };
        uint64_t value, part = 0;
        for (size_t k = 0; k < sizeof fields / sizeof fields [0]; k++) {
            if (!s_get_uint (entry, fields [k].key, fields [k].max, &value))
                return ps_error_set (err, PS_ECORRUPT, "file %s: files[%zu] (%s): \"%s\" is missing"
                                     " or not an integer in 0..%llu", path, i, file, fields [k].key,
                                     (unsigned long long) fields [k].max);
            if (strcmp (fields [k].key, "part") == 0)
                part = value;
        }
        char context [PATH_MAX + 16];
        snprintf (context, sizeof context, "file %s", path);
        int rc = ps_ckpt_layout_check_file (file, var, (uint32_t) part, context, i,
                                            PS_ECORRUPT, err);
        if (rc)
            return rc;
    }
    if (count < 2)
        return PS_OK;
    const char **names = malloc (count * sizeof *names);
    if (!names)
        return ps_error_set (err, PS_EIO, "file %s: cannot allocate a list of %zu names",
                             path, count);
    for (size_t i = 0; i < count; i++)
        names [i] = json_string_value (json_object_get (json_array_get (list, i), "file"));
    const char *twice = ps_ckpt_layout_find_duplicate (names, count);
    int rc = twice ? ps_error_set (err, PS_ECORRUPT, "file %s: file %s is listed twice",
                                   path, twice)
                   : PS_OK;
    free (names);
    return rc;
}

//  The CRC-32 of the first len bytes of path, read in chunks.
static int
s_crc_file (const char *path, uint64_t len, uint32_t *crc_p, ps_error_t *err)
{
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    uint8_t *buf = malloc (S_CRC_CHUNK);
    int rc = PS_OK;
    if (!buf)
        rc = ps_error_set (err, PS_EIO, "file %s: cannot allocate %zu bytes to read it",
                           path, S_CRC_CHUNK);
    uint32_t crc = (uint32_t) crc32 (0, Z_NULL, 0);
    uint64_t done = 0;
    while (rc == PS_OK && done < len) {
        size_t want = len - done < S_CRC_CHUNK ? (size_t) (len - done) : S_CRC_CHUNK;
        ssize_t n = read (fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = ps_error_set (err, PS_EIO, "file %s: read failed: %s", path, strerror (errno));
        else
        if (n == 0)
            //  It shrank since its size was taken.
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: ended after %llu of %llu bytes",
                               path, (unsigned long long) done, (unsigned long long) len);
        else {
            crc = (uint32_t) crc32 (crc, buf, (uInt) n);
            done += (uint64_t) n;
        }
    }
    if (close (fd) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "file %s: close failed: %s", path, strerror (errno));
    free (buf);
    if (rc == PS_OK)
        *crc_p = crc;
    return rc;
}

//  Check one listed file against the manifest: its size, its trailer, and
//  the CRC of the bytes before the trailer.
static int
s_check_file (const char *dir, const json_t *entry, ps_error_t *err)
{
    //  s_check_entries has checked the entry; the checks here only keep
    //  this function safe on its own.
    const char *file = json_string_value (json_object_get (entry, "file"));
    uint64_t expect_bytes, expect_crc;
    if (!file
    ||  !s_get_uint (entry, "bytes", INT64_MAX, &expect_bytes)
    ||  !s_get_uint (entry, "crc32", UINT32_MAX, &expect_crc))
        return ps_error_set (err, PS_ECORRUPT, "checkpoint %s: a files[] entry lacks its keys",
                             dir);
    char path [PATH_MAX];
    int rc = ps_ckpt_layout_join (path, sizeof path, dir, file, err);
    if (rc)
        return rc;
    uint64_t bytes;
    uint32_t trailer;
    rc = ps_snapshot_summary (path, &bytes, &trailer, err);
    if (rc)
        return rc;
    if (bytes != expect_bytes)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: %llu bytes, expected %llu as the manifest records", path,
                             (unsigned long long) bytes, (unsigned long long) expect_bytes);
    if (trailer != (uint32_t) expect_crc)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: checksum trailer 0x%08x, expected 0x%08x"
                             " as the manifest records", path, trailer, (uint32_t) expect_crc);
    //  ps_snapshot_summary has refused a file shorter than its trailer.
    uint32_t crc = 0;
    rc = s_crc_file (path, bytes - 4, &crc, err);
    if (rc)
        return rc;
    if (crc != trailer)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: checksum mismatch: the bytes give 0x%08x,"
                             " the trailer says 0x%08x", path, crc, trailer);
    return PS_OK;
}

int
ps_checkpoint_verify (const char *dir, json_t **manifest, ps_error_t *err)
{
    assert (dir);
    if (manifest)
        *manifest = NULL;
    char path [PATH_MAX];
    int rc = ps_ckpt_layout_join (path, sizeof path, dir, PS_CHECKPOINT_MANIFEST, err);
    if (rc)
        return rc;
    json_t *loaded = NULL;
    rc = s_load_manifest (path, &loaded, err);
    if (rc == PS_OK)
        rc = s_check_header (dir, path, loaded, err);
    const json_t *list = json_object_get (loaded, "files");
    if (rc == PS_OK)
        rc = s_check_entries (path, list, err);
    for (size_t i = 0; rc == PS_OK && i < json_array_size (list); i++)
        rc = s_check_file (dir, json_array_get (list, i), err);
    if (rc == PS_OK && manifest)
        *manifest = loaded;
    else
        json_decref (loaded);
    return rc;
}

//  ---------------------------------------------------------------------
//  Latest

int
ps_checkpoint_latest (const char *root, char *dir, size_t len, json_t **manifest,
                      ps_error_t *err)
{
    assert (root);
    assert (dir);
    if (manifest)
        *manifest = NULL;
    uint64_t *steps;
    size_t count;
    int rc = ps_ckpt_layout_list (root, &steps, &count, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < count; i++) {
        char name [64], path [PATH_MAX];
        ps_error_t why;
        ps_ckpt_layout_dirname (name, sizeof name, steps [i], "");
        rc = ps_ckpt_layout_join (path, sizeof path, root, name, err);
        if (rc == PS_OK)
            rc = ps_ckpt_layout_check_room (path, len, err);
        if (rc) {
            free (steps);
            return rc;
        }
        rc = ps_checkpoint_verify (path, manifest, &why);
        if (rc == PS_OK) {
            free (steps);
            memcpy (dir, path, strlen (path) + 1);
            return PS_OK;
        }
        ps_warn ("checkpoint %s is not usable: %s; %s", path, why.msg,
                 i + 1 < count ? "trying an older one" : "no older one is left");
    }
    free (steps);
    return ps_error_set (err, PS_ENOTFOUND, "checkpoint root %s: no usable checkpoint among %zu",
                         root, count);
}

//  ---------------------------------------------------------------------
//  Before a run

int
ps_checkpoint_check_root (const char *root, bool resume, ps_error_t *err)
{
    assert (root);
    struct stat st;
    bool exists = stat (root, &st) == 0;
    if (!exists && errno == ENOTDIR)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: not a directory (the "
                             "path goes through a file)", root);
    if (!exists && errno != ENOENT)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: stat failed: %s", root,
                             strerror (errno));
    if (exists && !S_ISDIR (st.st_mode))
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: not a directory", root);
    if (!exists && resume)
        return ps_error_set (err, PS_ENOTFOUND, "checkpoint directory %s: does not exist, so "
                             "there is nothing to resume", root);
    ps_error_t why;
    if (!exists && ps_file_mkdirs (root, &why))
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: cannot create it (%s)",
                             root, why.msg);
    char probe [PATH_MAX];
    int rc = ps_ckpt_layout_join (probe, sizeof probe, root, ".ps-write-check-XXXXXX", err);
    if (rc)
        return ps_error_prefix (err, PS_EINVAL, "checkpoint directory %s", root);
    int fd = mkostemp (probe, O_CLOEXEC);
    if (fd < 0)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: cannot create a file in "
                             "it: %s", root, strerror (errno));
    //  The probe is empty; failing to close or remove it changes nothing
    //  for the checkpoints, but a file left behind is worth a word.
    (void) close (fd);
    if (unlink (probe) != 0)
        ps_warn ("checkpoint directory %s: cannot remove the probe file %s: %s", root, probe,
                 strerror (errno));
    if (!resume)
        return PS_OK;
    char dir [PATH_MAX];
    rc = ps_checkpoint_latest (root, dir, sizeof dir, NULL, &why);
    if (rc == PS_ENOTFOUND)
        return ps_error_set (err, PS_ENOTFOUND, "checkpoint directory %s: no usable checkpoint "
                             "to resume from", root);
    if (rc)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: %s", root, why.msg);
    return PS_OK;
}
