//  Step ledger: a watermark plus a bitmap window; see ps_ledger.h.
//
//  In memory the window is a run of 64-bit words aligned to multiples of 64
//  steps: live word 0 covers steps [origin, origin + 64), where origin is
//  base rounded down to a multiple of 64, and bit k of live word i stands for
//  step origin + 64 i + k. The bits of word 0 for the steps [origin, base)
//  are kept set, so the watermark is always the position of the first clear
//  bit and advancing it is a count of trailing ones. A word that fills up is
//  dropped by moving `head` rather than by shifting the array; the array is
//  compacted only when the window would run past its end, and by then at
//  least as many words have been dropped as are moved, so marking a step
//  costs amortised O(1).
//
//  Two invariants make the representation canonical, which is what lets
//  ps_ledger_equal and ps_ledger_encode work on the words directly: the last
//  live word is never zero (words are only created to hold a new bit and are
//  only dropped from the front), and word 0 holds the set bits below base.
//
//  Step 0 is kept apart, in `zero`, and its bit in the window is set from
//  the start whether step 0 comes or not. A cluster numbers its steps from
//  1, so a watermark that waited for step 0 would never move, and the
//  window would grow one bit per step until the span limit stopped the
//  run. Some clients do number from 0, and the flag records their step 0
//  exactly once like any other.

#include "ps_bytes.h"
#include "ps_ledger.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

//  Encoded header: u64 base, u64 count, u32 word count.
#define S_HEADER_SIZE  20

struct _ps_ledger_t {
    uint64_t base;          //  every step in [1, base) is recorded; base >= 1
    uint64_t count;         //  distinct steps recorded, step 0 included
    bool zero;              //  step 0 is recorded
    uint64_t *words;        //  storage; the live window is words [head, head + nwords)
    size_t head;
    size_t nwords;
    size_t capacity;        //  words allocated
};

//  A ledger with no window and a watermark of 0, for the constructors to
//  fill in.
static ps_ledger_t *
s_alloc (void)
{
    return calloc (1, sizeof (ps_ledger_t));
}

static int s_extend (ps_ledger_t *self, size_t need, ps_error_t *err);

ps_ledger_t *
ps_ledger_new (void)
{
    ps_ledger_t *self = s_alloc ();
    if (!self)
        return NULL;
    //  Step 0's bit is set from the start (see the top of this file), so
    //  the watermark waits for step 1.
    self->base = 1;
    if (s_extend (self, 1, NULL)) {
        ps_ledger_destroy (&self);
        return NULL;
    }
    self->words [0] = 1;
    return self;
}

void
ps_ledger_destroy (ps_ledger_t **self_p)
{
    assert (self_p);
    if (*self_p) {
        free ((*self_p)->words);
        free (*self_p);
        *self_p = NULL;
    }
}

static uint64_t
s_origin (const ps_ledger_t *self)
{
    return self->base & ~UINT64_C (63);
}

//  Make room for a window of need words: when it would run past the end of
//  the array, either compact the window in place (when it uses at most half
//  the array, so the move is paid for by the words dropped since the last
//  compaction) or move it to an array of twice the needed size. The live
//  window itself is unchanged.
static int
s_make_room (ps_ledger_t *self, size_t need, ps_error_t *err)
{
    if (need <= self->nwords)
        return PS_OK;
    if (self->head + need > self->capacity) {
        if (need > self->capacity / 2) {
            size_t capacity = 2 * need;
            uint64_t *words = malloc (capacity * sizeof (uint64_t));
            if (!words)
                return ps_error_set (err, PS_ETOOBIG,
                                     "ledger: cannot allocate %zu bytes for a window of %zu steps",
                                     capacity * sizeof (uint64_t), need * 64);
            if (self->nwords)
                memcpy (words, self->words + self->head, self->nwords * sizeof (uint64_t));
            free (self->words);
            self->words = words;
            self->capacity = capacity;
        }
        else
            memmove (self->words, self->words + self->head, self->nwords * sizeof (uint64_t));
        self->head = 0;
    }
    return PS_OK;
}

//  Make the live window at least need words long, the new words clear.
static int
s_extend (ps_ledger_t *self, size_t need, ps_error_t *err)
{
    if (need <= self->nwords)
        return PS_OK;
    int rc = s_make_room (self, need, err);
    if (rc)
        return rc;
    memset (self->words + self->head + self->nwords, 0,
            (need - self->nwords) * sizeof (uint64_t));
    self->nwords = need;
    return PS_OK;
}

