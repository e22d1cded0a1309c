//  A mirrored worker's replica; see ps_replica.h, and schemas/snapshot.md
//  ("Replica state") for the packed byte string.
//
//  The state is what one ps_partition holds for each of the model's
//  variables, laid side by side: the values and every optimizer slot are
//  one flat vector each in the model's layout, so variable v is the slice
//  [offset, offset + count) of each, and the counters a partition keeps
//  (Adam's t, the update count, the duplicates) are kept per variable. The
//  ledger is one for the whole replica, since every update reaches every
//  variable.
//
//  Loading and unpacking build the new state on the side and swap it in
//  only once everything has been read and checked, so a refused file or
//  string leaves the replica as it was. The value vector itself stays at
//  one address for the replica's life (the new values are copied into it),
//  because a compute backend may hold a pointer to it.

#include "ps_replica.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ps_bytes.h"
#include "ps_floats.h"
#include "ps_log.h"
#include "ps_mix.h"
#include "ps_snapshot.h"

//  The float arrays are packed and hashed as they lie in memory, and the
//  packed format says little-endian float32, as the snapshot files do.
_Static_assert (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "replica state stores float arrays in host order, which must be little-endian");

//  The packed state's magic: like the snapshot file's, a high-bit byte
//  first and a CR LF pair, so that a mangling transfer is caught.
static const uint8_t s_magic [8] = { 0x89, 'P', 'S', 'R', 'E', 'P', '\r', '\n' };

#define S_FORMAT            1

//  Offsets of the packed header's fields (schemas/snapshot.md).
#define S_OFF_FORMAT        8
#define S_OFF_NVARS        12
#define S_OFF_COUNT        16
#define S_OFF_KIND         24
#define S_OFF_NESTEROV     28
#define S_OFF_SLOTS        32
#define S_OFF_RESERVED     36
#define S_OFF_DOUBLES      40
#define S_OFF_LEDGER_LEN  112
#define S_HEADER_SIZE     120
#define S_VAR_SIZE         32
#define S_TRAILER_SIZE      4

_Static_assert (S_OFF_DOUBLES + 8 * PS_OPT_NDOUBLES == S_OFF_LEDGER_LEN,
                "the optimizer doubles must end where the ledger length starts");

//  A partition's counters, for one variable.
typedef struct {
    uint64_t opt_t;             //  updates applied to its slots (Adam's t)
    uint64_t version;           //  updates applied to its values
    uint64_t duplicates;        //  repeated updates refused
} s_counts_t;

//  Everything but the values: what load and unpack build on the side and
//  swap in whole.
typedef struct {
    ps_opt_config_t opt;
    float *slots [PS_OPT_MAX_SLOTS];
    s_counts_t *counts;         //  one per variable
    ps_ledger_t *ledger;
} s_state_t;

struct _ps_replica_t {
    const ps_model_t *model;    //  borrowed; outlives the replica
    int nvars;
    size_t count;               //  floats in the value vector and in each slot
    float *values;              //  allocated once, never moved
    s_state_t state;
};

//  ---------------------------------------------------------------------
//  State helpers

static void
s_state_free (s_state_t *state)
{
    for (int i = 0; i < PS_OPT_MAX_SLOTS; i++)
        free (state->slots [i]);
    free (state->counts);
    ps_ledger_destroy (&state->ledger);
    memset (state, 0, sizeof *state);
}

//  Allocate the counters (zeroed) and the slots optimizer kind needs
//  (uninitialised) for nvars variables of count floats in all. Returns 0,
//  or PS_ETOOBIG with state left empty.
static int
s_state_alloc (s_state_t *state, ps_opt_kind_t kind, int nvars, size_t count, ps_error_t *err)
{
    memset (state, 0, sizeof *state);
    state->counts = calloc ((size_t) nvars, sizeof (s_counts_t));
    if (!state->counts)
        return ps_error_set (err, PS_ETOOBIG, "replica: cannot allocate the counters of %d variables",
                             nvars);
    int nslots = ps_opt_slot_count (kind);
    for (int i = 0; i < nslots; i++)
        if (!(state->slots [i] = ps_floats_alloc (count))) {
            s_state_free (state);
            return ps_error_set (err, PS_ETOOBIG,
                                 "replica: cannot allocate %d optimizer slots of %zu floats",
                                 nslots, count);
        }
    return PS_OK;
}

