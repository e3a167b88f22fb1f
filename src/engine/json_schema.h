/* json_schema.h: a JSON Schema compiled into the table the JSON automaton (json_grammar.h) walks
 * when it constrains a reply to a schema (response_format json_schema) or to a tool call.
 *
 * What is enforced, byte by byte: type (one or a list; "integer" allows no fraction or exponent),
 * properties, required, additionalProperties (false: no other key; a schema: other keys' values),
 * items, enum and const (the values in their compact JSON text), anyOf whose branches differ only
 * by type (nullable fields), $ref to "#/$defs/..." or "#/definitions/..." (not recursive), and the
 * bounds minLength / maxLength (in characters, as code points), pattern (json_regex.h says which
 * regular expressions), minItems / maxItems, and minimum /
 * maximum / exclusiveMinimum / exclusiveMaximum on integers (a type that admits fractions takes
 * them only with an enum, whose values the bounds then filter). Keys are written without escapes,
 * each at most once. Every other keyword that constrains a value is refused rather than ignored:
 * format, multipleOf, uniqueItems, min/maxProperties, oneOf, allOf, not, if/then/else,
 * patternProperties, prefixItems, ...; so are recursion and a schema no value can meet (an empty
 * enum, a type list with nothing in it, a required key that additionalProperties false forbids,
 * a minimum above the maximum): the error names the field, as a path from the schema's root
 * ("properties.age.type"). Annotations (title, description, default, examples, ...) are ignored.
 *
 * A tool-call constraint is the reply `<tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>`
 * (Qwen's JSON form) where NAME is one of the tools (or the one named) and ARGS fits that tool's
 * parameters; with parallel calls allowed, more calls may follow. In Qwen 3.5's XML form it is
 * `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>`
 * with the parameters those ARGS would have, each VALUE the JSON text of its value (a string in
 * quotes), so the reply's arguments are read back exactly; there a tool or key name with '<' or
 * '>', and a '<' in any name or enum text, is refused (it cannot be written in that form). */
#ifndef ST_ENGINE_JSON_SCHEMA_H
#define ST_ENGINE_JSON_SCHEMA_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

/* Object and array nesting a schema may have (the automaton keeps one frame per level). */
#define ST_JSON_SCHEMA_DEPTH 16
/* Properties one object schema may list (a bit each in the automaton's state). */
#define ST_JSON_SCHEMA_PROPS 64

enum {
    ST_JT_OBJECT = 1, ST_JT_ARRAY = 2, ST_JT_STRING = 4, ST_JT_NUMBER = 8, ST_JT_INTEGER = 16,
    ST_JT_BOOL = 32, ST_JT_NULL = 64, ST_JT_ANY = 127,
};

/* st_json_snode.bounds; RE: a string must match the pattern re (its length bounds folded in) */
enum { ST_JB_LEN = 1, ST_JB_MAXLEN = 2, ST_JB_ITEMS = 4, ST_JB_INT = 8, ST_JB_RE = 16 };

typedef struct st_json_snode {
    uint8_t types;       /* ST_JT_*; NUMBER admits integers too */
    uint8_t closed;      /* additionalProperties false */
    uint8_t bounds;      /* ST_JB_*: LEN (min_len, max_len: a string's characters; MAXLEN: max_len is
                            not UINT32_MAX), ITEMS (an array's), INT (an integer's value, inclusive) */
    uint16_t extra;      /* the node of other keys' values (0: any) */
    uint16_t items;      /* the node of array items (0: any) */
    uint16_t n_props;
    uint16_t re;         /* with ST_JB_RE: the pattern's DFA, st_json_schema.res[re - 1] */
    uint32_t first_prop; /* properties sorted by name bytes */
    uint32_t first_enum;
    uint32_t n_enum;     /* 0: no enum */
    uint64_t required;   /* bit i: property first_prop + i is required */
    uint32_t min_len, max_len, min_items, max_items;
    int64_t min_int, max_int;
} st_json_snode;

typedef struct st_json_sprop {
    const char *name;
    uint32_t len;
    uint16_t node;
} st_json_sprop;

typedef struct st_json_stool {
    const char *name;    /* written as the call's "name" string (no escapes needed) */
    uint32_t len;
    uint16_t args;       /* the node of its arguments object */
} st_json_stool;

typedef struct st_json_schema {
    st_json_snode *nodes; /* nodes[0] is "any value" */
    uint32_t n_nodes;
    st_json_sprop *props;
    uint32_t n_props;
    const char **enums;   /* compact JSON texts, sorted within each node */
    uint32_t *enum_len;
    uint32_t n_enums;
    uint16_t root;        /* the reply's object (schema mode) */
    struct st_json_regex *res; /* the patterns' DFAs (json_regex.h) */
    uint32_t n_res;
    /* Tool-call mode when n_tools > 0: tools sorted by name. */
    st_json_stool *tools;
    uint32_t n_tools;
    int parallel;         /* more than one call may follow */
    int xml;              /* calls in Qwen 3.5's XML form */
    char **owned;         /* the names and texts */
    uint32_t n_owned;
} st_json_schema;

/* Compiles a schema (JSON text; its top level must admit an object). On a schema that cannot be
 * enforced, ST_ERR_INVALID with a message starting with the path of the field at fault. */
st_status st_json_schema_compile(const char *schema_json, size_t n, st_json_schema **out);
/* A tool-call constraint from an OpenAI-shaped tools array ([{"type": "function", "function":
 * {"name", "parameters"}}]); only: the one tool allowed (NULL: any of them); xml: Qwen 3.5's form. */
st_status st_json_schema_compile_tools(const char *tools_json, size_t n, const char *only, int parallel, int xml, st_json_schema **out);
void st_json_schema_free(st_json_schema *s);

/* Whether an integer being read can still meet node n's bounds: its sign (neg), the magnitude of
 * its digits so far, and more: 1 when digits may follow, 0 when it is complete as it is (a
 * leading 0, or the number has ended), -1 when only the '-' has been read. */
int st_json_schema_int_reachable(const st_json_snode *n, int neg, uint64_t mag, int more);

#endif