//  Move the watermark past the recorded steps at its position, dropping the
//  words that have filled up.
static void
s_advance (ps_ledger_t *self)
{
    while (self->nwords > 0 && self->words [self->head] == UINT64_MAX) {
        self->head++;
        self->nwords--;
        self->base = s_origin (self) + 64;
    }
    if (self->nwords > 0)
        self->base = s_origin (self) + (uint64_t) __builtin_ctzll (~self->words [self->head]);
    else
        //  An empty window can start again at the front of the array.
        self->head = 0;
}

//  The checks every new step must pass; step is at or above the watermark.
static int
s_check_step (ps_ledger_t *self, uint64_t step, ps_error_t *err)
{
    if (step - self->base >= PS_LEDGER_MAX_SPAN)
        return ps_error_set (err, PS_EINVAL,
                             "ledger: step %llu is %llu above the watermark %llu, expected less than %llu",
                             (unsigned long long) step, (unsigned long long) (step - self->base),
                             (unsigned long long) self->base,
                             (unsigned long long) PS_LEDGER_MAX_SPAN);
    //  Recording step 2^64-1 would move the watermark past the largest
    //  uint64_t, so that one value is not a valid step id.
    if (step == UINT64_MAX)
        return ps_error_set (err, PS_EINVAL, "ledger: step 2^64-1 is reserved, expected a smaller id");
    return PS_OK;
}

int
ps_ledger_reserve (ps_ledger_t *self, uint64_t step, ps_error_t *err)
{
    assert (self);
    if (step < self->base)
        return PS_OK;
    int rc = s_check_step (self, step, err);
    if (rc)
        return rc;
    //  Only the room: clear words made live here would break the invariant
    //  that the last live word is not zero whenever the mark never comes
    //  (a request refused by another partition). The head and the window's
    //  end only move up until then, so the room stays enough.
    return s_make_room (self, (size_t) ((step - s_origin (self)) / 64) + 1, err);
}

int
ps_ledger_mark (ps_ledger_t *self, uint64_t step, ps_error_t *err)
{
    assert (self);
    if (step == 0) {
        if (self->zero)
            return PS_DUPLICATE;
        self->zero = true;
        self->count++;
        return PS_OK;
    }
    if (step < self->base)
        return PS_DUPLICATE;
    int rc = s_check_step (self, step, err);
    if (rc)
        return rc;
    uint64_t offset = step - s_origin (self);
    size_t word = (size_t) (offset / 64);
    uint64_t bit = UINT64_C (1) << (offset % 64);
    if (word < self->nwords && (self->words [self->head + word] & bit))
        return PS_DUPLICATE;
    rc = s_extend (self, word + 1, err);
    if (rc)
        return rc;
    self->words [self->head + word] |= bit;
    self->count++;
    if (step == self->base)
        s_advance (self);
    return PS_OK;
}

bool
ps_ledger_contains (const ps_ledger_t *self, uint64_t step)
{
    assert (self);
    if (step == 0)
        return self->zero;
    if (step < self->base)
        return true;
    uint64_t offset = step - s_origin (self);
    if (offset / 64 >= self->nwords)
        return false;
    return (self->words [self->head + offset / 64] >> (offset % 64)) & 1;
}

uint64_t
ps_ledger_count (const ps_ledger_t *self)
{
    assert (self);
    return self->count;
}

uint64_t
ps_ledger_base (const ps_ledger_t *self)
{
    assert (self);
    return self->base;
}

//  The watermark the encoding states. It is the ledger's own, except when
//  neither step 0 nor step 1 is recorded: the encoding then states 0, as
//  every writer did before step 0 was kept apart, so that an empty
//  ledger, or one without step 1, is written byte for byte as before.
static uint64_t
s_encoded_base (const ps_ledger_t *self)
{
    return self->zero || self->base > 1 ? self->base : 0;
}

//  Number of words the encoding needs: enough to reach the highest recorded
//  step above the watermark, counted from the encoded watermark.
static size_t
s_encoded_words (const ps_ledger_t *self)
{
    if (self->nwords == 0)
        return 0;
    uint64_t last = self->words [self->head + self->nwords - 1];
    uint64_t top = s_origin (self) + 64 * (uint64_t) (self->nwords - 1)
                 + (uint64_t) (63 - __builtin_clzll (last));
    if (top < self->base)
        return 0;
    return (size_t) ((top - s_encoded_base (self)) / 64 + 1);
}

