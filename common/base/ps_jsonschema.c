//  JSON Schema validation; see ps_jsonschema.h.
//
//  The schema is checked once, when it is loaded: every keyword must be one
//  this module knows, with a value of the right kind, and every $ref must
//  lead somewhere. Validation can then read the schema without checking it
//  again. Validation stops at the first failure and reports it; inside
//  anyOf, oneOf, not and if, a failure is only a verdict, so those run the
//  alternatives with an error record of their own and choose what to say.

#include "ps_jsonschema.h"

#include <assert.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  A pointer into a configuration file is short; a deeper one is cut.
#define S_POINTER_MAX  256

//  What a message quotes of a value.
#define S_QUOTE_MAX  72

//  $ref chains longer than this are a loop ("a": {"$ref": "#/$defs/a"}).
#define S_DEPTH_MAX  64

struct _ps_jsonschema_t {
    json_t *root;
    char name [128];
};

//  The state of one validation: the pointer of the value being checked,
//  and where the last failure was reported, so that a combinator can tell
//  which alternative went deepest.
typedef struct {
    const ps_jsonschema_t *self;
    char pointer [S_POINTER_MAX];
    size_t length;
    size_t fail_length;
    int depth;
} s_walk_t;

static const char *const s_annotations [] = {
    "$schema", "$id", "$comment", "$defs", "title", "description", "default", "examples",
    "deprecated", NULL
};

static const char *const s_types [] = {
    "null", "boolean", "object", "array", "number", "string", "integer", NULL
};

static bool
s_in (const char *word, const char *const *list)
{
    for (int i = 0; list [i]; i++)
        if (strcmp (word, list [i]) == 0)
            return true;
    return false;
}

//  ---------------------------------------------------------------------
//  Values: integers, comparison, equality, length, quoting

bool
ps_jsonschema_is_integer (const json_t *value)
{
    if (json_is_integer (value))
        return true;
    if (!json_is_real (value))
        return false;
    double x = json_real_value (value);
    return isfinite (x) && floor (x) == x;
}

json_int_t
ps_jsonschema_integer (const json_t *value)
{
    if (json_is_integer (value))
        return json_integer_value (value);
    double x = json_real_value (value);
    //  The validator's bounds keep x within 64 bits; this guards the cast.
    if (!(x > -9.3e18 && x < 9.2e18))
        return x < 0 ? INT64_MIN : INT64_MAX;
    return (json_int_t) x;
}

//  Compare two JSON numbers exactly: a long double holds every 64-bit
//  integer and every double, so mixed comparisons round nothing.
static int
s_compare (const json_t *a, const json_t *b)
{
    if (json_is_integer (a) && json_is_integer (b)) {
        json_int_t x = json_integer_value (a), y = json_integer_value (b);
        return (x > y) - (x < y);
    }
    long double x = json_is_integer (a) ? (long double) json_integer_value (a)
                                        : (long double) json_real_value (a);
    long double y = json_is_integer (b) ? (long double) json_integer_value (b)
                                        : (long double) json_real_value (b);
    return (x > y) - (x < y);
}

//  Equality as JSON Schema has it: numbers by value (1 equals 1.0), the
//  rest structurally.
static bool
s_equal (const json_t *a, const json_t *b)
{
    if (json_is_number (a) && json_is_number (b))
        return s_compare (a, b) == 0;
    if (json_typeof (a) != json_typeof (b))
        return false;
    if (json_is_array (a)) {
        if (json_array_size (a) != json_array_size (b))
            return false;
        for (size_t i = 0; i < json_array_size (a); i++)
            if (!s_equal (json_array_get (a, i), json_array_get (b, i)))
                return false;
        return true;
    }
    if (json_is_object (a)) {
        if (json_object_size (a) != json_object_size (b))
            return false;
        const char *key;
        const json_t *value;
        json_object_foreach ((json_t *) a, key, value) {
            const json_t *other = json_object_get (b, key);
            if (!other || !s_equal (value, other))
                return false;
        }
        return true;
    }
    return json_equal ((json_t *) a, (json_t *) b);
}

//  The characters of a UTF-8 string (jansson has checked the encoding).
static size_t
s_characters (const json_t *string)
{
    const unsigned char *p = (const unsigned char *) json_string_value (string);
    size_t bytes = json_string_length (string), n = 0;
    for (size_t i = 0; i < bytes; i++)
        n += (p [i] & 0xC0) != 0x80;
    return n;
}

