//  A JSON Schema validator (draft 2020-12) for the subset of keywords that
//  ps-cluster's configuration schemas use: schemas/job.schema.json and
//  schemas/model.schema.json. Debian packages no C validator, and the two
//  schemas need only a few dozen lines per keyword, so this module checks
//  them on jansson.
//
//  Supported: type, enum, const, properties, required,
//  additionalProperties, items, prefixItems, minItems, maxItems,
//  minLength, maxLength, pattern (POSIX extended regular expressions, a
//  subset of ECMA 262's for the simple patterns schemas use), minimum,
//  maximum, exclusiveMinimum, exclusiveMaximum, allOf, anyOf, oneOf, not,
//  if/then/else, $ref to "#" or "#/$defs/NAME", and boolean schemas; the
//  annotations $schema, $id, $comment, $defs, title, description, default,
//  examples and deprecated are read and ignored. A schema that uses any
//  other keyword is refused when it is loaded, never silently passed.
//
//  A failed validation reports the first value at fault by its JSON pointer
//  (RFC 6901), with what the schema expected there and what it got:
//    at /optimizer/lr: expected a number > 0, got "fast"
//  Callers put the file's name in front. Lengths count characters (code
//  points), as the standard says, not bytes, and 1.0 is an integer: the
//  values as JSON Schema sees them are ps_jsonvalue.h's, and the words of
//  the messages come from ps_schemadoc.h, which reads schemas.

#ifndef PS_JSONSCHEMA_H_INCLUDED
#define PS_JSONSCHEMA_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ps_error.h"

typedef struct _ps_jsonschema_t ps_jsonschema_t;

//  Load a schema from JSON text; name (a file name) prefixes every message
//  about the schema itself. Returns NULL and fills err when the text is
//  not JSON, or the schema uses a keyword this module does not support,
//  gives a keyword a value of the wrong kind, or holds a $ref to nothing.
ps_jsonschema_t *ps_jsonschema_parse (const char *text, const char *name, ps_error_t *err);

//  The same from a parsed schema, which the validator keeps a reference to.
ps_jsonschema_t *ps_jsonschema_new (json_t *schema, const char *name, ps_error_t *err);

//  Destroy the validator and set the caller's pointer to NULL.
void ps_jsonschema_destroy (ps_jsonschema_t **self_p);

//  Validate a document. Returns 0, or PS_EINVAL with err naming the JSON
//  pointer of the first offending value, what was expected and what was
//  found.
int ps_jsonschema_validate (const ps_jsonschema_t *self, const json_t *doc, ps_error_t *err);

//  Describe in words what the schema expects at a JSON pointer of a
//  document (following properties, items, prefixItems, $ref and allOf),
//  for messages about values that cannot be validated, such as a number
//  too large to read. Returns 0, or PS_ENOTFOUND when no single schema
//  applies there; PS_EINVAL with err set, naming the key, when an object
//  on the way admits no such key.
int ps_jsonschema_describe (const ps_jsonschema_t *self, const char *pointer, char *buf,
                            size_t size, ps_error_t *err);

//  The schema itself, borrowed.
const json_t *ps_jsonschema_root (const ps_jsonschema_t *self);

#endif