//  Replace the replica's state with *state, which the replica takes over.
static void
s_state_commit (ps_replica_t *self, s_state_t *state)
{
    s_state_free (&self->state);
    self->state = *state;
    memset (state, 0, sizeof *state);
}

//  The slots of variable v in state: pointers into the flat slot vectors.
static void
s_var_slots (const ps_replica_t *self, const s_state_t *state, int v, float **slots)
{
    size_t offset = ps_model_variable (self->model, v)->offset;
    for (int i = 0; i < PS_OPT_MAX_SLOTS; i++)
        slots [i] = state->slots [i] ? state->slots [i] + offset : NULL;
}

//  ---------------------------------------------------------------------
//  Construction and accessors

ps_replica_t *
ps_replica_new (const ps_model_t *model, uint64_t seed, const ps_opt_config_t *opt,
                ps_error_t *err)
{
    assert (model);
    assert (opt);
    if (ps_opt_config_validate (opt, err)) {
        ps_error_prefix (err, PS_EINVAL, "replica of model \"%s\"", ps_model_name (model));
        return NULL;
    }
    ps_replica_t *self = calloc (1, sizeof *self);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "replica: cannot allocate the replica");
        return NULL;
    }
    self->model = model;
    self->nvars = ps_model_variable_count (model);
    self->count = ps_model_param_count (model);
    self->values = ps_floats_alloc (self->count);
    if (!self->values) {
        ps_error_set (err, PS_ETOOBIG, "replica of model \"%s\": cannot allocate %zu floats",
                      ps_model_name (model), self->count);
        ps_replica_destroy (&self);
        return NULL;
    }
    if (s_state_alloc (&self->state, opt->kind, self->nvars, self->count, err)) {
        ps_replica_destroy (&self);
        return NULL;
    }
    self->state.opt = *opt;
    self->state.ledger = ps_ledger_new ();
    if (!self->state.ledger) {
        ps_error_set (err, PS_ETOOBIG, "replica: cannot allocate the ledger");
        ps_replica_destroy (&self);
        return NULL;
    }
    //  The same values every process computes from the seed, and the same
    //  values a ps-server gives a partition of the whole variable.
    ps_model_init_params (model, seed, self->values);
    ps_opt_init_slots (opt, self->state.slots, self->count);
    return self;
}

void
ps_replica_destroy (ps_replica_t **self_p)
{
    assert (self_p);
    ps_replica_t *self = *self_p;
    if (self) {
        free (self->values);
        s_state_free (&self->state);
        free (self);
        *self_p = NULL;
    }
}

float *
ps_replica_params (ps_replica_t *self)
{
    assert (self);
    return self->values;
}

size_t
ps_replica_count (const ps_replica_t *self)
{
    assert (self);
    return self->count;
}

uint64_t
ps_replica_updates (const ps_replica_t *self)
{
    assert (self);
    //  Every update reaches every variable, so the counts are equal unless
    //  a loaded checkpoint had them differ; then the smallest is the number
    //  of updates every variable has had.
    uint64_t updates = UINT64_MAX;
    for (int v = 0; v < self->nvars; v++)
        if (self->state.counts [v].version < updates)
            updates = self->state.counts [v].version;
    return self->nvars > 0 ? updates : 0;
}

const ps_ledger_t *
ps_replica_ledger (const ps_replica_t *self)
{
    assert (self);
    return self->state.ledger;
}

uint64_t
ps_replica_duplicates (const ps_replica_t *self)
{
    assert (self);
    uint64_t duplicates = 0;
    for (int v = 0; v < self->nvars; v++)
        if (self->state.counts [v].duplicates > duplicates)
            duplicates = self->state.counts [v].duplicates;
    return duplicates;
}

