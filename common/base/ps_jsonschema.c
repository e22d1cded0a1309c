//  JSON Schema validation; see ps_jsonschema.h.
//
//  The schema is checked once, when it is loaded: every keyword must be one
//  this module knows, with a value of the right kind, and every $ref must
//  lead somewhere. Validation can then read the schema without checking it
//  again. Validation stops at the first failure and reports it; inside
//  anyOf, oneOf, not and if, a failure is only a verdict, so those run the
//  alternatives with an error record of their own and choose what to say.

#include "ps_jsonschema.h"
#include "ps_jsonvalue.h"
#include "ps_schemadoc.h"

#include <assert.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct _ps_jsonschema_t {
    json_t *root;
    char name [128];
};

//  The state of one validation: the pointer of the value being checked,
//  and where the last failure was reported, so that a combinator can tell
//  which alternative went deepest.
typedef struct {
    const ps_jsonschema_t *self;
    char pointer [PS_SCHEMADOC_POINTER_MAX];
    size_t length;
    size_t fail_length;
    int depth;
} s_walk_t;

//  The keywords this module knows, by the kind of value each takes.
typedef enum {
    S_TYPE,             //  a type name or an array of them
    S_ANY,              //  any value (const)
    S_ARRAY,            //  an array of values (enum)
    S_STRINGS,          //  an array of strings (required)
    S_SCHEMA,           //  a schema
    S_SCHEMAS,          //  a non-empty array of schemas
    S_SCHEMA_MAP,       //  an object of schemas
    S_COUNT,            //  a non-negative integer
    S_NUMBER,           //  a number
    S_PATTERN,          //  a POSIX extended regular expression
    S_REF,              //  "#" or "#/$defs/NAME"
    S_DIALECT,          //  2020-12's URI, at the root only
    S_NOTE,             //  an annotation, not checked
} s_value_t;

static const struct {
    const char *name;
    s_value_t value;
} s_keywords [] = {
    { "type", S_TYPE }, { "const", S_ANY }, { "enum", S_ARRAY }, { "required", S_STRINGS },
    { "properties", S_SCHEMA_MAP }, { "$defs", S_SCHEMA_MAP },
    { "additionalProperties", S_SCHEMA }, { "items", S_SCHEMA }, { "not", S_SCHEMA },
    { "if", S_SCHEMA }, { "then", S_SCHEMA }, { "else", S_SCHEMA },
    { "prefixItems", S_SCHEMAS }, { "allOf", S_SCHEMAS }, { "anyOf", S_SCHEMAS },
    { "oneOf", S_SCHEMAS },
    { "minItems", S_COUNT }, { "maxItems", S_COUNT }, { "minLength", S_COUNT },
    { "maxLength", S_COUNT },
    { "minimum", S_NUMBER }, { "maximum", S_NUMBER }, { "exclusiveMinimum", S_NUMBER },
    { "exclusiveMaximum", S_NUMBER },
    { "pattern", S_PATTERN }, { "$ref", S_REF }, { "$schema", S_DIALECT },
    { "$id", S_NOTE }, { "$comment", S_NOTE }, { "title", S_NOTE }, { "description", S_NOTE },
    { "default", S_NOTE }, { "examples", S_NOTE }, { "deprecated", S_NOTE },
};

#define S_DIALECT_URI  "https://json-schema.org/draft/2020-12/schema"

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
        char at [PS_SCHEMADOC_POINTER_MAX];
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
        char at [PS_SCHEMADOC_POINTER_MAX];
        snprintf (at, sizeof at, "%s/%s/%s", where, key, name);
        int rc = s_check_schema (self, sub, at, err);
        if (rc)
            return rc;
    }
    return 0;
}

static bool
s_is_type_name (const json_t *value)
{
    return json_is_string (value) && s_in (json_string_value (value), s_types);
}