size_t
ps_ledger_encoded_size (const ps_ledger_t *self)
{
    assert (self);
    return S_HEADER_SIZE + 8 * s_encoded_words (self);
}

//  The encoded bitmap starts at the watermark, not at the aligned origin,
//  so that a reader needs no knowledge of the in-memory layout: bit k of
//  encoded word j stands for step base + 64 j + k.
void
ps_ledger_encode (const ps_ledger_t *self, uint8_t *buf)
{
    assert (self);
    assert (buf);
    size_t nwords = s_encoded_words (self);
    uint64_t base = s_encoded_base (self);
    ps_put_u64 (buf, base);
    ps_put_u64 (buf + 8, self->count);
    ps_put_u32 (buf + 16, (uint32_t) nwords);
    //  An empty window has no array at all, and arithmetic on a null
    //  pointer is undefined even when it adds nothing.
    const uint64_t *live = nwords ? self->words + self->head : NULL;
    unsigned shift = (unsigned) (base - s_origin (self));
    for (size_t j = 0; j < nwords; j++) {
        uint64_t word = live [j] >> shift;
        if (shift && j + 1 < self->nwords)
            word |= live [j + 1] << (64 - shift);
        //  With an encoded watermark of 0, bit 0 is step 0, which is not
        //  recorded: its bit in the window was only set to let the
        //  watermark pass it.
        if (j == 0 && base == 0)
            word &= ~UINT64_C (1);
        ps_put_u64 (buf + S_HEADER_SIZE + 8 * j, word);
    }
}

ps_ledger_t *
ps_ledger_decode (const uint8_t *buf, size_t len, ps_error_t *err)
{
    assert (buf || len == 0);
    if (len < S_HEADER_SIZE) {
        ps_error_set (err, PS_ECORRUPT, "ledger: %zu bytes, expected at least %d",
                      len, S_HEADER_SIZE);
        return NULL;
    }
    uint64_t base = ps_get_u64 (buf);
    uint64_t count = ps_get_u64 (buf + 8);
    size_t nwords = ps_get_u32 (buf + 16);
    if (nwords > PS_LEDGER_MAX_SPAN / 64) {
        ps_error_set (err, PS_ECORRUPT, "ledger: %zu bitmap words, expected at most %llu",
                      nwords, (unsigned long long) (PS_LEDGER_MAX_SPAN / 64));
        return NULL;
    }
    if (len != S_HEADER_SIZE + 8 * nwords) {
        ps_error_set (err, PS_ECORRUPT, "ledger: %zu bytes, expected %zu for %zu bitmap words",
                      len, S_HEADER_SIZE + 8 * nwords, nwords);
        return NULL;
    }
    const uint8_t *bits = buf + S_HEADER_SIZE;
    //  The highest recorded step above the watermark, as an offset from it.
    uint64_t top = 0;
    if (nwords > 0) {
        if (ps_get_u64 (bits) & 1) {
            ps_error_set (err, PS_ECORRUPT,
                          "ledger: the bit for the watermark step %llu is set, expected it clear",
                          (unsigned long long) base);
            return NULL;
        }
        uint64_t last = ps_get_u64 (bits + 8 * (nwords - 1));
        if (last == 0) {
            ps_error_set (err, PS_ECORRUPT, "ledger: the last bitmap word is zero, expected it trimmed");
            return NULL;
        }
        top = 64 * (uint64_t) (nwords - 1) + (uint64_t) (63 - __builtin_clzll (last));
        if (top >= UINT64_MAX - base) {
            ps_error_set (err, PS_ECORRUPT, "ledger: a step above 2^64-2 is recorded");
            return NULL;
        }
    }
    uint64_t population = 0;
    for (size_t j = 0; j < nwords; j++)
        population += (uint64_t) __builtin_popcountll (ps_get_u64 (bits + 8 * j));
    //  The count tells whether step 0 is recorded: every step below a
    //  watermark of 1 or more and the bitmap's, or, from a watermark of 2,
    //  one fewer below it when step 0 is missing (see schemas/snapshot.md).
    bool zero;
    if (count >= base && count - base == population)
        zero = base > 0;
    else
    if (base >= 2 && count >= base - 1 && count - (base - 1) == population)
        zero = false;
    else {
        ps_error_set (err, PS_ECORRUPT,
                      "ledger: count is %llu, expected %llu in the bitmap plus %llu below the "
                      "watermark %llu (or one fewer there without step 0)",
                      (unsigned long long) count, (unsigned long long) population,
                      (unsigned long long) base, (unsigned long long) base);
        return NULL;
    }

    ps_ledger_t *self = s_alloc ();
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "ledger: cannot allocate a ledger");
        return NULL;
    }
    self->base = base;
    self->count = count;
    self->zero = zero;
    unsigned shift = (unsigned) (base - s_origin (self));
    //  Live words reach from the origin to the highest set bit, which is
    //  either the top recorded step or, with nothing above the watermark,
    //  the filled-in step just below it, or step 0's bit.
    size_t need = nwords > 0 ? (size_t) ((shift + top) / 64 + 1) : (shift > 0 || base == 0 ? 1 : 0);
    if (s_extend (self, need, err)) {
        ps_ledger_destroy (&self);
        return NULL;
    }
    if (need > 0)
        self->words [0] |= (UINT64_C (1) << shift) - 1;
    for (size_t j = 0; j < nwords; j++) {
        uint64_t word = ps_get_u64 (bits + 8 * j);
        self->words [j] |= word << shift;
        if (shift && j + 1 < need)
            self->words [j + 1] |= word >> (64 - shift);
    }
    if (base == 0) {
        //  Step 0's bit, and the watermark moved past the steps from 1 the
        //  bitmap holds: writers before step 0 was kept apart left it at 0
        //  for good.
        self->words [0] |= 1;
        s_advance (self);
    }
    return self;
}