int
ps_replica_set_optimizer (ps_replica_t *self, const ps_opt_config_t *opt, ps_error_t *err)
{
    assert (self);
    assert (opt);
    int rc = ps_opt_config_validate (opt, err);
    if (rc)
        return ps_error_prefix (err, rc, "replica");
    if (opt->kind == self->state.opt.kind) {
        self->state.opt = *opt;
        return PS_OK;
    }
    //  Another kind: fresh slots, made before anything changes, and Adam's
    //  t counted again from the first update to them, as a partition does.
    float *slots [PS_OPT_MAX_SLOTS] = { NULL };
    int nslots = ps_opt_slot_count (opt->kind);
    for (int i = 0; i < nslots; i++)
        if (!(slots [i] = ps_floats_alloc (self->count))) {
            while (i-- > 0)
                free (slots [i]);
            return ps_error_set (err, PS_ETOOBIG,
                                 "replica: cannot allocate %d optimizer slots of %zu floats",
                                 nslots, self->count);
        }
    ps_opt_init_slots (opt, slots, self->count);
    for (int i = 0; i < PS_OPT_MAX_SLOTS; i++) {
        free (self->state.slots [i]);
        self->state.slots [i] = slots [i];
    }
    for (int v = 0; v < self->nvars; v++)
        self->state.counts [v].opt_t = 0;
    self->state.opt = *opt;
    return PS_OK;
}

//  ---------------------------------------------------------------------
//  Updates

int
ps_replica_apply (ps_replica_t *self, const float *grad, const uint64_t *steps,
                  size_t nsteps, ps_error_t *err)
{
    assert (self);
    assert (grad);
    if (nsteps == 0 || !steps)
        return ps_error_set (err, PS_EINVAL, "replica: an update with no step id, expected at "
                             "least one");
    //  Every check comes before the first change, so a refused update
    //  leaves the replica exactly as it was.
    for (size_t i = 0; i < nsteps; i++) {
        if (steps [i] == 0)
            return ps_error_set (err, PS_EINVAL,
                                 "replica: step id 0 (entry %zu of %zu), expected ids from 1",
                                 i, nsteps);
        for (size_t j = 0; j < i; j++)
            if (steps [j] == steps [i])
                return ps_error_set (err, PS_EINVAL,
                                     "replica: step %llu is listed twice in one update (entries "
                                     "%zu and %zu), expected distinct ids",
                                     (unsigned long long) steps [i], j, i);
    }
    s_state_t *state = &self->state;
    for (size_t i = 0; i < nsteps; i++)
        if (ps_ledger_contains (state->ledger, steps [i])) {
            for (int v = 0; v < self->nvars; v++)
                state->counts [v].duplicates++;
            return ps_error_set (err, PS_DUPLICATE, "replica: step %llu was applied before; "
                                 "nothing applied", (unsigned long long) steps [i]);
        }
    //  A gradient with NaN or an infinity would poison the values for
    //  good, as a ps-server refuses to let one do to a partition.
    for (int v = 0; v < self->nvars; v++) {
        const ps_variable_t *var = ps_model_variable (self->model, v);
        size_t at = ps_floats_find_nonfinite (grad + var->offset, var->count);
        if (at < var->count)
            return ps_error_set (err, PS_ENONFINITE, "replica: the gradient of %s holds %g at "
                                 "element %zu; nothing applied", var->name,
                                 (double) grad [var->offset + at], at);
    }
    //  Reserving every id first makes the marks below certain to succeed,
    //  so the update is recorded whole or not at all.
    for (size_t i = 0; i < nsteps; i++) {
        int rc = ps_ledger_reserve (state->ledger, steps [i], err);
        if (rc)
            return ps_error_prefix (err, rc, "replica: step %llu",
                                    (unsigned long long) steps [i]);
    }
    for (size_t i = 0; i < nsteps; i++) {
        int rc = ps_ledger_mark (state->ledger, steps [i], NULL);
        assert (rc == PS_OK);
        (void) rc;
    }
    //  Each variable is updated as a ps-server updates a partition holding
    //  all of it: the same kernel, over the same elements (so clipping by
    //  norm takes the variable's norm), with the variable's own t.
    for (int v = 0; v < self->nvars; v++) {
        const ps_variable_t *var = ps_model_variable (self->model, v);
        float *slots [PS_OPT_MAX_SLOTS];
        s_var_slots (self, state, v, slots);
        s_counts_t *counts = &state->counts [v];
        counts->opt_t++;
        ps_opt_apply (&state->opt, self->values + var->offset, grad + var->offset, slots,
                      var->count, counts->opt_t);
        counts->version++;
    }
    return PS_OK;
}

//  ---------------------------------------------------------------------
//  Checksum