//  A number as text: integers exactly, reals with the fewest digits that
//  read back to the same value.
static void
s_number_text (const json_t *number, char *buf, size_t size)
{
    if (json_is_integer (number)) {
        snprintf (buf, size, "%lld", (long long) json_integer_value (number));
        return;
    }
    double value = json_number_value (number);
    for (int digits = 15; digits <= 17; digits++) {
        snprintf (buf, size, "%.*g", digits, value);
        if (strtod (buf, NULL) == value)
            return;
    }
}

void
ps_jsonschema_quote (const json_t *value, char *buf, size_t size)
{
    assert (buf && size > 4);
    if (json_is_real (value)) {
        s_number_text (value, buf, size);
        return;
    }
    char *text = json_dumps (value, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text) {
        snprintf (buf, size, "(a value)");
        return;
    }
    if (strlen (text) < size)
        snprintf (buf, size, "%s", text);
    else
        snprintf (buf, size, "%.*s...", (int) size - 4, text);
    free (text);
}

//  ---------------------------------------------------------------------
//  Loading: checking the schema's own keywords

static int s_check_schema (const ps_jsonschema_t *self, const json_t *schema, const char *where,
                           ps_error_t *err);

static int
s_bad (const ps_jsonschema_t *self, const char *where, const char *key, const char *expected,
       ps_error_t *err)
{
    return ps_error_set (err, PS_EINVAL, "schema %s: at %s/%s: expected %s", self->name,
                         where, key, expected);
}

//  Resolve a $ref: "#" or "#/$defs/NAME". NULL when it leads nowhere.
static const json_t *
s_resolve (const ps_jsonschema_t *self, const char *ref)
{
    if (strcmp (ref, "#") == 0)
        return self->root;
    if (strncmp (ref, "#/$defs/", 8) == 0 && !strchr (ref + 8, '/') && !strchr (ref + 8, '~'))
        return json_object_get (json_object_get (self->root, "$defs"), ref + 8);
    return NULL;
}

static bool
s_is_count (const json_t *value)
{
    return ps_jsonschema_is_integer (value) && ps_jsonschema_integer (value) >= 0;
}

//  Check the subschemas of a keyword holding an array of them.
static int
s_check_list (const ps_jsonschema_t *self, const json_t *list, const char *where,
              const char *key, ps_error_t *err)
{
    if (!json_is_array (list) || json_array_size (list) == 0)
        return s_bad (self, where, key, "a non-empty array of schemas", err);
    size_t i;
    const json_t *item;
    json_array_foreach (list, i, item) {
        char at [S_POINTER_MAX];
        snprintf (at, sizeof at, "%s/%s/%zu", where, key, i);
        int rc = s_check_schema (self, item, at, err);
        if (rc)
            return rc;
    }
    return 0;
}