bool
ps_ledger_equal (const ps_ledger_t *a, const ps_ledger_t *b)
{
    assert (a);
    assert (b);
    //  The representation is canonical (see the top of this file), so equal
    //  contents mean equal watermarks and equal live words.
    return a->base == b->base
        && a->count == b->count
        && a->zero == b->zero
        && a->nwords == b->nwords
        && (a->nwords == 0
            || memcmp (a->words + a->head, b->words + b->head,
                       a->nwords * sizeof (uint64_t)) == 0);
}

//  The recorded steps among [start, start + 64), start a multiple of 64, as
//  a word: bit k stands for step start + k. Steps below the origin are all
//  recorded; live words cover the window; nothing lies beyond it.
static uint64_t
s_word_at (const ps_ledger_t *self, uint64_t start)
{
    uint64_t origin = s_origin (self);
    if (start < origin)
        return UINT64_MAX;
    uint64_t index = (start - origin) / 64;
    return index < self->nwords ? self->words [self->head + index] : 0;
}

ps_ledger_t *
ps_ledger_intersect (const ps_ledger_t *a, const ps_ledger_t *b, ps_error_t *err)
{
    assert (a);
    assert (b);
    //  The ledger with the lower watermark decides the result's: every step
    //  below it is in both, and its watermark step is missing from it. Its
    //  window also reaches as far as any common step, so the result's live
    //  words are its words masked with the other ledger's, word for word,
    //  both being aligned to multiples of 64 steps.
    const ps_ledger_t *low = a->base <= b->base ? a : b;
    const ps_ledger_t *other = low == a ? b : a;
    ps_ledger_t *self = s_alloc ();
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "ledger: cannot allocate a ledger");
        return NULL;
    }
    self->base = low->base;
    self->zero = a->zero && b->zero;
    if (s_extend (self, low->nwords, err)) {
        ps_ledger_destroy (&self);
        return NULL;
    }
    uint64_t origin = s_origin (low);
    //  The steps below the origin, then those of the words, which include
    //  the steps [origin, base) kept set in word 0. Step 0 is among them
    //  in both ledgers whether it was recorded or not, and is taken off
    //  again when it was not.
    uint64_t count = origin;
    for (size_t i = 0; i < low->nwords; i++) {
        uint64_t word = low->words [low->head + i] & s_word_at (other, origin + 64 * (uint64_t) i);
        self->words [i] = word;
        count += (uint64_t) __builtin_popcountll (word);
    }
    //  Trailing words with no common step are dropped, so the result is in
    //  the canonical form ps_ledger_equal and ps_ledger_encode rely on.
    while (self->nwords > 0 && self->words [self->nwords - 1] == 0)
        self->nwords--;
    self->count = self->zero ? count : count - 1;
    return self;
}