//  Fold 64 bits into the hash. The step is a bijection of the word for any
//  hash before it (xor, add a constant, then the splitmix64 finalizer, each
//  invertible), so two inputs that differ in one word always give
//  different hashes; the constant keeps zero words from leaving a zero
//  hash at zero.
static uint64_t
s_hash_word (uint64_t hash, uint64_t word)
{
    return ps_mix64 ((hash ^ word) + PS_MIX_GOLDEN_GAMMA);
}

//  Fold len bytes into the hash, their length first, so that sections of
//  different lengths cannot line up.
static uint64_t
s_hash_bytes (uint64_t hash, const void *data, size_t len)
{
    const uint8_t *p = data;
    hash = s_hash_word (hash, (uint64_t) len);
    size_t i = 0;
    for (; i + 8 <= len; i += 8)
        hash = s_hash_word (hash, ps_get_u64 (p + i));
    if (i < len) {
        uint64_t tail = 0;
        for (size_t k = 0; i + k < len; k++)
            tail |= (uint64_t) p [i + k] << (8 * k);
        hash = s_hash_word (hash, tail);
    }
    return hash;
}

uint64_t
ps_replica_checksum (const ps_replica_t *self)
{
    assert (self);
    const s_state_t *state = &self->state;
    //  The state the next updates depend on: the layout, the optimizer
    //  kind (which says how many slots there are), every variable's t and
    //  update count, the values, the slots and the ledger. The optimizer's
    //  settings are left out (the caller sets them each step from the
    //  schedule), and so are the duplicates counters: a member that refused
    //  a repeated message holds the same model as one that never got it.
    uint64_t hash = s_hash_word (0, (uint64_t) self->nvars);
    hash = s_hash_word (hash, (uint64_t) self->count);
    hash = s_hash_word (hash, (uint64_t) state->opt.kind);
    for (int v = 0; v < self->nvars; v++) {
        hash = s_hash_word (hash, state->counts [v].opt_t);
        hash = s_hash_word (hash, state->counts [v].version);
    }
    size_t bytes = self->count * sizeof (float);
    hash = s_hash_bytes (hash, self->values, bytes);
    for (int i = 0; i < ps_opt_slot_count (state->opt.kind); i++)
        hash = s_hash_bytes (hash, state->slots [i], bytes);
    size_t ledger_len = ps_ledger_encoded_size (state->ledger);
    uint8_t *ledger = malloc (ledger_len);
    if (!ledger)
        abort ();
    ps_ledger_encode (state->ledger, ledger);
    hash = s_hash_bytes (hash, ledger, ledger_len);
    free (ledger);
    return hash;
}

//  ---------------------------------------------------------------------
//  Snapshot files

//  The path of variable v's file in dir into path, its name into file.
static int
s_var_path (const ps_replica_t *self, int v, const char *dir, char *file, size_t file_len,
            char *path, size_t path_len, ps_error_t *err)
{
    const char *name = ps_model_variable (self->model, v)->name;
    if (ps_snapshot_filename (name, 0, file, file_len))
        return ps_error_set (err, PS_EINVAL, "replica: the file name of variable \"%s\" is too long",
                             name);
    if ((size_t) snprintf (path, path_len, "%s/%s", dir, file) >= path_len)
        return ps_error_set (err, PS_EINVAL, "replica: the path of %s in %s is too long", file, dir);
    return PS_OK;
}