//  Check the subschemas of a keyword holding an object of them.
static int
s_check_map (const ps_jsonschema_t *self, const json_t *map, const char *where,
             const char *key, ps_error_t *err)
{
    if (!json_is_object (map))
        return s_bad (self, where, key, "an object of schemas", err);
    const char *name;
    const json_t *sub;
    json_object_foreach ((json_t *) map, name, sub) {
        char at [S_POINTER_MAX];
        snprintf (at, sizeof at, "%s/%s/%s", where, key, name);
        int rc = s_check_schema (self, sub, at, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int
s_check_keyword (const ps_jsonschema_t *self, const char *key, const json_t *value,
                 const char *where, ps_error_t *err)
{
    if (strcmp (key, "type") == 0) {
        if (json_is_string (value))
            return s_in (json_string_value (value), s_types) ? 0
                 : s_bad (self, where, key, "a JSON Schema type name", err);
        size_t i;
        const json_t *item;
        bool ok = json_is_array (value) && json_array_size (value) > 0;
        json_array_foreach (value, i, item)
            ok = ok && json_is_string (item) && s_in (json_string_value (item), s_types);
        return ok ? 0 : s_bad (self, where, key, "a type name or an array of them", err);
    }
    if (strcmp (key, "enum") == 0)
        return json_is_array (value) ? 0 : s_bad (self, where, key, "an array", err);
    if (strcmp (key, "const") == 0)
        return 0;
    if (strcmp (key, "properties") == 0 || strcmp (key, "$defs") == 0)
        return s_check_map (self, value, where, key, err);
    if (strcmp (key, "required") == 0) {
        size_t i;
        const json_t *item;
        bool ok = json_is_array (value);
        json_array_foreach (value, i, item)
            ok = ok && json_is_string (item);
        return ok ? 0 : s_bad (self, where, key, "an array of strings", err);
    }
    if (strcmp (key, "additionalProperties") == 0 || strcmp (key, "items") == 0
    ||  strcmp (key, "not") == 0 || strcmp (key, "if") == 0 || strcmp (key, "then") == 0
    ||  strcmp (key, "else") == 0) {
        char at [S_POINTER_MAX];
        snprintf (at, sizeof at, "%s/%s", where, key);
        return s_check_schema (self, value, at, err);
    }
    if (strcmp (key, "prefixItems") == 0 || strcmp (key, "allOf") == 0
    ||  strcmp (key, "anyOf") == 0 || strcmp (key, "oneOf") == 0)
        return s_check_list (self, value, where, key, err);
    if (strcmp (key, "minItems") == 0 || strcmp (key, "maxItems") == 0
    ||  strcmp (key, "minLength") == 0 || strcmp (key, "maxLength") == 0)
        return s_is_count (value) ? 0 : s_bad (self, where, key, "a non-negative integer", err);
    if (strcmp (key, "minimum") == 0 || strcmp (key, "maximum") == 0
    ||  strcmp (key, "exclusiveMinimum") == 0 || strcmp (key, "exclusiveMaximum") == 0)
        return json_is_number (value) ? 0 : s_bad (self, where, key, "a number", err);
    if (strcmp (key, "pattern") == 0) {
        regex_t re;
        if (!json_is_string (value)
        ||  regcomp (&re, json_string_value (value), REG_EXTENDED | REG_NOSUB) != 0)
            return s_bad (self, where, key, "a POSIX extended regular expression", err);
        regfree (&re);
        return 0;
    }
    if (strcmp (key, "$ref") == 0) {
        if (!json_is_string (value) || !s_resolve (self, json_string_value (value)))
            return s_bad (self, where, key, "\"#\" or \"#/$defs/NAME\" naming a definition",
                          err);
        return 0;
    }
    if (strcmp (key, "$schema") == 0) {
        //  Only the root names the dialect, and only this one is known.
        if (*where || !json_is_string (value)
        ||  strcmp (json_string_value (value), "https://json-schema.org/draft/2020-12/schema"))
            return s_bad (self, where, key, "\"https://json-schema.org/draft/2020-12/schema\" "
                          "at the root", err);
        return 0;
    }
    if (s_in (key, s_annotations))
        return 0;
    return ps_error_set (err, PS_EINVAL, "schema %s: at %s: keyword \"%s\" is not supported "
                         "(see common/base/ps_jsonschema.h)", self->name, *where ? where : "/",
                         key);
}

static int
s_check_schema (const ps_jsonschema_t *self, const json_t *schema, const char *where,
                ps_error_t *err)
{
    if (json_is_boolean (schema))
        return 0;
    if (!json_is_object (schema))
        return ps_error_set (err, PS_EINVAL, "schema %s: at %s: expected a schema (an object "
                             "or a boolean)", self->name, *where ? where : "/");
    const char *key;
    const json_t *value;
    json_object_foreach ((json_t *) schema, key, value) {
        int rc = s_check_keyword (self, key, value, where, err);
        if (rc)
            return rc;
    }
    return 0;
}

ps_jsonschema_t *
ps_jsonschema_new (json_t *schema, const char *name, ps_error_t *err)
{
    assert (schema);
    assert (name);
    ps_jsonschema_t *self = calloc (1, sizeof *self);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "schema %s: out of memory", name);
        return NULL;
    }
    snprintf (self->name, sizeof self->name, "%s", name);
    self->root = json_incref (schema);
    if (s_check_schema (self, schema, "", err))
        ps_jsonschema_destroy (&self);
    return self;
}

ps_jsonschema_t *
ps_jsonschema_parse (const char *text, const char *name, ps_error_t *err)
{
    assert (text);
    json_error_t jerr;
    json_t *schema = json_loads (text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!schema) {
        ps_error_set (err, PS_EINVAL, "schema %s: bad JSON at line %d, column %d: %s", name,
                      jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    ps_jsonschema_t *self = ps_jsonschema_new (schema, name, err);
    json_decref (schema);
    return self;
}

void
ps_jsonschema_destroy (ps_jsonschema_t **self_p)
{
    assert (self_p);
    if (!*self_p)
        return;
    json_decref ((*self_p)->root);
    free (*self_p);
    *self_p = NULL;
}

const json_t *
ps_jsonschema_root (const ps_jsonschema_t *self)
{
    assert (self);
    return self->root;
}

//  ---------------------------------------------------------------------
//  Describing what a schema expects

static void s_describe (const ps_jsonschema_t *self, const json_t *schema, char *buf,
                        size_t size, int depth);

static void
s_append (char *buf, size_t size, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
s_append (char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strlen (buf);
    if (used + 1 >= size)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (buf + used, size - used, fmt, args);
    va_end (args);
}

//  The range of a number (" in 1 .. 65536", " > 0", " in [0, 1)").
static void
s_range (const json_t *schema, bool integer, char *buf, size_t size)
{
    const json_t *low = json_object_get (schema, "exclusiveMinimum");
    bool low_open = low != NULL;
    if (!low)
        low = json_object_get (schema, "minimum");
    const json_t *high = json_object_get (schema, "exclusiveMaximum");
    bool high_open = high != NULL;
    if (!high)
        high = json_object_get (schema, "maximum");
    char a [40], b [40];
    if (low)
        s_number_text (low, a, sizeof a);
    if (high)
        s_number_text (high, b, sizeof b);
    if (low && high && integer && !low_open && !high_open)
        s_append (buf, size, " in %s .. %s", a, b);
    else
    if (low && high)
        s_append (buf, size, " in %c%s, %s%c", low_open ? '(' : '[', a, b, high_open ? ')' : ']');
    else
    if (low)
        s_append (buf, size, " %s %s", low_open ? ">" : ">=", a);
    else
    if (high)
        s_append (buf, size, " %s %s", high_open ? "<" : "<=", b);
}

static void
s_describe_type (const json_t *schema, const char *type, char *buf, size_t size)
{
    if (strcmp (type, "integer") == 0 || strcmp (type, "number") == 0) {
        s_append (buf, size, "%s", type [0] == 'i' ? "an integer" : "a number");
        s_range (schema, type [0] == 'i', buf, size);
    }
    else
    if (strcmp (type, "string") == 0) {
        const json_t *least = json_object_get (schema, "minLength");
        const json_t *most = json_object_get (schema, "maxLength");
        s_append (buf, size, "a %sstring", least && json_integer_value (least) > 0
                                           ? "non-empty " : "");
        if (least && json_integer_value (least) > 1)
            s_append (buf, size, " of at least %lld characters",
                      (long long) json_integer_value (least));
        if (most)
            s_append (buf, size, "%s of at most %lld characters",
                      least && json_integer_value (least) > 1 ? " and" : "",
                      (long long) json_integer_value (most));
        if (json_object_get (schema, "pattern"))
            s_append (buf, size, " matching %s",
                      json_string_value (json_object_get (schema, "pattern")));
    }
    else
    if (strcmp (type, "array") == 0) {
        const json_t *least = json_object_get (schema, "minItems");
        const json_t *most = json_object_get (schema, "maxItems");
        long long l = least ? (long long) json_integer_value (least) : 0;
        s_append (buf, size, "an array");
        if (most && l == json_integer_value (most))
            s_append (buf, size, " of %lld item%s", l, l == 1 ? "" : "s");
        else
        if (l > 0 && most)
            s_append (buf, size, " of %lld to %lld items", l, (long long) json_integer_value (most));
        else
        if (most)
            s_append (buf, size, " of at most %lld items", (long long) json_integer_value (most));
        else
        if (l > 0)
            s_append (buf, size, " of at least %lld item%s", l, l == 1 ? "" : "s");
    }
    else
    if (strcmp (type, "boolean") == 0)
        s_append (buf, size, "true or false");
    else
    if (strcmp (type, "object") == 0)
        s_append (buf, size, "an object");
    else
        s_append (buf, size, "null");
}

static void
s_describe_list (const ps_jsonschema_t *self, const json_t *list, char *buf, size_t size,
                 int depth)
{
    size_t i;
    const json_t *item;
    json_array_foreach (list, i, item) {
        if (i)
            s_append (buf, size, " or ");
        s_describe (self, item, buf, size, depth + 1);
    }
}

static void
s_describe (const ps_jsonschema_t *self, const json_t *schema, char *buf, size_t size,
            int depth)
{
    if (depth > S_DEPTH_MAX || json_is_true (schema)) {
        s_append (buf, size, "any value");
        return;
    }
    if (json_is_false (schema)) {
        s_append (buf, size, "no value");
        return;
    }
    const json_t *v;
    if ((v = json_object_get (schema, "const"))) {
        char quoted [S_QUOTE_MAX];
        ps_jsonschema_quote (v, quoted, sizeof quoted);
        s_append (buf, size, "%s", quoted);
    }
    else
    if ((v = json_object_get (schema, "enum"))) {
        s_append (buf, size, "one of ");
        size_t i;
        const json_t *item;
        json_array_foreach (v, i, item) {
            char quoted [S_QUOTE_MAX];
            ps_jsonschema_quote (item, quoted, sizeof quoted);
            s_append (buf, size, "%s%s", i ? ", " : "", quoted);
        }
    }
    else
    if ((v = json_object_get (schema, "type"))) {
        if (json_is_string (v))
            s_describe_type (schema, json_string_value (v), buf, size);
        else {
            size_t i;
            const json_t *item;
            json_array_foreach (v, i, item) {
                if (i)
                    s_append (buf, size, " or ");
                s_describe_type (schema, json_string_value (item), buf, size);
            }
        }
    }
    else
    if ((v = json_object_get (schema, "$ref")))
        s_describe (self, s_resolve (self, json_string_value (v)), buf, size, depth + 1);
    else
    if ((v = json_object_get (schema, "anyOf")) || (v = json_object_get (schema, "oneOf")))
        s_describe_list (self, v, buf, size, depth);
    else
    if ((v = json_object_get (schema, "allOf")))
        s_describe (self, json_array_get (v, 0), buf, size, depth + 1);
    else
    if ((v = json_object_get (schema, "not"))) {
        s_append (buf, size, "not ");
        s_describe (self, v, buf, size, depth + 1);
    }
    else
        s_append (buf, size, "a value");
}

//  ---------------------------------------------------------------------
//  Validating

static int s_validate (s_walk_t *walk, const json_t *schema, const json_t *value,
                       ps_error_t *err);

//  Record a failure at the current pointer.
static int
s_fail (s_walk_t *walk, ps_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static int
s_fail (s_walk_t *walk, ps_error_t *err, const char *fmt, ...)
{
    walk->fail_length = walk->length;
    char text [PS_ERROR_MSG_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    if (walk->length == 0)
        return ps_error_set (err, PS_EINVAL, "at the top level: %s", text);
    return ps_error_set (err, PS_EINVAL, "at %s: %s", walk->pointer, text);
}

//  "expected <what schema describes>, got <value>".
static int
s_expected (s_walk_t *walk, const json_t *schema, const json_t *value, ps_error_t *err)
{
    char expected [320] = "", got [S_QUOTE_MAX];
    s_describe (walk->self, schema, expected, sizeof expected, 0);
    ps_jsonschema_quote (value, got, sizeof got);
    return s_fail (walk, err, "expected %s, got %s", expected, got);
}

//  Append a token to the pointer, escaped as RFC 6901 says; returns the
//  length to restore.
static size_t
s_push (s_walk_t *walk, const char *token)
{
    size_t before = walk->length;
    char *p = walk->pointer + walk->length;
    char *end = walk->pointer + sizeof walk->pointer - 1;
    if (p < end)
        *p++ = '/';
    for (; *token && p < end; token++) {
        if (*token == '~' || *token == '/') {
            *p++ = '~';
            if (p < end)
                *p++ = *token == '~' ? '0' : '1';
        }
        else
            *p++ = *token;
    }
    *p = 0;
    walk->length = (size_t) (p - walk->pointer);
    return before;
}

static void
s_pop (s_walk_t *walk, size_t length)
{
    walk->length = length;
    walk->pointer [length] = 0;
}

static int
s_validate_at (s_walk_t *walk, const char *token, const json_t *schema, const json_t *value,
               ps_error_t *err)
{
    size_t before = s_push (walk, token);
    int rc = s_validate (walk, schema, value, err);
    s_pop (walk, before);
    return rc;
}

static bool
s_has_type (const char *type, const json_t *value)
{
    switch (type [0]) {
        case 'n':
            return type [1] == 'u' && type [2] == 'l' ? json_is_null (value)
                                                      : json_is_number (value);
        case 'b':
            return json_is_boolean (value);
        case 'o':
            return json_is_object (value);
        case 'a':
            return json_is_array (value);
        case 's':
            return json_is_string (value);
        case 'i':
            return ps_jsonschema_is_integer (value);
    }
    return false;
}

static bool
s_type_ok (const json_t *type, const json_t *value)
{
    if (json_is_string (type))
        return s_has_type (json_string_value (type), value);
    size_t i;
    const json_t *item;
    json_array_foreach (type, i, item)
        if (s_has_type (json_string_value (item), value))
            return true;
    return false;
}

//  The checks of one value that need no subschema.
static int
s_validate_value (s_walk_t *walk, const json_t *schema, const json_t *value, ps_error_t *err)
{
    const json_t *v;
    if ((v = json_object_get (schema, "type")) && !s_type_ok (v, value))
        return s_expected (walk, schema, value, err);
    if ((v = json_object_get (schema, "const")) && !s_equal (v, value))
        return s_expected (walk, schema, value, err);
    if ((v = json_object_get (schema, "enum"))) {
        bool found = false;
        for (size_t i = 0; !found && i < json_array_size (v); i++)
            found = s_equal (json_array_get (v, i), value);
        if (!found)
            return s_expected (walk, schema, value, err);
    }
    if (json_is_number (value)) {
        const json_t *bound;
        bool ok = true;
        if ((bound = json_object_get (schema, "minimum")))
            ok = ok && s_compare (value, bound) >= 0;
        if ((bound = json_object_get (schema, "maximum")))
            ok = ok && s_compare (value, bound) <= 0;
        if ((bound = json_object_get (schema, "exclusiveMinimum")))
            ok = ok && s_compare (value, bound) > 0;
        if ((bound = json_object_get (schema, "exclusiveMaximum")))
            ok = ok && s_compare (value, bound) < 0;
        if (!ok) {
            //  Without a type the description would not say what bound.
            if (json_object_get (schema, "type"))
                return s_expected (walk, schema, value, err);
            char range [96] = "", got [S_QUOTE_MAX];
            s_range (schema, false, range, sizeof range);
            ps_jsonschema_quote (value, got, sizeof got);
            return s_fail (walk, err, "expected a value%s, got %s", range, got);
        }
    }
    if (json_is_string (value)) {
        size_t n = s_characters (value);
        if (((v = json_object_get (schema, "minLength")) && (json_int_t) n < json_integer_value (v))
        ||  ((v = json_object_get (schema, "maxLength")) && (json_int_t) n > json_integer_value (v)))
            return s_expected (walk, schema, value, err);
        if ((v = json_object_get (schema, "pattern"))) {
            regex_t re;
            //  The pattern compiled when the schema was loaded.
            if (regcomp (&re, json_string_value (v), REG_EXTENDED | REG_NOSUB) != 0)
                return s_fail (walk, err, "pattern %s no longer compiles", json_string_value (v));
            int match = regexec (&re, json_string_value (value), 0, NULL, 0);
            regfree (&re);
            if (match != 0)
                return s_expected (walk, schema, value, err);
        }
    }
    if (json_is_array (value)) {
        json_int_t n = (json_int_t) json_array_size (value);
        if (((v = json_object_get (schema, "minItems")) && n < json_integer_value (v))
        ||  ((v = json_object_get (schema, "maxItems")) && n > json_integer_value (v)))
            return s_expected (walk, schema, value, err);
    }
    return 0;
}

static int
s_validate_object (s_walk_t *walk, const json_t *schema, const json_t *value, ps_error_t *err)
{
    const json_t *properties = json_object_get (schema, "properties");
    const json_t *additional = json_object_get (schema, "additionalProperties");
    const char *key;
    const json_t *item;
    json_object_foreach ((json_t *) value, key, item) {
        const json_t *sub = json_object_get (properties, key);
        int rc = 0;
        if (sub)
            rc = s_validate_at (walk, key, sub, item, err);
        else
        if (json_is_false (additional)) {
            char list [320] = "";
            const char *known;
            const json_t *ignored;
            json_object_foreach ((json_t *) properties, known, ignored)
                s_append (list, sizeof list, "%s%s", list [0] ? ", " : "", known);
            size_t before = s_push (walk, key);
            rc = list [0] ? s_fail (walk, err, "unknown key \"%s\" (expected one of %s)", key, list)
                          : s_fail (walk, err, "unknown key \"%s\" (expected none)", key);
            s_pop (walk, before);
        }
        else
        if (additional)
            rc = s_validate_at (walk, key, additional, item, err);
        if (rc)
            return rc;
    }
    //  After the keys present, so that a misspelt key is reported as
    //  unknown rather than as the required key it was meant to be.
    const json_t *required = json_object_get (schema, "required");
    size_t i;
    const json_t *name;
    json_array_foreach (required, i, name)
        if (!json_object_get (value, json_string_value (name)))
            return s_fail (walk, err, "missing required key \"%s\"", json_string_value (name));
    return 0;
}

static int
s_validate_array (s_walk_t *walk, const json_t *schema, const json_t *value, ps_error_t *err)
{
    const json_t *prefix = json_object_get (schema, "prefixItems");
    const json_t *items = json_object_get (schema, "items");
    size_t i;
    const json_t *item;
    json_array_foreach (value, i, item) {
        const json_t *sub = i < json_array_size (prefix) ? json_array_get (prefix, i) : items;
        if (!sub)
            continue;
        char token [24];
        snprintf (token, sizeof token, "%zu", i);
        int rc = s_validate_at (walk, token, sub, item, err);
        if (rc)
            return rc;
    }
    return 0;
}

//  anyOf and oneOf: count the alternatives that hold; when none does,
//  report the failure that reached deepest into the value, or, when all
//  failed at the value itself, every alternative in one message.
static int
s_validate_choice (s_walk_t *walk, const json_t *list, bool one, const json_t *value,
                   ps_error_t *err)
{
    size_t passed = 0, deepest = 0;
    ps_error_t best = { 0 };
    size_t i;
    const json_t *sub;
    json_array_foreach (list, i, sub) {
        ps_error_t scratch = { 0 };
        walk->fail_length = 0;
        if (s_validate (walk, sub, value, &scratch) == 0) {
            passed++;
            continue;
        }
        if (walk->fail_length > deepest || best.code == 0) {
            deepest = walk->fail_length;
            best = scratch;
        }
    }
    if (passed == 1 || (passed > 1 && !one))
        return 0;
    if (passed > 1)
        return s_fail (walk, err, "expected exactly one of %zu alternatives (oneOf) to match, "
                       "but %zu did", json_array_size (list), passed);
    if (deepest > walk->length) {
        walk->fail_length = deepest;
        if (err)
            *err = best;
        return PS_EINVAL;
    }
    char expected [320] = "", got [S_QUOTE_MAX];
    s_describe_list (walk->self, list, expected, sizeof expected, 0);
    ps_jsonschema_quote (value, got, sizeof got);
    return s_fail (walk, err, "expected %s, got %s", expected, got);
}

//  A failure under "then" holds only because "if" did: when "if" names
//  constant properties (a kind, a type), say so after the message
//  ("... (as kind is \"fixed\")").
static void
s_why (const json_t *condition, ps_error_t *err)
{
    char why [128] = "";
    const char *key;
    const json_t *property;
    json_object_foreach (json_object_get (condition, "properties"), key, property) {
        const json_t *constant = json_object_get (property, "const");
        char quoted [S_QUOTE_MAX];
        if (!constant)
            continue;
        ps_jsonschema_quote (constant, quoted, sizeof quoted);
        s_append (why, sizeof why, "%s%s is %s", why [0] ? " and " : "", key, quoted);
    }
    if (err && why [0])
        s_append (err->msg, sizeof err->msg, " (as %s)", why);
}

static int
s_validate (s_walk_t *walk, const json_t *schema, const json_t *value, ps_error_t *err)
{
    if (json_is_true (schema))
        return 0;
    if (json_is_false (schema))
        return s_fail (walk, err, "no value is allowed here");
    if (++walk->depth > S_DEPTH_MAX) {
        walk->depth--;
        return s_fail (walk, err, "the schema nests deeper than %d $refs", S_DEPTH_MAX);
    }
    int rc = s_validate_value (walk, schema, value, err);
    const json_t *v;
    if (rc == 0 && json_is_object (value))
        rc = s_validate_object (walk, schema, value, err);
    if (rc == 0 && json_is_array (value))
        rc = s_validate_array (walk, schema, value, err);
    if (rc == 0 && (v = json_object_get (schema, "$ref")))
        rc = s_validate (walk, s_resolve (walk->self, json_string_value (v)), value, err);
    if (rc == 0 && (v = json_object_get (schema, "allOf")))
        for (size_t i = 0; rc == 0 && i < json_array_size (v); i++)
            rc = s_validate (walk, json_array_get (v, i), value, err);
    if (rc == 0 && (v = json_object_get (schema, "anyOf")))
        rc = s_validate_choice (walk, v, false, value, err);
    if (rc == 0 && (v = json_object_get (schema, "oneOf")))
        rc = s_validate_choice (walk, v, true, value, err);
    if (rc == 0 && (v = json_object_get (schema, "not"))
    &&  s_validate (walk, v, value, NULL) == 0)
        rc = s_expected (walk, schema, value, err);
    if (rc == 0 && (v = json_object_get (schema, "if"))) {
        bool holds = s_validate (walk, v, value, NULL) == 0;
        const json_t *branch = json_object_get (schema, holds ? "then" : "else");
        if (branch)
            rc = s_validate (walk, branch, value, err);
        if (rc && holds)
            s_why (v, err);
    }
    walk->depth--;
    return rc;
}

int
ps_jsonschema_validate (const ps_jsonschema_t *self, const json_t *doc, ps_error_t *err)
{
    assert (self);
    assert (doc);
    s_walk_t walk = { .self = self };
    return s_validate (&walk, self->root, doc, err);
}

//  ---------------------------------------------------------------------
//  Describing what a pointer expects

//  Follow $ref and allOf's first member with properties or items down to
//  the schema that says what a value is.
static const json_t *
s_concrete (const ps_jsonschema_t *self, const json_t *schema, const char *keyword)
{
    for (int depth = 0; schema && depth < S_DEPTH_MAX; depth++) {
        if (json_object_get (schema, keyword) || json_object_get (schema, "type"))
            return schema;
        const json_t *ref = json_object_get (schema, "$ref");
        if (ref)
            schema = s_resolve (self, json_string_value (ref));
        else
            schema = json_array_get (json_object_get (schema, "allOf"), 0);
    }
    return schema;
}

//  The schema of property key: the object's own, or one that a member of
//  its allOf, that member's then or else, or a $ref adds (as a layer's
//  type picks its fields).
static const json_t *
s_find_property (const ps_jsonschema_t *self, const json_t *schema, const char *key, int depth)
{
    if (!json_is_object (schema) || depth > S_DEPTH_MAX)
        return NULL;
    const json_t *found = json_object_get (json_object_get (schema, "properties"), key);
    const json_t *ref = json_object_get (schema, "$ref");
    if (!found && ref)
        found = s_find_property (self, s_resolve (self, json_string_value (ref)), key, depth + 1);
    const json_t *all = json_object_get (schema, "allOf");
    for (size_t i = 0; !found && i < json_array_size (all); i++) {
        const json_t *member = json_array_get (all, i);
        found = s_find_property (self, member, key, depth + 1);
        if (!found)
            found = s_find_property (self, json_object_get (member, "then"), key, depth + 1);
        if (!found)
            found = s_find_property (self, json_object_get (member, "else"), key, depth + 1);
    }
    return found;
}

int
ps_jsonschema_describe (const ps_jsonschema_t *self, const char *pointer, char *buf,
                        size_t size, ps_error_t *err)
{
    assert (self);
    assert (pointer);
    assert (buf && size > 0);
    buf [0] = 0;
    const json_t *schema = self->root;
    const char *p = pointer;
    char walked [S_POINTER_MAX] = "";
    while (*p == '/') {
        size_t n = strcspn (p + 1, "/");
        char token [S_POINTER_MAX];
        //  Unescape ~1 and ~0 (RFC 6901).
        size_t t = 0;
        for (size_t i = 0; i < n && t + 1 < sizeof token; i++) {
            char c = p [1 + i];
            if (c == '~' && i + 1 < n && (p [2 + i] == '0' || p [2 + i] == '1'))
                c = p [2 + i++] == '0' ? '~' : '/';
            token [t++] = c;
        }
        token [t] = 0;
        snprintf (walked + strlen (walked), sizeof walked - strlen (walked), "/%.*s", (int) n,
                  p + 1);
        const json_t *object = s_concrete (self, schema, "properties");
        const json_t *array = s_concrete (self, schema, "items");
        const json_t *properties = json_object_get (object, "properties");
        const json_t *next = NULL;
        if (properties) {
            next = s_find_property (self, object, token, 0);
            if (!next && json_is_false (json_object_get (object, "additionalProperties"))) {
                char list [320] = "";
                const char *known;
                const json_t *ignored;
                json_object_foreach ((json_t *) properties, known, ignored)
                    s_append (list, sizeof list, "%s%s", list [0] ? ", " : "", known);
                return ps_error_set (err, PS_EINVAL, "at %s: unknown key \"%s\" (expected one "
                                     "of %s)", walked, token, list);
            }
        }
        else
        if (array) {
            char *end;
            unsigned long index = strtoul (token, &end, 10);
            const json_t *prefix = json_object_get (array, "prefixItems");
            if (*end == 0 && index < json_array_size (prefix))
                next = json_array_get (prefix, index);
            else
                next = json_object_get (array, "items");
        }
        if (!next)
            return PS_ENOTFOUND;
        schema = next;
        p += 1 + n;
    }
    s_describe (self, s_concrete (self, schema, "type"), buf, size, 0);
    return 0;
}