static int
s_check_keyword (const ps_jsonschema_t *self, const char *key, const json_t *value,
                 const char *where, ps_error_t *err)
{
    size_t k = 0;
    size_t count = sizeof s_keywords / sizeof s_keywords [0];
    while (k < count && strcmp (s_keywords [k].name, key) != 0)
        k++;
    if (k == count)
        return ps_error_set (err, PS_EINVAL, "schema %s: at %s: keyword \"%s\" is not "
                             "supported (see common/base/ps_jsonschema.h)", self->name,
                             *where ? where : "/", key);
    char at [PS_SCHEMADOC_POINTER_MAX];
    snprintf (at, sizeof at, "%s/%s", where, key);
    size_t i;
    const json_t *item;
    bool ok = true;
    switch (s_keywords [k].value) {
        case S_TYPE:
            ok = s_is_type_name (value) || (json_is_array (value) && json_array_size (value));
            if (json_is_array (value))
                json_array_foreach (value, i, item)
                    ok = ok && s_is_type_name (item);
            return ok ? 0 : s_bad (self, where, key, "a JSON Schema type name or an array of "
                                   "them", err);
        case S_ANY:
        case S_NOTE:
            return 0;
        case S_ARRAY:
            return json_is_array (value) ? 0 : s_bad (self, where, key, "an array", err);
        case S_STRINGS:
            ok = json_is_array (value);
            json_array_foreach (value, i, item)
                ok = ok && json_is_string (item);
            return ok ? 0 : s_bad (self, where, key, "an array of strings", err);
        case S_SCHEMA:
            return s_check_schema (self, value, at, err);
        case S_SCHEMAS:
            return s_check_list (self, value, where, key, err);
        case S_SCHEMA_MAP:
            return s_check_map (self, value, where, key, err);
        case S_COUNT:
            ok = ps_jsonvalue_is_integer (value) && ps_jsonvalue_integer (value) >= 0;
            return ok ? 0 : s_bad (self, where, key, "a non-negative integer", err);
        case S_NUMBER:
            return json_is_number (value) ? 0 : s_bad (self, where, key, "a number", err);
        case S_PATTERN: {
            regex_t re;
            if (!json_is_string (value)
            ||  regcomp (&re, json_string_value (value), REG_EXTENDED | REG_NOSUB) != 0)
                return s_bad (self, where, key, "a POSIX extended regular expression", err);
            regfree (&re);
            return 0;
        }
        case S_REF:
            ok = json_is_string (value)
              && ps_schemadoc_resolve (self->root, json_string_value (value));
            return ok ? 0 : s_bad (self, where, key, "\"#\" or \"#/$defs/NAME\" naming a "
                                   "definition", err);
        case S_DIALECT:
            //  Only the root names the dialect, and only this one is known.
            ok = !*where && json_is_string (value)
              && strcmp (json_string_value (value), S_DIALECT_URI) == 0;
            return ok ? 0 : s_bad (self, where, key, "\"" S_DIALECT_URI "\" at the root", err);
    }
    return 0;
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
//  Validating

static int s_validate (s_walk_t *walk, const json_t *schema, const json_t *value,
                       ps_error_t *err);

//  Record a failure at the current pointer.
static int
s_fail (s_walk_t *walk, ps_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

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
    char expected [320] = "", got [PS_JSONVALUE_QUOTE_MAX];
    ps_schemadoc_describe (walk->self->root, schema, expected, sizeof expected);
    ps_jsonvalue_quote (value, got, sizeof got);
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
            return ps_jsonvalue_is_integer (value);
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
    if ((v = json_object_get (schema, "const")) && !ps_jsonvalue_equal (v, value))
        return s_expected (walk, schema, value, err);
    if ((v = json_object_get (schema, "enum"))) {
        bool found = false;
        for (size_t i = 0; !found && i < json_array_size (v); i++)
            found = ps_jsonvalue_equal (json_array_get (v, i), value);
        if (!found)
            return s_expected (walk, schema, value, err);
    }
    if (json_is_number (value)) {
        const json_t *bound;
        bool ok = true;
        if ((bound = json_object_get (schema, "minimum")))
            ok = ok && ps_jsonvalue_compare (value, bound) >= 0;
        if ((bound = json_object_get (schema, "maximum")))
            ok = ok && ps_jsonvalue_compare (value, bound) <= 0;
        if ((bound = json_object_get (schema, "exclusiveMinimum")))
            ok = ok && ps_jsonvalue_compare (value, bound) > 0;
        if ((bound = json_object_get (schema, "exclusiveMaximum")))
            ok = ok && ps_jsonvalue_compare (value, bound) < 0;
        if (!ok)
            return s_expected (walk, schema, value, err);
    }
    if (json_is_string (value)) {
        size_t n = ps_jsonvalue_length (value);
        if (((v = json_object_get (schema, "minLength")) && (json_int_t) n < json_integer_value (v))
        ||  ((v = json_object_get (schema, "maxLength"))
             && (json_int_t) n > json_integer_value (v)))
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
            char list [320];
            ps_schemadoc_keys (schema, list, sizeof list);
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
    char expected [320] = "", got [PS_JSONVALUE_QUOTE_MAX];
    ps_schemadoc_describe_any (walk->self->root, list, expected, sizeof expected);
    ps_jsonvalue_quote (value, got, sizeof got);
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
        char quoted [PS_JSONVALUE_QUOTE_MAX];
        if (!constant)
            continue;
        ps_jsonvalue_quote (constant, quoted, sizeof quoted);
        size_t used = strlen (why);
        snprintf (why + used, sizeof why - used, "%s%s is %s", used ? " and " : "", key, quoted);
    }
    size_t used = err ? strlen (err->msg) : 0;
    if (err && why [0])
        snprintf (err->msg + used, sizeof err->msg - used, " (as %s)", why);
}

static int
s_validate (s_walk_t *walk, const json_t *schema, const json_t *value, ps_error_t *err)
{
    if (json_is_true (schema))
        return 0;
    if (json_is_false (schema))
        return s_fail (walk, err, "no value is allowed here");
    if (++walk->depth > PS_SCHEMADOC_DEPTH_MAX) {
        walk->depth--;
        return s_fail (walk, err, "the schema nests deeper than %d $refs", PS_SCHEMADOC_DEPTH_MAX);
    }
    int rc = s_validate_value (walk, schema, value, err);
    const json_t *v;
    if (rc == 0 && json_is_object (value))
        rc = s_validate_object (walk, schema, value, err);
    if (rc == 0 && json_is_array (value))
        rc = s_validate_array (walk, schema, value, err);
    if (rc == 0 && (v = json_object_get (schema, "$ref")))
        rc = s_validate (walk, ps_schemadoc_resolve (walk->self->root, json_string_value (v)),
                         value, err);
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

int
ps_jsonschema_describe (const ps_jsonschema_t *self, const char *pointer, char *buf,
                        size_t size, ps_error_t *err)
{
    assert (self);
    assert (pointer);
    assert (buf && size > 0);
    buf [0] = 0;
    const json_t *schema;
    int rc = ps_schemadoc_at (self->root, pointer, &schema, err);
    if (rc == 0)
        ps_schemadoc_describe (self->root, schema, buf, size);
    return rc;
}