int
ps_replica_save (const ps_replica_t *self, const char *dir, ps_snap_file_t **files,
                 size_t *nfiles, ps_error_t *err)
{
    assert (self);
    assert (dir);
    assert (files);
    assert (nfiles);
    const s_state_t *state = &self->state;
    ps_snap_file_t *list = calloc ((size_t) self->nvars + 1, sizeof *list);
    if (!list)
        return ps_error_set (err, PS_ETOOBIG, "replica: cannot allocate the list of %d files",
                             self->nvars);
    for (int v = 0; v < self->nvars; v++) {
        const ps_variable_t *var = ps_model_variable (self->model, v);
        ps_snap_file_t *entry = &list [v];
        char path [4096];
        int rc = s_var_path (self, v, dir, entry->file, sizeof entry->file, path, sizeof path, err);
        if (rc) {
            free (list);
            return rc;
        }
        //  Exactly the state a ps-server's partition 0 holding every row
        //  of the variable would write, so the files are the same bytes.
        ps_snapshot_t snap = {
            .part = 0, .shape = var->shape,
            .row_begin = 0, .row_end = var->shape.dims [0],
            .opt = state->opt,
            .opt_t = state->counts [v].opt_t,
            .version = state->counts [v].version,
            .duplicates = state->counts [v].duplicates,
            .values = self->values + var->offset,
            .ledger = state->ledger,
        };
        snprintf (snap.var, sizeof snap.var, "%s", var->name);
        s_var_slots (self, state, v, snap.slots);
        rc = ps_snapshot_write (path, &snap, err);
        if (rc == PS_OK)
            rc = ps_snapshot_summary (path, &entry->bytes, &entry->crc, err);
        if (rc) {
            free (list);
            return rc;
        }
        entry->server = -1;
        snprintf (entry->var, sizeof entry->var, "%s", var->name);
        entry->part = 0;
        entry->version = snap.version;
    }
    *files = list;
    *nfiles = (size_t) self->nvars;
    return PS_OK;
}

//  Check that snap, read from path, holds all of variable v, and is not
//  refused by the state built so far (its optimizer's kind must be the one
//  of the first file, first_path).
static int
s_check_file (const ps_replica_t *self, int v, const char *path, const ps_snapshot_t *snap,
              const s_state_t *state, const char *first_path, ps_error_t *err)
{
    const ps_variable_t *var = ps_model_variable (self->model, v);
    char have [96], want [96];
    if (strcmp (snap->var, var->name) != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: holds variable \"%s\", expected \"%s\"",
                             path, snap->var, var->name);
    if (snap->part != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: holds partition %u of \"%s\", expected 0",
                             path, snap->part, var->name);
    if (!ps_shape_equal (&snap->shape, &var->shape))
        return ps_error_set (err, PS_ESHAPE,
                             "file %s: variable \"%s\" has shape %s, but model \"%s\" needs %s",
                             path, var->name, ps_shape_str (&snap->shape, have, sizeof have),
                             ps_model_name (self->model),
                             ps_shape_str (&var->shape, want, sizeof want));
    if (snap->row_begin != 0 || snap->row_end != var->shape.dims [0])
        return ps_error_set (err, PS_ESHAPE,
                             "file %s: holds rows [%lld,%lld) of \"%s\", expected all of its "
                             "rows [0,%lld) (reshard a partitioned checkpoint first)",
                             path, (long long) snap->row_begin, (long long) snap->row_end,
                             var->name, (long long) var->shape.dims [0]);
    if (v == 0) {
        ps_error_t opt_err;
        if (ps_opt_config_validate (&snap->opt, &opt_err))
            return ps_error_set (err, PS_EINVAL, "file %s: %s", path, opt_err.msg);
    }
    else
    if (snap->opt.kind != state->opt.kind)
        return ps_error_set (err, PS_EINVAL,
                             "file %s: optimizer %s, expected %s as in %s (one optimizer for "
                             "every variable)", path, ps_opt_kind_name (snap->opt.kind),
                             ps_opt_kind_name (state->opt.kind), first_path);
    return PS_OK;
}

int
ps_replica_load (ps_replica_t *self, const char *dir, ps_error_t *err)
{
    assert (self);
    assert (dir);
    //  The new values and state are built on the side, one file at a time
    //  (each file's arrays are freed once copied), and swapped in at the end.
    float *values = ps_floats_alloc (self->count);
    uint64_t *ledger_counts = calloc ((size_t) self->nvars + 1, sizeof (uint64_t));
    s_state_t state = { 0 };
    char first_path [4096] = "";
    int rc = PS_OK;
    if (!values || !ledger_counts)
        rc = ps_error_set (err, PS_ETOOBIG, "replica: cannot allocate %zu floats to load into",
                           self->count);
    for (int v = 0; v < self->nvars && rc == PS_OK; v++) {
        const ps_variable_t *var = ps_model_variable (self->model, v);
        char file [PS_NAME_MAX * 3 + 32], path [4096];
        ps_snapshot_t snap;
        rc = s_var_path (self, v, dir, file, sizeof file, path, sizeof path, err);
        if (rc == PS_OK)
            rc = ps_snapshot_read (path, &snap, err);
        if (rc)
            break;
        rc = s_check_file (self, v, path, &snap, &state, first_path, err);
        if (rc == PS_OK && v == 0) {
            rc = s_state_alloc (&state, snap.opt.kind, self->nvars, self->count, err);
            state.opt = snap.opt;
            snprintf (first_path, sizeof first_path, "%s", path);
        }
        if (rc) {
            ps_snapshot_release (&snap);
            break;
        }
        if (v > 0 && ps_opt_config_differs (&snap.opt, &state.opt, NULL, 0))
            ps_warn ("replica: the optimizer settings in %s differ from those in %s; keeping "
                     "those of %s", path, first_path, first_path);
        memcpy (values + var->offset, snap.values, var->count * sizeof (float));
        for (int i = 0; i < ps_opt_slot_count (state.opt.kind); i++)
            memcpy (state.slots [i] + var->offset, snap.slots [i], var->count * sizeof (float));
        state.counts [v] = (s_counts_t) {
            .opt_t = snap.opt_t, .version = snap.version, .duplicates = snap.duplicates,
        };
        //  The replica has one ledger: the steps every variable applied.
        ledger_counts [v] = ps_ledger_count (snap.ledger);
        if (!state.ledger) {
            state.ledger = snap.ledger;
            snap.ledger = NULL;
        }
        else
        if (!ps_ledger_equal (state.ledger, snap.ledger)) {
            ps_ledger_t *both = ps_ledger_intersect (state.ledger, snap.ledger, err);
            if (!both)
                rc = ps_error_prefix (err, PS_ETOOBIG, "file %s", path);
            else {
                ps_ledger_destroy (&state.ledger);
                state.ledger = both;
            }
        }
        ps_snapshot_release (&snap);
    }
    if (rc == PS_OK && self->nvars == 0)
        rc = ps_error_set (err, PS_EINVAL, "replica: model \"%s\" has no variables to load",
                           ps_model_name (self->model));
    if (rc == PS_OK) {
        //  Ledgers differ only when the checkpoint came from servers that a
        //  step reached in part: that step is applied again to every
        //  variable, as ps_reshard does for the rows of one variable.
        uint64_t common = ps_ledger_count (state.ledger);
        for (int v = 0; v < self->nvars; v++)
            if (ledger_counts [v] != common)
                ps_warn ("replica: variable \"%s\" in %s has %llu steps that other variables "
                         "lack; keeping the %llu steps every variable applied",
                         ps_model_variable (self->model, v)->name, dir,
                         (unsigned long long) (ledger_counts [v] - common),
                         (unsigned long long) common);
        memcpy (self->values, values, self->count * sizeof (float));
        s_state_commit (self, &state);
    }
    s_state_free (&state);
    free (ledger_counts);
    free (values);
    return rc;
}

//  ---------------------------------------------------------------------
//  Packed state

void
ps_replica_pack (const ps_replica_t *self, uint8_t **buf, size_t *len)
{
    assert (self);
    assert (buf);
    assert (len);
    const s_state_t *state = &self->state;
    int nslots = ps_opt_slot_count (state->opt.kind);
    size_t array_bytes = self->count * sizeof (float);
    size_t ledger_len = ps_ledger_encoded_size (state->ledger);
    size_t vars_at = S_HEADER_SIZE;
    size_t arrays_at = vars_at + S_VAR_SIZE * (size_t) self->nvars;
    size_t ledger_at = arrays_at + array_bytes * (size_t) (1 + nslots);
    size_t size = ledger_at + ledger_len + S_TRAILER_SIZE;
    uint8_t *out = calloc (1, size);
    //  The state was allocated once already; not having its size again is
    //  not something a state transfer can work around.
    if (!out)
        abort ();
    memcpy (out, s_magic, sizeof s_magic);
    ps_put_u32 (out + S_OFF_FORMAT, S_FORMAT);
    ps_put_u32 (out + S_OFF_NVARS, (uint32_t) self->nvars);
    ps_put_u64 (out + S_OFF_COUNT, (uint64_t) self->count);
    ps_put_u32 (out + S_OFF_KIND, (uint32_t) state->opt.kind);
    ps_put_u32 (out + S_OFF_NESTEROV, state->opt.nesterov ? 1 : 0);
    ps_put_u32 (out + S_OFF_SLOTS, (uint32_t) nslots);
    for (int i = 0; i < PS_OPT_NDOUBLES; i++) {
        double value = ps_opt_double_get (&state->opt, i);
        uint64_t bits;
        memcpy (&bits, &value, sizeof bits);
        ps_put_u64 (out + S_OFF_DOUBLES + 8 * (size_t) i, bits);
    }
    ps_put_u64 (out + S_OFF_LEDGER_LEN, (uint64_t) ledger_len);
    for (int v = 0; v < self->nvars; v++) {
        uint8_t *entry = out + vars_at + S_VAR_SIZE * (size_t) v;
        ps_put_u64 (entry, (uint64_t) ps_model_variable (self->model, v)->count);
        ps_put_u64 (entry + 8, state->counts [v].opt_t);
        ps_put_u64 (entry + 16, state->counts [v].version);
        ps_put_u64 (entry + 24, state->counts [v].duplicates);
    }
    memcpy (out + arrays_at, self->values, array_bytes);
    for (int i = 0; i < nslots; i++)
        memcpy (out + arrays_at + array_bytes * (size_t) (1 + i), state->slots [i], array_bytes);
    ps_ledger_encode (state->ledger, out + ledger_at);
    uint32_t crc = (uint32_t) crc32_z (crc32_z (0, Z_NULL, 0), out, size - S_TRAILER_SIZE);
    ps_put_u32 (out + size - S_TRAILER_SIZE, crc);
    *buf = out;
    *len = size;
}

//  Check the packed header's fields, which the checksum has vouched for,
//  against the replica and one another, and fill in the optimizer. Sets
//  *nslots and *ledger_len.
static int
s_unpack_header (const ps_replica_t *self, const uint8_t *buf, size_t len,
                 ps_opt_config_t *opt, int *nslots, size_t *ledger_len, ps_error_t *err)
{
    uint32_t nvars = ps_get_u32 (buf + S_OFF_NVARS);
    uint64_t count = ps_get_u64 (buf + S_OFF_COUNT);
    if (nvars != (uint32_t) self->nvars || count != (uint64_t) self->count)
        return ps_error_set (err, PS_ESHAPE,
                             "replica state: %u variables of %llu floats, but model \"%s\" has "
                             "%d of %zu", nvars, (unsigned long long) count,
                             ps_model_name (self->model), self->nvars, self->count);
    uint32_t kind = ps_get_u32 (buf + S_OFF_KIND);
    if (kind > PS_OPT_ADAM)
        return ps_error_set (err, PS_ECORRUPT, "replica state: optimizer kind %u, expected 0..%d",
                             kind, PS_OPT_ADAM);
    memset (opt, 0, sizeof *opt);
    opt->kind = (ps_opt_kind_t) kind;
    uint32_t slots = ps_get_u32 (buf + S_OFF_SLOTS);
    if (slots != (uint32_t) ps_opt_slot_count (opt->kind))
        return ps_error_set (err, PS_ECORRUPT, "replica state: %u slots, expected %d for %s",
                             slots, ps_opt_slot_count (opt->kind), ps_opt_kind_name (opt->kind));
    *nslots = (int) slots;
    uint32_t nesterov = ps_get_u32 (buf + S_OFF_NESTEROV);
    if (nesterov > 1)
        return ps_error_set (err, PS_ECORRUPT, "replica state: nesterov flag %u, expected 0 or 1",
                             nesterov);
    opt->nesterov = nesterov == 1;
    uint32_t reserved = ps_get_u32 (buf + S_OFF_RESERVED);
    if (reserved != 0)
        return ps_error_set (err, PS_ECORRUPT, "replica state: reserved field is %u, expected 0",
                             reserved);
    for (int i = 0; i < PS_OPT_NDOUBLES; i++) {
        uint64_t bits = ps_get_u64 (buf + S_OFF_DOUBLES + 8 * (size_t) i);
        double value;
        memcpy (&value, &bits, sizeof value);
        ps_opt_double_set (opt, i, value);
    }
    ps_error_t opt_err;
    if (ps_opt_config_validate (opt, &opt_err))
        return ps_error_set (err, PS_ECORRUPT, "replica state: %s", opt_err.msg);
    //  The model bounds the arrays' size, so the sum cannot overflow; the
    //  ledger's length must then be exactly what is left.
    size_t fixed = S_HEADER_SIZE + S_VAR_SIZE * (size_t) self->nvars
                 + self->count * sizeof (float) * (size_t) (1 + slots) + S_TRAILER_SIZE;
    uint64_t stored = ps_get_u64 (buf + S_OFF_LEDGER_LEN);
    if (len < fixed || stored != (uint64_t) (len - fixed))
        return ps_error_set (err, PS_ECORRUPT,
                             "replica state: %zu bytes, expected %zu plus a ledger of %llu",
                             len, fixed, (unsigned long long) stored);
    *ledger_len = (size_t) stored;
    for (int v = 0; v < self->nvars; v++) {
        const uint8_t *entry = buf + S_HEADER_SIZE + S_VAR_SIZE * (size_t) v;
        const ps_variable_t *var = ps_model_variable (self->model, v);
        uint64_t elements = ps_get_u64 (entry);
        if (elements != (uint64_t) var->count)
            return ps_error_set (err, PS_ESHAPE,
                                 "replica state: variable %d has %llu floats, but \"%s\" of model "
                                 "\"%s\" has %zu", v, (unsigned long long) elements, var->name,
                                 ps_model_name (self->model), var->count);
    }
    return PS_OK;
}

int
ps_replica_unpack (ps_replica_t *self, const uint8_t *buf, size_t len, ps_error_t *err)
{
    assert (self);
    assert (buf || len == 0);
    //  Magic, format and checksum first: no field is trusted before the
    //  checksum has vouched for it.
    if (len < S_HEADER_SIZE + S_TRAILER_SIZE)
        return ps_error_set (err, PS_ECORRUPT, "replica state: %zu bytes, expected at least %d",
                             len, S_HEADER_SIZE + S_TRAILER_SIZE);
    if (memcmp (buf, s_magic, sizeof s_magic) != 0)
        return ps_error_set (err, PS_ECORRUPT, "replica state: bad magic");
    uint32_t format = ps_get_u32 (buf + S_OFF_FORMAT);
    if (format != S_FORMAT)
        return ps_error_set (err, PS_ECORRUPT, "replica state: format version %u, expected %d",
                             format, S_FORMAT);
    uint32_t stored = ps_get_u32 (buf + len - S_TRAILER_SIZE);
    uint32_t computed = (uint32_t) crc32_z (crc32_z (0, Z_NULL, 0), buf, len - S_TRAILER_SIZE);
    if (stored != computed)
        return ps_error_set (err, PS_ECORRUPT,
                             "replica state: checksum mismatch (stored 0x%08x, computed 0x%08x)",
                             stored, computed);
    ps_opt_config_t opt;
    int nslots = 0;
    size_t ledger_len = 0;
    int rc = s_unpack_header (self, buf, len, &opt, &nslots, &ledger_len, err);
    if (rc)
        return rc;

    size_t array_bytes = self->count * sizeof (float);
    const uint8_t *arrays = buf + S_HEADER_SIZE + S_VAR_SIZE * (size_t) self->nvars;
    const uint8_t *ledger = arrays + array_bytes * (size_t) (1 + nslots);
    s_state_t state;
    rc = s_state_alloc (&state, opt.kind, self->nvars, self->count, err);
    if (rc)
        return rc;
    state.opt = opt;
    ps_error_t ledger_err;
    state.ledger = ps_ledger_decode (ledger, ledger_len, &ledger_err);
    if (!state.ledger) {
        s_state_free (&state);
        return ps_error_set (err, ledger_err.code, "replica state: %s", ledger_err.msg);
    }
    //  Everything is checked: from here on nothing can fail.
    for (int v = 0; v < self->nvars; v++) {
        const uint8_t *entry = buf + S_HEADER_SIZE + S_VAR_SIZE * (size_t) v;
        state.counts [v] = (s_counts_t) {
            .opt_t = ps_get_u64 (entry + 8),
            .version = ps_get_u64 (entry + 16),
            .duplicates = ps_get_u64 (entry + 24),
        };
    }
    for (int i = 0; i < nslots; i++)
        memcpy (state.slots [i], arrays + array_bytes * (size_t) (1 + i), array_bytes);
    memcpy (self->values, arrays, array_bytes);
    s_state_commit (self, &state);
    return PS_OK;
}
