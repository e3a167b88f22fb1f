/* test_json_grammar.c: the JSON object constraint (engine/json_grammar.h) and the sampler under it.
 *   - the automaton: whole documents and every prefix of them accepted, whole or byte by byte;
 *     invalid texts refused at exactly the first bad byte (top-level not an object, bad numbers,
 *     literals, escapes, lone or broken surrogates, raw control bytes, invalid UTF-8, trailing
 *     text, wrong closes, the nesting and whitespace bounds); completion only once closed; a refused
 *     feed leaves the state as it was;
 *   - the constraint on a small byte-level vocabulary with merged, control, think and end tokens:
 *     the mask equals a walk of every token in every state along a document (so the precomputed
 *     string and think sets and the mask cache are exact), end of generation only when complete,
 *     the reply's opening read from a ChatML prompt;
 *   - the sampler: a refused greedy pick becomes the best allowed token; random logits at any
 *     temperature give a valid prefix at every step, and an end only after a complete object;
 *   - schemas (engine/json_schema.h): every refusal of the compiler names the field; byte by byte,
 *     documents a schema allows are taken and others refused at exactly the first byte it does
 *     not (names, required, each key once, closed objects, integers, enums, anyOf, $ref, and the
 *     bounds: string lengths in characters, item counts, integer ranges, enums filtered by them;
 *     patterns, with escapes read as the characters they stand for, beside length bounds and enums);
 *     the mask equals a walk of every token under a schema too; replies sampled on random logits
 *     meet the schema by an independent check; a forced tool call (any tool, a named one, parallel
 *     calls) names a tool and its arguments fit that tool's parameters; every keyword the automaton
 *     does not enforce (format, minProperties, a number's minimum, a lookahead in a pattern, ...) is
 *     refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "test.h"
#include <jansson.h>
#include "engine/json_grammar.h"
#include "engine/json_schema.h"
#include "engine/sampler.h"
#include "base/status.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

/* ---- the automaton ---- */

/* The length of the longest accepted prefix of text (fed byte by byte), or n when all is. */
static size_t accepted_len(const char *text, size_t n, st_json_state *end) {
    st_json_state s;
    st_json_init(&s);
    size_t i = 0;
    for (; i < n; i++)
        if (!st_json_feed(&s, text + i, 1)) break;
    if (end) *end = s;
    return i;
}

static void valid_doc(const char *doc) {
    size_t n = strlen(doc);
    st_json_state s, whole;
    CHECKF(accepted_len(doc, n, &s) == n, "%s: refused at byte %zu", doc, accepted_len(doc, n, NULL));
    CHECKF(st_json_complete(&s), "%s: not complete", doc);
    st_json_init(&whole);
    CHECK(st_json_feed(&whole, doc, n) && !memcmp(&whole, &s, sizeof s));
    /* every proper prefix ending before the closing brace is accepted and not complete */
    const char *close = strrchr(doc, '}');
    for (size_t k = 0; close && k < (size_t)(close - doc); k++) {
        st_json_init(&whole);
        int ok = st_json_feed(&whole, doc, k);
        CHECKF(ok && !st_json_complete(&whole), "%s: prefix of %zu", doc, k);
    }
}

static void invalid_doc(const char *doc, size_t bad_at) {
    size_t got = accepted_len(doc, strlen(doc), NULL);
    CHECKF(got == bad_at, "%s: refused at byte %zu, expected %zu", doc, got, bad_at);
}

static void test_automaton(void) {
    valid_doc("{}");
    valid_doc("{\"a\":1}");
    valid_doc(" \n{ \"a\" : [ 1 , -2.5e+3 , 0 , true , false , null , \"x\" , [ ] , { } ] , \"b\" : { \"c\" : { } } }\n");
    valid_doc("{\"n\":[0,-0,1.5,10,1e5,1E-5,-12.34e+10,0.0e0,9876543210]}");
    valid_doc("{\"k\":\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\\u0000\"}");
    valid_doc("{\"\xC3\xA9\":\"\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBD \x7F\"}");
    valid_doc("<think>\nhmm { not json \" here < </thin\n</think>\n\n{\"a\":1}");
    valid_doc("<think></think>{\"deep\":[[[{\"x\":[true]}]]]}");
    valid_doc("{\"a\":{\"b\":{\"c\":[1,{\"d\":null}]}},\"e\":\"\"}");

    invalid_doc("[1]", 0);
    invalid_doc("\"x\"", 0);
    invalid_doc("1", 0);
    invalid_doc("x{}", 0);
    invalid_doc("{\"a\" 1}", 5);
    invalid_doc("{'a':1}", 1);
    invalid_doc("{a:1}", 1);
    invalid_doc("{\"a\":01}", 6);
    invalid_doc("{\"a\":1.}", 7);
    invalid_doc("{\"a\":1.e5}", 7);
    invalid_doc("{\"a\":-}", 6);
    invalid_doc("{\"a\":+1}", 5);
    invalid_doc("{\"a\":1e}", 7);
    invalid_doc("{\"a\":1e+}", 8);
    invalid_doc("{\"a\":.5}", 5);
    invalid_doc("{\"a\":tru}", 8);
    invalid_doc("{\"a\":nul1}", 8);
    invalid_doc("{\"a\":True}", 5);
    invalid_doc("{\"a\":\"\\x\"}", 7);
    invalid_doc("{\"a\":\"\\u12g4\"}", 10);
    invalid_doc("{\"a\":\"\\uDE00\"}", 9);      /* a lone low surrogate */
    invalid_doc("{\"a\":\"\\uD83Dx\"}", 12);    /* a high one not followed by an escape */
    invalid_doc("{\"a\":\"\\uD83D\\n\"}", 13);  /* ... nor by \u */
    invalid_doc("{\"a\":\"\\uD83D\\u0041\"}", 14); /* ... nor by a low one */
    invalid_doc("{\"a\":\"\\uD83D\\uD83D\"}", 15);
    invalid_doc("{\"a\":\"\n\"}", 6);
    invalid_doc("{\"a\":\"\t\"}", 6);
    invalid_doc("{\"a\":\"\xC0\x80\"}", 6);     /* overlong */
    invalid_doc("{\"a\":\"\xE0\x80\x80\"}", 7);
    invalid_doc("{\"a\":\"\xED\xA0\x80\"}", 7); /* a surrogate in UTF-8 */
    invalid_doc("{\"a\":\"\xF4\x90\x80\x80\"}", 7);
    invalid_doc("{\"a\":\"\xF5\"}", 6);
    invalid_doc("{\"a\":\"\xC3x\"}", 7);
    invalid_doc("{\"a\":\"\x80\"}", 6);
    invalid_doc("{\xC3\xA9:1}", 1);
    invalid_doc("{\"a\":1,}", 7);
    invalid_doc("{\"a\":1]", 6);
    invalid_doc("{\"a\":[1}", 7);
    invalid_doc("{\"a\":[1,]}", 8);
    invalid_doc("{,}", 1);
    invalid_doc("{\"a\"::1}", 5);
    invalid_doc("{\"a\":1 2}", 7);
    invalid_doc("{} x", 3);
    invalid_doc("{}{}", 2);
    invalid_doc("{}}", 2);
    invalid_doc("<thinx>", 5);
    invalid_doc("<think></think>[]", 15);
    invalid_doc("<think></think><think>", 15);

    /* completion */
    st_json_state s;
    const char *incomplete[] = {"", "  ", "<think>", "<think>a</think>", "{", "{\"a\"", "{\"a\":1", "{\"a\":[]", "{\"a\":\"}\""};
    for (size_t i = 0; i < sizeof incomplete / sizeof *incomplete; i++) {
        size_t n = strlen(incomplete[i]);
        CHECKF(accepted_len(incomplete[i], n, &s) == n && !st_json_complete(&s), "'%s'", incomplete[i]);
    }
    CHECK(accepted_len("{} \n", 4, &s) == 4 && st_json_complete(&s));

    /* nesting: 64 open containers, not 65 */
    char deep[300];
    size_t n = 0;
    deep[n++] = '{';
    memcpy(deep + n, "\"a\":", 4);
    n += 4;
    for (int i = 1; i < ST_JSON_MAX_DEPTH; i++) deep[n++] = '[';
    deep[n] = 0;
    CHECK(accepted_len(deep, n, &s) == n && s.depth == ST_JSON_MAX_DEPTH);
    CHECK(!st_json_feed(&s, "[", 1) && !st_json_feed(&s, "{", 1) && st_json_feed(&s, "1", 1));
    for (int i = 1; i < ST_JSON_MAX_DEPTH; i++) deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = 0;
    valid_doc(deep);

    /* whitespace is bounded: indentation fits, endless padding does not */
    char pad[200] = "{";
    memset(pad + 1, ' ', 100);
    pad[101] = 0;
    size_t got = accepted_len(pad, 101, NULL);
    CHECKF(got > 8 && got < 30, "padding accepted to %zu", got);
    valid_doc("{\n    \"a\": {\n        \"b\": [\n            1,\n            2\n        ]\n    }\n}");

    /* a refused feed changes nothing */
    st_json_init(&s);
    CHECK(st_json_feed(&s, "{\"a\":[1,", 8));
    st_json_state before = s;
    CHECK(!st_json_feed(&s, "2}", 2));
    CHECK(!memcmp(&before, &s, sizeof s));
    CHECK(st_json_feed(&s, "2]}", 3) && st_json_complete(&s));
}

/* The closing cost along random walks over valid bytes: every unfinished state has a byte that
 * lowers it by exactly one (so a budget of k single-byte tokens can always close a cost of k), and
 * a byte raises it by at most 7 (14 for the '<' that opens "<think>" first), the bound the mask
 * cache relies on. Walking the lowering bytes from anywhere reaches a complete object. */
static uint64_t walk_rng = 99;
static unsigned next_byte(void) {
    walk_rng = walk_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(walk_rng >> 56);
}

static void test_close_cost(void) {
    /* bytes a model writes often, so walks reach escapes, numbers, literals and nesting */
    static const char common[] = "{}[]\":,\\u0123456789abcdefDE-+.eEtrufalsn <>/think\n \xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80";
    int lowers = 1, bounded = 1, closes = 1;
    for (int walk = 0; walk < 400; walk++) {
        st_json_state s;
        st_json_init(&s);
        for (int step = 0; step < 300 && !st_json_complete(&s); step++) {
            int cost = st_json_close_cost(&s), found = 0;
            st_json_state t;
            for (unsigned b = 0; b < 256 && !found; b++) {
                t = s;
                char c = (char)b;
                found = st_json_feed(&t, &c, 1) && st_json_close_cost(&t) == cost - 1;
            }
            lowers &= found;
            /* finish from here by always taking a lowering byte */
            st_json_state f = s;
            for (int k = 0; k < cost; k++)
                for (unsigned b = 0; b < 256; b++) {
                    t = f;
                    char c = (char)b;
                    if (st_json_feed(&t, &c, 1) && st_json_close_cost(&t) == st_json_close_cost(&f) - 1) { f = t; break; }
                }
            closes &= st_json_complete(&f);
            /* a random valid byte, mostly from the common ones */
            for (int tries = 0; tries < 64; tries++) {
                unsigned b = tries < 48 && (next_byte() & 3) ? (unsigned char)common[next_byte() % (sizeof common - 1)] : next_byte();
                t = s;
                char c = (char)b;
                if (!st_json_feed(&t, &c, 1)) continue;
                int rise = st_json_close_cost(&t) - cost;
                bounded &= rise <= (s.mode == 0 ? 14 : 7);
                s = t;
                break;
            }
        }
    }
    CHECK(lowers);
    CHECK(bounded);
    CHECK(closes);
}

/* ---- a small vocabulary ---- */

#define MAX_TOK 400
static char tok_text[MAX_TOK][48];
static const char *toks[MAX_TOK];
static size_t tok_lens[MAX_TOK];
static int32_t types[MAX_TOK];
static int n_tok;
static char byte_char[256][4];
static char raw[MAX_TOK][24]; /* the bytes each token stands for */
static size_t raw_len[MAX_TOK];

/* GPT-2's byte-to-unicode map */
static void make_byte_chars(void) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        uint8_t u[4] = {0};
        size_t k = st_utf8_encode(printable ? (uint32_t)b : next++, u);
        memcpy(byte_char[b], u, k);
        byte_char[b][k] = 0;
    }
}

static int add_text(const char *bytes) {
    tok_text[n_tok][0] = 0;
    for (const unsigned char *p = (const unsigned char *)bytes; *p; p++) strcat(tok_text[n_tok], byte_char[*p]);
    snprintf(raw[n_tok], sizeof raw[n_tok], "%s", bytes);
    raw_len[n_tok] = strlen(bytes);
    toks[n_tok] = tok_text[n_tok];
    tok_lens[n_tok] = strlen(tok_text[n_tok]);
    types[n_tok] = ST_TOKEN_NORMAL;
    return n_tok++;
}

static int add_special(const char *text, int type) {
    snprintf(tok_text[n_tok], sizeof tok_text[n_tok], "%s", text);
    snprintf(raw[n_tok], sizeof raw[n_tok], "%s", text);
    raw_len[n_tok] = strlen(text);
    toks[n_tok] = tok_text[n_tok];
    tok_lens[n_tok] = strlen(text);
    types[n_tok] = type;
    return n_tok++;
}

static int im_start, im_end, think_open, think_close, endoftext;

static st_tokenizer *make_tokenizer(void) {
    make_byte_chars();
    for (int b = 0; b < 256; b++) {
        types[n_tok] = ST_TOKEN_NORMAL;
        memcpy(tok_text[n_tok], byte_char[b], sizeof byte_char[b]);
        raw[n_tok][0] = (char)b;
        raw[n_tok][1] = 0;
        raw_len[n_tok] = 1;
        toks[n_tok] = tok_text[n_tok];
        tok_lens[n_tok] = strlen(tok_text[n_tok]);
        n_tok++;
    }
    const char *merged[] = {"{\"", "\":", "\",", "\"}", "}\n", "},", "}}", "]}", "[{", " the", "hello", "assistant",
                            "\\u", "\\n", "\\\"", "\\uD83D", "\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC", "\xE6\x97",
                            "true", "false", "null", "123", ".5", "e+", "  ", "\n\n", "\n  ", "<tool", "</", "<|"};
    for (size_t i = 0; i < sizeof merged / sizeof *merged; i++) add_text(merged[i]);
    im_start = add_special("<|im_start|>", ST_TOKEN_CONTROL);
    im_end = add_special("<|im_end|>", ST_TOKEN_CONTROL);
    endoftext = add_special("<|endoftext|>", ST_TOKEN_CONTROL);
    think_open = add_special("<think>", ST_TOKEN_USER_DEFINED);
    think_close = add_special("</think>", ST_TOKEN_USER_DEFINED);
    add_special("<tool_call>", ST_TOKEN_USER_DEFINED);
    add_special("<|unused|>", ST_TOKEN_UNUSED);
    st_vocab_desc d = {0};
    d.n_tokens = n_tok; d.tokens = toks; d.token_lens = tok_lens; d.token_types = types;
    d.pre = ST_PRETOK_QWEN2;
    d.bos = -1; d.eos = im_end; d.eot = -1; d.eom = -1; d.pad = -1; d.unk = -1;
    st_tokenizer *t = NULL;
    CHECK(st_tokenizer_build(&d, &t) == ST_OK);
    return t;
}

static int id_of_raw(const char *bytes) {
    for (int i = 0; i < n_tok; i++) if (raw_len[i] && !strcmp(raw[i], bytes)) return i;
    return -1;
}

/* The mask against a walk of every token, in the constraint's current state. */
static int mask_exact(st_json_constraint *c, int32_t n_vocab, float *logits) {
    for (int32_t i = 0; i < n_vocab; i++) logits[i] = 0.0f;
    int32_t n_allowed = st_json_constraint_mask(c, logits), count = 0, bad = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        int allowed = st_json_constraint_allows(c, i);
        count += allowed;
        if (allowed != (logits[i] == 0.0f)) bad++;
    }
    return !bad && count == n_allowed && n_allowed > 0;
}

/* Feeds doc token by token (longest known token first) checking the mask before each. */
static void walk_doc(const st_json_vocab *v, int32_t n_vocab, const char *doc, float *logits) {
    st_json_constraint *c = NULL;
    CHECK(st_json_constraint_new(v, NULL, 0, &c) == ST_OK);
    int all_exact = 1, all_fed = 1;
    size_t close = (size_t)(strrchr(doc, '}') - doc);
    for (size_t i = 0; doc[i];) {
        all_exact &= mask_exact(c, n_vocab, logits);
        int best = -1;
        size_t best_len = 0;
        for (int t = 0; t < n_tok; t++) {
            size_t l = raw_len[t];
            if (types[t] == ST_TOKEN_NORMAL && l > best_len && !strncmp(doc + i, raw[t], l)) { best = t; best_len = l; }
        }
        if (!strncmp(doc + i, "<think>", 7)) { best = think_open; best_len = 7; }
        if (!strncmp(doc + i, "</think>", 8)) { best = think_close; best_len = 8; }
        if (i <= close) {
            CHECKF(!st_json_constraint_complete(c), "complete before the end at %zu", i);
            CHECK(!st_json_constraint_allows(c, im_end) && !st_json_constraint_allows(c, endoftext));
        }
        all_fed &= best >= 0 && st_json_constraint_accept(c, best) == ST_OK;
        if (!all_fed) break;
        i += best_len;
    }
    CHECKF(all_exact && all_fed, "%s: masks exact %d, fed %d", doc, all_exact, all_fed);
    CHECK(st_json_constraint_complete(c) && st_json_constraint_allows(c, im_end) && st_json_constraint_allows(c, endoftext));
    CHECK(!st_json_constraint_allows(c, im_start) && !st_json_constraint_allows(c, think_open));
    CHECK(mask_exact(c, n_vocab, logits));
    /* the same states again come from the cache and must still be exact */
    st_json_constraint_free(c);
}

static void test_constraint(void) {
    st_tokenizer *t = make_tokenizer();
    if (!t) return;
    int32_t n_vocab = n_tok + 5; /* a model's padded vocabulary: the extra ids are never allowed */
    st_json_vocab *v = NULL;
    CHECK(st_json_vocab_new(t, n_vocab, &v) == ST_OK && st_json_vocab_size(v) == n_vocab);
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);

    const char *docs[] = {
        "{\"a\":1}",
        "<think>\nthe <tool hello </ x</think>\n\n{\"hello\": [true, false, null, 123.5e+2, {\"x\": \"\\uD83D\\uDE00\\n\"}]}\n",
        "{\n  \"\xC3\xA9\": \"\xE6\x97\xA5\xE6\x9C\xAC \\\"the\\\"\",\n  \"b\": [{\"c\": {}}]}",
        "{\"a\":{\"a\":{\"a\":{}}},\"b\":[[],[{}],\"\"]}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        walk_doc(v, n_vocab, docs[i], logits);
        walk_doc(v, n_vocab, docs[i], logits);
    }

    st_json_constraint *c = NULL;
    CHECK(st_json_constraint_new(v, NULL, 0, &c) == ST_OK);
    CHECK(st_json_constraint_allows(c, think_open) && !st_json_constraint_allows(c, think_close));
    CHECK(!st_json_constraint_allows(c, im_end) && !st_json_constraint_allows(c, im_start));
    CHECK(!st_json_constraint_allows(c, id_of_raw("hello")) && st_json_constraint_allows(c, id_of_raw("{\"")));
    CHECK(!st_json_constraint_allows(c, n_tok) && !st_json_constraint_allows(c, n_vocab) && !st_json_constraint_allows(c, -1));
    CHECK(!st_json_constraint_allows(c, id_of_raw("<|unused|>")) && !st_json_constraint_allows(c, id_of_raw("<tool_call>")));
    CHECK(st_json_constraint_accept(c, id_of_raw("hello")) == ST_ERR_INVALID);
    CHECK(st_json_constraint_accept(c, id_of_raw("{\"")) == ST_OK);
    /* in a string: text and the closing quote, no special token */
    CHECK(st_json_constraint_allows(c, id_of_raw("hello")) && st_json_constraint_allows(c, id_of_raw("\":")));
    CHECK(st_json_constraint_allows(c, id_of_raw("\xE6\x97")) && !st_json_constraint_allows(c, id_of_raw("\n\n")));
    CHECK(!st_json_constraint_allows(c, think_open) && !st_json_constraint_allows(c, id_of_raw("<tool_call>")));
    st_json_constraint_free(c);

    /* the reply's opening from a ChatML prompt: "<|im_start|>assistant\n" then what it forces */
    int32_t prompt[64];
    size_t np = 0;
    prompt[np++] = im_start;
    prompt[np++] = id_of_raw("u");
    prompt[np++] = id_of_raw("\n");
    prompt[np++] = id_of_raw("x");
    prompt[np++] = id_of_raw("{\"");   /* in the user's turn: not the reply */
    prompt[np++] = im_end;
    prompt[np++] = id_of_raw("\n");
    prompt[np++] = im_start;
    prompt[np++] = id_of_raw("assistant");
    prompt[np++] = id_of_raw("\n");
    size_t bare = np;
    prompt[np++] = think_open;
    prompt[np++] = id_of_raw("\n\n");
    prompt[np++] = think_close;
    prompt[np++] = id_of_raw("\n\n");
    prompt[np++] = id_of_raw("{");
    CHECK(st_json_constraint_new(v, prompt, np, &c) == ST_OK);
    CHECK(c && st_json_constraint_allows(c, id_of_raw("}")) && st_json_constraint_allows(c, id_of_raw("\"")) &&
          !st_json_constraint_allows(c, id_of_raw("{")) && !st_json_constraint_allows(c, think_open));
    st_json_constraint_free(c);
    CHECK(st_json_constraint_new(v, prompt, bare, &c) == ST_OK); /* nothing forced: thinking or the object */
    CHECK(c && st_json_constraint_allows(c, think_open) && st_json_constraint_allows(c, id_of_raw("{")));
    st_json_constraint_free(c);
    CHECK(st_json_constraint_new(v, prompt, bare + 2, &c) == ST_OK); /* an open think block (Qwen 3.5) */
    CHECK(c && st_json_constraint_allows(c, id_of_raw("hello")) && st_json_constraint_allows(c, think_close) &&
          !st_json_constraint_allows(c, im_end));
    st_json_constraint_free(c);
    /* the role line's newline inside a token that also holds the reply's first bytes */
    int32_t split[4] = {im_start, id_of_raw("assistant"), id_of_raw("\n  "), id_of_raw("{\"")};
    CHECK(st_json_constraint_new(v, split, 4, &c) == ST_OK);
    CHECK(c && st_json_constraint_state(c)->depth == 1 && st_json_constraint_allows(c, id_of_raw("\":")));
    st_json_constraint_free(c);
    CHECK(st_json_constraint_new(v, split, 3, &c) == ST_OK);
    CHECK(c && st_json_constraint_state(c)->ws == 2 && st_json_constraint_allows(c, id_of_raw("{")));
    st_json_constraint_free(c);
    prompt[bare] = id_of_raw("x");
    c = NULL;
    CHECK(st_json_constraint_new(v, prompt, bare + 1, &c) == ST_ERR_INVALID && !c);

    free(logits);
    st_json_vocab_free(v);
    st_tokenizer_free(t);
}

/* ---- the sampler under the constraint ---- */

static uint64_t lcg = 12345;
static float frand(void) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg >> 40) & 0xFFFFFF) / (float)0x1000000;
}

/* The small vocabulary afresh, and its token table (NULL when either fails). */
static st_json_vocab *fresh_vocab(st_tokenizer **t, int32_t *n_vocab) {
    n_tok = 0;
    st_json_vocab *v = NULL;
    if (!(*t = make_tokenizer())) return NULL;
    *n_vocab = n_tok;
    CHECK(st_json_vocab_new(*t, *n_vocab, &v) == ST_OK);
    return v;
}

static void test_sampler(void) {
    st_tokenizer *t = NULL;
    int32_t n_vocab = 0;
    st_json_vocab *v = fresh_vocab(&t, &n_vocab);
    if (!v) return;
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);

    /* greedy: the best token is refused, the best allowed one comes */
    st_sampler_params p = st_sampler_default_params();
    p.temperature = 0.0f;
    st_sampler *s = NULL;
    CHECK(st_sampler_new(&p, n_vocab, &s) == ST_OK);
    CHECK(st_sampler_constrain_json(s, v, NULL, 0, 0) == ST_OK);
    for (int32_t i = 0; i < n_vocab; i++) logits[i] = 0.0f;
    logits[id_of_raw("hello")] = 9.0f;
    logits[im_end] = 8.0f;
    logits[id_of_raw("{\"")] = 3.0f;
    logits[id_of_raw("{")] = 2.0f;
    int32_t tok = -1;
    CHECK(st_sampler_sample(s, logits, &tok) == ST_OK && tok == id_of_raw("{\""));
    CHECK(st_sampler_json_masks(s) == 1);
    CHECK(st_sampler_accept(s, tok) == ST_OK);
    CHECK(st_sampler_accept(s, im_end) == ST_ERR_INVALID);
    logits[id_of_raw("hello")] = 0.0f;
    logits[id_of_raw("\":")] = 9.0f;
    CHECK(st_sampler_sample(s, logits, &tok) == ST_OK && tok == id_of_raw("\":"));
    CHECK(st_sampler_json_masks(s) == 1); /* an allowed pick costs no mask */
    CHECK(st_sampler_accept(s, tok) == ST_OK && !st_sampler_json_complete(s));
    const char *rest[] = {"1", "}"};
    for (int i = 0; i < 2; i++) CHECK(st_sampler_accept(s, id_of_raw(rest[i])) == ST_OK);
    CHECK(st_sampler_json_complete(s));
    CHECK(st_sampler_sample(s, logits, &tok) == ST_OK && tok == im_end);
    st_sampler_reset(s); /* drops the constraint */
    CHECK(st_sampler_sample(s, logits, &tok) == ST_OK && tok == id_of_raw("\":") && !st_sampler_json_complete(s));
    st_sampler_free(s);

    /* random logits at several temperatures and filters: every step stays a valid prefix, and an
     * end comes only after a complete object */
    int runs_ok = 1, completed = 0;
    for (int run = 0; run < 24; run++) {
        p = st_sampler_default_params();
        p.temperature = run % 4 == 0 ? 0.0f : 0.5f + 0.25f * (float)(run % 4);
        p.top_k = run % 3 == 0 ? 0 : 20;
        p.top_p = run % 2 ? 0.9f : 1.0f;
        p.min_p = run % 5 == 0 ? 0.0f : 0.05f;
        p.seed = (uint64_t)run;
        CHECK(st_sampler_new(&p, n_vocab, &s) == ST_OK);
        CHECK(st_sampler_constrain_json(s, v, NULL, 0, 0) == ST_OK);
        st_json_state js;
        st_json_init(&js);
        int ended = 0;
        for (int step = 0; step < 400 && !ended; step++) {
            for (int32_t i = 0; i < n_vocab; i++) logits[i] = 4.0f * frand();
            /* pull towards closing after a while, so some runs complete */
            if (step > 40) { logits[id_of_raw("}")] += 6.0f; logits[id_of_raw("]")] += 6.0f; logits[id_of_raw("\"")] += 5.0f;
                             logits[im_end] += 8.0f; logits[id_of_raw("1")] += 3.0f; }
            if (st_sampler_sample(s, logits, &tok) != ST_OK) { runs_ok = 0; break; }
            if (tok == im_end || tok == endoftext) {
                ended = 1;
                runs_ok &= st_json_complete(&js);
                break;
            }
            runs_ok &= st_json_feed(&js, raw[tok], raw_len[tok]);
            runs_ok &= st_sampler_accept(s, tok) == ST_OK;
        }
        completed += ended;
        st_sampler_free(s);
    }
    CHECK(runs_ok);
    CHECKF(completed > 0, "no run completed an object");

    /* a token budget: logits that would stay in strings and open containers forever still end in
     * a complete object within max_tokens, for every budget that leaves room to close */
    int budget_ok = 1;
    for (int max_tokens = 2; max_tokens <= 80; max_tokens += 3) {
        p = st_sampler_default_params();
        p.temperature = max_tokens % 2 ? 0.0f : 1.0f;
        p.seed = (uint64_t)max_tokens;
        CHECK(st_sampler_new(&p, n_vocab, &s) == ST_OK);
        CHECK(st_sampler_constrain_json(s, v, NULL, 0, max_tokens) == ST_OK);
        st_json_state js;
        st_json_init(&js);
        int n = 0;
        for (; n < max_tokens; n++) {
            for (int32_t i = 0; i < n_vocab; i++) logits[i] = 2.0f * frand();
            logits[id_of_raw("hello")] += 9.0f;
            logits[id_of_raw("[{")] += 8.0f;
            logits[id_of_raw("{\"")] += 8.0f;
            logits[think_open] += 10.0f;
            logits[id_of_raw("\\u")] += 7.0f;
            if (st_sampler_sample(s, logits, &tok) != ST_OK) { budget_ok = 0; break; }
            if (tok == im_end || tok == endoftext) break;
            budget_ok &= st_json_feed(&js, raw[tok], raw_len[tok]) && st_sampler_accept(s, tok) == ST_OK;
        }
        CHECKF(st_json_complete(&js), "max_tokens %d: not complete after %d tokens", max_tokens, n);
        st_sampler_free(s);
    }
    CHECK(budget_ok);
    free(logits);
    st_json_vocab_free(v);
    st_tokenizer_free(t);
}

/* ---- schemas (engine/json_schema.h) ---- */

/* Whether string s matches pattern as a search (PCRE2, which reads the patterns used here as
 * ECMA-262 does). */
static int pattern_matches(const char *pattern, const char *s, size_t n) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, NULL);
    if (!re) return 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int r = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return r >= 0;
}

/* Whether v meets the bounds sch gives its type (lengths in code points, the pattern). */
static int meets_bounds(json_t *v, json_t *sch) {
    json_t *pat = json_object_get(sch, "pattern");
    if (pat && json_is_string(v) && !pattern_matches(json_string_value(pat), json_string_value(v), json_string_length(v))) return 0;
    double lo = -INFINITY, hi = INFINITY, n = -1;
    const char *min_key = "minItems", *max_key = "maxItems";
    if (json_is_string(v)) {
        n = 0;
        for (const char *p = json_string_value(v); *p; p++) n += ((unsigned char)*p & 0xC0) != 0x80;
        min_key = "minLength";
        max_key = "maxLength";
    } else if (json_is_array(v)) {
        n = (double)json_array_size(v);
    }
    if (n >= 0) {
        json_t *a = json_object_get(sch, min_key), *b = json_object_get(sch, max_key);
        return (!a || n >= json_number_value(a)) && (!b || n <= json_number_value(b));
    }
    if (!json_is_number(v)) return 1;
    double x = json_number_value(v);
    json_t *a = json_object_get(sch, "minimum"), *b = json_object_get(sch, "maximum");
    json_t *ea = json_object_get(sch, "exclusiveMinimum"), *eb = json_object_get(sch, "exclusiveMaximum");
    if (a) lo = json_number_value(a);
    if (b) hi = json_number_value(b);
    return x >= lo && x <= hi && (!ea || x > json_number_value(ea)) && (!eb || x < json_number_value(eb));
}

/* An independent check of a value against the subset of JSON Schema the compiler takes. */
static int meets(json_t *v, json_t *sch, json_t *root) {
    if (json_is_true(sch) || !sch) return 1;
    if (!meets_bounds(v, sch)) return 0;
    json_t *ref = json_object_get(sch, "$ref");
    if (ref) return meets(v, json_object_get(json_object_get(root, "$defs"), json_string_value(ref) + 8), root);
    json_t *any = json_object_get(sch, "anyOf");
    if (any) {
        size_t i;
        json_t *b;
        json_array_foreach(any, i, b) if (meets(v, b, root)) return 1;
        return 0;
    }
    json_t *en = json_object_get(sch, "enum");
    if (en) {
        size_t i;
        json_t *e;
        json_array_foreach(en, i, e) if (json_equal(e, v)) return 1;
        return 0;
    }
    json_t *type = json_object_get(sch, "type");
    if (type) {
        int ok = 0;
        for (size_t i = 0; i < (json_is_array(type) ? json_array_size(type) : 1); i++) {
            const char *t = json_string_value(json_is_array(type) ? json_array_get(type, i) : type);
            ok |= (!strcmp(t, "object") && json_is_object(v)) || (!strcmp(t, "array") && json_is_array(v)) ||
                  (!strcmp(t, "string") && json_is_string(v)) || (!strcmp(t, "number") && json_is_number(v)) ||
                  (!strcmp(t, "integer") && json_is_integer(v)) || (!strcmp(t, "boolean") && json_is_boolean(v)) ||
                  (!strcmp(t, "null") && json_is_null(v));
        }
        if (!ok) return 0;
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(sch, "properties"), *req = json_object_get(sch, "required");
        size_t i;
        json_t *r;
        json_array_foreach(req, i, r) if (!json_object_get(v, json_string_value(r))) return 0;
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            json_t *ps = json_object_get(props, k);
            if (!ps && json_is_false(json_object_get(sch, "additionalProperties"))) return 0;
            if (ps && !meets(x, ps, root)) return 0;
        }
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (!meets(x, json_object_get(sch, "items"), root)) return 0;
    }
    return 1;
}

static const char person_schema[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"bc\",1,12,null]}},"
    "\"sub\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":[\"number\",\"null\"]},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"x\"],\"additionalProperties\":false},"
    "\"nick\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},\"home\":{\"$ref\":\"#/$defs/place\"}},"
    "\"required\":[\"name\",\"age\"],\"additionalProperties\":false,"
    "\"$defs\":{\"place\":{\"type\":\"object\",\"properties\":{\"city\":{\"const\":\"Oslo\"}},\"required\":[\"city\"]}}}";

static void schema_error(const char *schema, const char *path) {
    st_json_schema *sc = NULL;
    st_status st = st_json_schema_compile(schema, strlen(schema), &sc);
    const char *msg = st_last_error();
    CHECKF(st == ST_ERR_INVALID && !sc && !strncmp(msg, path, strlen(path)), "%s: %d, '%s' (want '%s')", schema, st, msg, path);
    st_clear_error();
}

static void test_schema_compile(void) {
    schema_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"strin\"}}}", "properties.a.type");
    schema_error("{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[]}}}", "properties.a.enum");
    schema_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[1,2]}}}", "properties.a.enum");
    schema_error("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[{},{}]}}}", "properties.a.oneOf");
    schema_error("{\"type\":\"object\",\"required\":[\"b\"],\"additionalProperties\":false}", "required");
    schema_error("{\"type\":\"string\"}", "(root)");
    schema_error("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/n\"}},\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"k\":{\"$ref\":\"#/$defs/n\"}}}}}",
                 "properties.a.$ref.properties.k.$ref");
    schema_error("{\"type\":\"object\",\"properties\":{\"a\\\"b\":{}}}", "properties.a\"b");
    schema_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[]}}}", "properties.a.type");
    st_json_schema *sc = NULL;
    CHECK(st_json_schema_compile(person_schema, strlen(person_schema), &sc) == ST_OK && sc && !sc->n_tools);
    st_json_schema_free(sc);
    /* what the automaton does not enforce is refused, never ignored */
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"a(?=b)\"}}}", "properties.s.pattern: the lookahead");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"pattern\":\"(a\"}}}", "properties.s.pattern");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"pattern\":7}}}", "properties.s.pattern");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":3,\"pattern\":\"^x{4}\"}}}", "properties.s.pattern: no string");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"enum\":[\"a\",\"b\"],\"pattern\":\"c\"}}}", "properties.s.enum");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"anyOf\":[{\"type\":\"string\",\"pattern\":\"a\"},{\"type\":\"string\"}]}}}", "properties.s: anyOf");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"format\":\"date\"}}}", "properties.s.format");
    schema_error("{\"type\":\"object\",\"minProperties\":1}", "minProperties");
    schema_error("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"multipleOf\":2}}}", "properties.n.multipleOf");
    schema_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"uniqueItems\":true}}}", "properties.a.uniqueItems");
    schema_error("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\",\"minimum\":0}}}", "properties.n.minimum");
    schema_error("{\"type\":\"object\",\"properties\":{\"n\":{\"maximum\":3}}}", "properties.n.maximum");
    schema_error("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":5,\"exclusiveMaximum\":5}}}", "properties.n.minimum");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}}}", "properties.s");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"minLength\":1.5}}}", "properties.s.minLength");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"anyOf\":[{\"type\":\"string\"}],\"maxLength\":2}}}", "properties.s.maxLength");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"$ref\":\"#/$defs/t\",\"maxLength\":2}},\"$defs\":{\"t\":{}}}", "properties.s.maxLength");
    schema_error("{\"type\":\"object\",\"properties\":{\"e\":{\"enum\":[\"abc\",\"de\"],\"maxLength\":1}}}", "properties.e.enum");
    schema_error("{\"type\":\"object\",\"properties\":{\"s\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"string\",\"minLength\":2}]}}}",
                 "properties.s");
    /* annotations, and bounds that do not apply to the type, constrain nothing */
    const char *fine = "{\"type\":\"object\",\"title\":\"t\",\"description\":\"d\",\"properties\":{\"a\":{\"type\":\"array\",\"uniqueItems\":false,"
                       "\"default\":[],\"examples\":[[1]]},\"b\":{\"type\":\"boolean\",\"maxLength\":2,\"minimum\":1}}}";
    CHECK(st_json_schema_compile(fine, strlen(fine), &sc) == ST_OK);
    st_json_schema_free(sc);
}

static const char bounds_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"s\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3},"
    "\"m\":{\"type\":[\"string\",\"null\"],\"minLength\":1},"
    "\"i\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120},"
    "\"p\":{\"type\":\"integer\",\"exclusiveMinimum\":10},"
    "\"a\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},\"minItems\":1,\"maxItems\":2},"
    "\"e\":{\"enum\":[\"x\",\"yy\",\"zzz\",3,30],\"maxLength\":2,\"maximum\":10},"
    "\"n\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"null\"}]}},"
    "\"additionalProperties\":false}";

static const char pattern_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}(-[0-9]{4})?$\"},"
    "\"code\":{\"type\":[\"string\",\"null\"],\"pattern\":\"^[A-Z]\xC3\xA9+$\",\"maxLength\":3},"
    "\"any\":{\"type\":[\"string\",\"integer\"],\"pattern\":\"b\"},"
    "\"e\":{\"enum\":[\"x1\",\"y\",\"x22\"],\"pattern\":\"^x\\\\d+$\"}},"
    "\"required\":[\"zip\"],\"additionalProperties\":false}";

/* How many bytes of doc a schema constraint takes as single-byte tokens; *complete after them. */
static size_t schema_accepts(const st_json_vocab *v, const st_json_schema *sc, const char *doc, int *complete) {
    st_json_constraint *c = NULL;
    CHECK(st_json_constraint_new_schema(v, sc, NULL, 0, &c) == ST_OK);
    size_t i = 0;
    for (; doc[i]; i++)
        if (st_json_constraint_accept(c, (unsigned char)doc[i]) != ST_OK) break;
    *complete = st_json_constraint_complete(c);
    st_json_constraint_free(c);
    return i;
}

static void schema_doc(const st_json_vocab *v, const st_json_schema *sc, const char *doc, size_t bad_at) {
    int complete = 0;
    size_t n = strlen(doc), got = schema_accepts(v, sc, doc, &complete);
    if (bad_at == (size_t)-1) CHECKF(got == n && complete, "%s: refused at %zu (complete %d)", doc, got, complete);
    else CHECKF(got == bad_at, "%s: refused at %zu, expected %zu", doc, got, bad_at);
}

/* Samples replies on random logits under a constraint; each must be text the reference checker
 * accepts (via check), and an end comes only when the constraint is complete. */
typedef int (*reply_check)(const char *text, size_t n, void *ctx);

static int sample_runs(const st_json_vocab *v, const st_json_schema *sc, const int32_t *prompt, size_t np, int32_t n_vocab,
                       reply_check check, void *ctx, int *completed) {
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    int ok = 1;
    for (int run = 0; run < 40 && ok; run++) {
        st_sampler_params p = st_sampler_default_params();
        p.temperature = run % 4 == 0 ? 0.0f : 0.6f + 0.2f * (float)(run % 4);
        p.top_k = run % 3 == 0 ? 0 : 30;
        p.seed = (uint64_t)run + 1000;
        st_sampler *s = NULL;
        CHECK(st_sampler_new(&p, n_vocab, &s) == ST_OK);
        CHECK(st_sampler_constrain_schema(s, v, sc, prompt, np, 0) == ST_OK);
        static char text[32768];
        size_t n = 0;
        int ended = 0;
        for (int step = 0; step < 1500 && !ended; step++) {
            for (int32_t i = 0; i < n_vocab; i++) logits[i] = 4.0f * frand();
            /* pull towards closing after a while, so most runs finish */
            if (step > 60) {
                static const char *const closers[] = {"}", "]", "\"", "\"}", "]}", "}}", "\",", "null"};
                static const char *const openers[] = {"{", "[", "[{", "{\"", ",", " ", "\n", "e", "E", "e+", "123", "1", "\\"};
                for (size_t k = 0; k < sizeof closers / sizeof *closers; k++) logits[id_of_raw(closers[k])] += 7.0f;
                for (size_t k = 0; k < sizeof openers / sizeof *openers; k++) logits[id_of_raw(openers[k])] -= 6.0f;
                logits[im_end] += 12.0f;
                logits[think_close] += 12.0f;
            }
            int32_t tok;
            if (st_sampler_sample(s, logits, &tok) != ST_OK) { ok = 0; CHECKF(0, "run %d: %s after %.*s", run, st_last_error(), (int)n, text); break; }
            if (tok == im_end || tok == endoftext) { ended = 1; break; }
            if (st_sampler_accept(s, tok) != ST_OK || n + raw_len[tok] >= sizeof text) { ok = 0; break; }
            memcpy(text + n, raw[tok], raw_len[tok]);
            n += raw_len[tok];
        }
        if (ended) {
            (*completed)++;
            text[n] = 0;
            int good = check(text, n, ctx);
            if (!good) {
                char shown[2000] = "";
                for (size_t k = 0, o = 0; k < n && o + 8 < sizeof shown; k++)
                    o += (size_t)snprintf(shown + o, sizeof shown - o, (unsigned char)text[k] < 0x20 ? "\\x%02x" : "%c", (unsigned char)text[k]);
                CHECKF(0, "run %d: the reply does not meet the schema: %s", run, shown);
            }
            ok &= good;
        }
        st_sampler_free(s);
    }
    free(logits);
    return ok;
}

static int check_answer(const char *text, size_t n, void *ctx) {
    json_t *schema = ctx;
    const char *p = memmem(text, n, "</think>", 8); /* a think block may hold any byte, NUL too */
    json_t *v = p ? json_loadb(p + 8, n - (size_t)(p + 8 - text), 0, NULL) : json_loadb(text, n, 0, NULL);
    int ok = v && meets(v, schema, schema);
    json_decref(v);
    return ok;
}

typedef struct tools_ctx { json_t *tools; const char *only; int parallel; const char *opening; } tools_ctx;

/* The parameters of the tool named name (NULL: none given), *found whether there is one. */
static json_t *tool_params(json_t *tools, const char *name, int *found) {
    size_t i;
    json_t *t;
    *found = 0;
    json_array_foreach(tools, i, t)
        if (name && !strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")), name)) {
            *found = 1;
            return json_object_get(json_object_get(t, "function"), "parameters");
        }
    return NULL;
}

/* <tool_call>\n{"name": N, "arguments": A}\n</tool_call>, once (or more when parallel). */
static int check_calls(const char *text, size_t n, void *ctx) {
    tools_ctx *tc = ctx;
    int calls = 0;
    char whole[8300];
    snprintf(whole, sizeof whole, "%s%s", tc->opening, text);
    const char *p = whole;
    while (*p == '\n' || *p == ' ' || *p == '\r' || *p == '\t') p++;
    while (*p) {
        if (strncmp(p, "<tool_call>\n", 12)) return 0;
        const char *end = strstr(p, "\n</tool_call>");
        if (!end) return 0;
        json_t *call = json_loadb(p + 12, (size_t)(end - p - 12), 0, NULL);
        const char *name = json_string_value(json_object_get(call, "name"));
        int found = 0;
        json_t *schema = tool_params(tc->tools, name, &found);
        int ok = found && (!tc->only || !strcmp(name, tc->only)) && json_object_size(call) == 2 &&
                 meets(json_object_get(call, "arguments"), schema, schema);
        json_decref(call);
        if (!ok) return 0;
        calls++;
        p = end + 13;
        if (*p == '\n') p++;
    }
    return calls == 1 || (tc->parallel && calls > 1);
}

/* Feeds doc to a schema constraint token by token (the longest known token first), the mask
 * exact before each, complete at the end; twice, the second time from the mask cache. */
static void masks_along(const st_json_vocab *v, const st_json_schema *sc, int32_t n_vocab, float *logits, const char *doc) {
    for (int again = 0; again < 2; again++) {
        st_json_constraint *c = NULL;
        CHECK(st_json_constraint_new_schema(v, sc, NULL, 0, &c) == ST_OK);
        int exact = 1, fed = 1;
        for (size_t i = 0; doc[i] && fed;) {
            exact &= mask_exact(c, n_vocab, logits);
            CHECK(!st_json_constraint_allows(c, im_end));
            int best = -1;
            size_t best_len = 0;
            for (int k = 0; k < n_tok; k++)
                if (types[k] == ST_TOKEN_NORMAL && raw_len[k] > best_len && !strncmp(doc + i, raw[k], raw_len[k])) { best = k; best_len = raw_len[k]; }
            if (!strncmp(doc + i, "<think>", 7)) { best = think_open; best_len = 7; }
            if (!strncmp(doc + i, "</think>", 8)) { best = think_close; best_len = 8; }
            fed = best >= 0 && st_json_constraint_accept(c, best) == ST_OK;
            i += best_len;
        }
        CHECKF(exact && fed, "%s: masks exact %d, fed %d", doc, exact, fed);
        CHECK(st_json_constraint_complete(c) && st_json_constraint_allows(c, im_end) && mask_exact(c, n_vocab, logits));
        st_json_constraint_free(c);
    }
}

/* Qwen 3.5's XML calls, read as the chat parser does (text/chat_parse.c: a value is its JSON),
 * each naming a tool with arguments that fit it. */
static int check_xml_calls(const char *text, size_t n, void *ctx) {
    tools_ctx *tc = ctx;
    int calls = 0;
    char whole[8300];
    snprintf(whole, sizeof whole, "%s%s", tc->opening, text);
    const char *p = whole;
    while (*p == '\n' || *p == ' ' || *p == '\r' || *p == '\t') p++;
    while (*p) {
        if (strncmp(p, "<tool_call>\n<function=", 22)) return 0;
        p += 22;
        const char *gt = strchr(p, '>');
        if (!gt || gt[1] != '\n') return 0;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(gt - p), p);
        p = gt + 2;
        json_t *args = json_object();
        int ok = 1;
        while (ok && !strncmp(p, "<parameter=", 11)) {
            const char *k = p + 11, *kend = strchr(k, '>'), *vend = kend ? strstr(kend, "\n</parameter>\n") : NULL;
            if (!kend || kend[1] != '\n' || !vend) { ok = 0; break; }
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(kend - k), k);
            json_t *val = json_loadb(kend + 2, (size_t)(vend - kend - 2), JSON_DECODE_ANY, NULL);
            if (val) json_object_set_new(args, key, val);
            else ok = 0;
            p = vend + 14;
        }
        ok = ok && !strncmp(p, "</function>\n</tool_call>", 24);
        int found = 0;
        json_t *schema = tool_params(tc->tools, name, &found);
        ok = ok && found && (!tc->only || !strcmp(name, tc->only)) && meets(args, schema, schema);
        json_decref(args);
        if (!ok) return 0;
        calls++;
        p += 24;
        if (*p == '\n') p++;
    }
    return calls == 1 || (tc->parallel && calls > 1);
}

static void test_schema_constraint(void) {
    st_tokenizer *t = NULL;
    int32_t n_vocab = 0;
    st_json_vocab *v = fresh_vocab(&t, &n_vocab);
    if (!v) return;
    st_json_schema *sc = NULL;
    CHECK(st_json_schema_compile(person_schema, strlen(person_schema), &sc) == ST_OK);
    if (!sc) return;

    /* byte by byte: what the schema allows, refused at exactly the first byte it does not */
    const size_t ok = (size_t)-1;
    schema_doc(v, sc, "{\"name\":\"Bo\",\"age\":42}", ok);
    schema_doc(v, sc, " {\n \"age\" : -1 , \"name\":\"\\\"x\\u00e9\",\"tags\":[\"a\",12,1,null,\"bc\"],\"sub\":{\"x\":1.5e3,\"ok\":true},"
                      "\"nick\":null,\"home\":{\"city\":\"Oslo\"}}\n", ok);
    schema_doc(v, sc, "<think>\nhm</think>\n{\"age\":0,\"name\":\"x\",\"sub\":{\"x\":null},\"nick\":\"n\"}", ok);
    schema_doc(v, sc, "{\"nam\":", 5);              /* a prefix of a name is not a name */
    schema_doc(v, sc, "{\"zzz\"", 2);               /* no such property */
    schema_doc(v, sc, "{\"name\":1", 8);            /* a string */
    schema_doc(v, sc, "{\"age\":4.5", 8);           /* an integer */
    schema_doc(v, sc, "{\"age\":4e2", 8);
    schema_doc(v, sc, "{\"name\":\"x\"}", 11);      /* age is required */
    schema_doc(v, sc, "{\"name\":\"x\",\"name\"", 14); /* each key once: after "n" only "nick" is left */
    schema_doc(v, sc, "{\"nick\":\"x\",\"name\":\"y\",\"", 24); /* both n... are seen */
    schema_doc(v, sc, "{\"age\":1,\"tags\":[\"b\"", 19); /* enum texts */
    schema_doc(v, sc, "{\"age\":1,\"tags\":[123", 19);
    schema_doc(v, sc, "{\"age\":1,\"tags\":[2", 17);
    schema_doc(v, sc, "{\"age\":1,\"sub\":{}", 16); /* sub.x required */
    schema_doc(v, sc, "{\"age\":1,\"sub\":{\"x\":1,\"y\"", 23); /* closed */
    schema_doc(v, sc, "{\"age\":1,\"sub\":{\"x\":1,\"ok\":true,", 31); /* nothing left to add */
    schema_doc(v, sc, "{\"age\":1,\"nick\":3", 16);
    schema_doc(v, sc, "{\"age\":1,\"home\":{\"city\":\"Bergen\"", 25);
    schema_doc(v, sc, "{\"age\":1,\"home\":{\"city\":\"Oslo\",\"any\":[{}]}", 42); /* home is open: all taken */
    schema_doc(v, sc, "{\"na\\u006de\"", 4);        /* keys without escapes */
    int complete = 1;
    schema_accepts(v, sc, "{\"name\":\"x\",\"age\":1", &complete);
    CHECK(!complete);

    /* the mask equals a walk of every token, along documents (and again, from the cache) */
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    masks_along(v, sc, n_vocab, logits, "{\"name\":\"hello\",\"age\":123,\"tags\":[\"bc\",null],\"sub\":{\"x\":-0.5,\"ok\":false}}");
    masks_along(v, sc, n_vocab, logits, "<think>\nthe</think>\n\n{\"age\":12,\"name\":\"\xE6\x97\xA5\\n\",\"home\":{\"city\":\"Oslo\",\"x\":[true]}}");

    /* sampled on random logits: every finished reply meets the schema */
    json_t *schema = json_loads(person_schema, 0, NULL);
    int completed = 0;
    CHECK(sample_runs(v, sc, NULL, 0, n_vocab, check_answer, schema, &completed));
    CHECKF(completed >= 10, "only %d of 40 runs finished", completed);
    json_decref(schema);
    st_json_schema_free(sc);

    /* bounds: lengths in characters (UTF-8 and escapes, a surrogate pair as one), items, integers */
    CHECK(st_json_schema_compile(bounds_schema, strlen(bounds_schema), &sc) == ST_OK);
    schema_doc(v, sc, "{\"s\":\"ab\",\"m\":\"x\",\"i\":-5,\"p\":11,\"a\":[0,9],\"e\":\"yy\",\"n\":\"q\"}", ok);
    schema_doc(v, sc, "{\"s\":\"\xE6\x97\xA5\xE6\x9C\xAC\",\"i\":120,\"p\":1000,\"a\":[5],\"e\":3,\"n\":null,\"m\":null}", ok);
    schema_doc(v, sc, "{\"s\":\"\\ud83d\\ude00\\n\\u00e9\",\"i\":0,\"p\":109,\"e\":\"x\",\"i\":-0}", 51); /* each key once */
    schema_doc(v, sc, "{\"s\":\"a\"", 7);         /* shorter than 2 */
    schema_doc(v, sc, "{\"s\":\"abcd", 9);         /* longer than 3 */
    schema_doc(v, sc, "{\"s\":\"\xE6\x97\xA5\xE6\x97\xA5\xE6\x97\xA5x", 15);
    schema_doc(v, sc, "{\"s\":\"\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00\\ud83d", 42);
    schema_doc(v, sc, "{\"m\":\"\"", 6);
    schema_doc(v, sc, "{\"i\":-6", 6);
    schema_doc(v, sc, "{\"i\":-50", 7);
    schema_doc(v, sc, "{\"i\":121", 7);
    schema_doc(v, sc, "{\"i\":1.5", 6);
    schema_doc(v, sc, "{\"p\":10}", 7);          /* 10 could have gone on to 100 */
    schema_doc(v, sc, "{\"p\":-", 5);
    schema_doc(v, sc, "{\"p\":0", 5);
    schema_doc(v, sc, "{\"a\":[]", 6);
    schema_doc(v, sc, "{\"a\":[1,2,", 9);
    schema_doc(v, sc, "{\"a\":[10", 7);
    schema_doc(v, sc, "{\"e\":\"z", 6);          /* "zzz" is longer than maxLength */
    schema_doc(v, sc, "{\"e\":30", 6);            /* 30 is above maximum */
    schema_doc(v, sc, "{\"n\":\"ab", 7);
    masks_along(v, sc, n_vocab, logits, "{\"s\":\"abc\",\"m\":\"hello there\",\"i\":-5,\"p\":123,\"a\":[9],\"e\":\"yy\",\"n\":\"\"}");
    masks_along(v, sc, n_vocab, logits, "{\"s\":\"\xE6\x97\xA5\\n\",\"a\":[1,2],\"i\":99}");
    schema = json_loads(bounds_schema, 0, NULL);
    completed = 0;
    CHECK(sample_runs(v, sc, NULL, 0, n_vocab, check_answer, schema, &completed));
    CHECKF(completed >= 10, "bounds: only %d of 40 runs finished", completed);
    json_decref(schema);
    st_json_schema_free(sc);
    free(logits);

    /* patterns: the characters a string stands for (escapes decoded) step the pattern's DFA */
    CHECK(st_json_schema_compile(pattern_schema, strlen(pattern_schema), &sc) == ST_OK);
    schema_doc(v, sc, "{\"zip\":\"12345\",\"code\":\"A\xC3\xA9\",\"any\":\"xxabyy\",\"e\":\"x22\"}", ok);
    schema_doc(v, sc, "{\"zip\":\"12345-6789\",\"code\":null,\"any\":7}", ok);
    schema_doc(v, sc, "{\"code\":\"Z\\u00e9\\u00E9\",\"zip\":\"\\u0031\\u0032345\",\"any\":\"\\u0061b\"}", ok);
    schema_doc(v, sc, "{\"zip\":\"1234a", 12);
    schema_doc(v, sc, "{\"zip\":\"1234\"", 12);
    schema_doc(v, sc, "{\"zip\":\"12345-\"", 14);
    schema_doc(v, sc, "{\"code\":\"A\\u00e9\\u00e9\\u00e9", 22);  /* maxLength 3: no character can follow, nor a backslash */
    schema_doc(v, sc, "{\"code\":\"A\\u00e8", 15);  /* the escape's last digit makes a character the pattern refuses */
    schema_doc(v, sc, "{\"code\":\"\\u01", 12);       /* no \\u01XX is [A-Z] */
    schema_doc(v, sc, "{\"zip\":\"00000\",\"any\":\"\\ud83d\\ude00b\"}", ok);
    schema_doc(v, sc, "{\"code\":\"Ae", 10);
    schema_doc(v, sc, "{\"code\":\"\\n", 10);                  /* an escape is its character */
    schema_doc(v, sc, "{\"e\":\"y", 6);                           /* the enum, filtered by the pattern */
    schema_doc(v, sc, "{\"any\":\"xa\"", 10);
    schema_doc(v, sc, "{\"any\":\"a\\ud83d\\ude00c\"", 22);        /* no "b" in it */
    logits = malloc(sizeof *logits * (size_t)n_vocab);
    masks_along(v, sc, n_vocab, logits, "{\"zip\":\"12345-6789\",\"code\":\"B\xC3\xA9\",\"any\":\"hello ab there\",\"e\":\"x1\"}");
    masks_along(v, sc, n_vocab, logits, "{\"any\":\"\\u0041\\t ab\",\"zip\":\"00000\"}");
    free(logits);
    schema = json_loads(pattern_schema, 0, NULL);
    completed = 0;
    CHECK(sample_runs(v, sc, NULL, 0, n_vocab, check_answer, schema, &completed));
    CHECKF(completed >= 10, "patterns: only %d of 40 runs finished", completed);
    json_decref(schema);
    st_json_schema_free(sc);

    /* tool calls: the call's text, a name among the tools, arguments that fit its parameters */
    const char *tools_text = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
                             "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"],"
                             "\"additionalProperties\":false}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}]";
    json_t *tools = json_loads(tools_text, 0, NULL);
    int32_t prompt[16];
    size_t np = 0;
    prompt[np++] = im_start;
    prompt[np++] = id_of_raw("assistant");
    prompt[np++] = id_of_raw("\n");
    prompt[np++] = think_open;
    prompt[np++] = id_of_raw("\n\n");
    prompt[np++] = think_close;
    prompt[np++] = id_of_raw("\n\n");
    size_t bare = np;
    prompt[np++] = id_of_raw("<tool_call>");
    prompt[np++] = id_of_raw("\n");
    for (int mode = 0; mode < 3; mode++) {
        tools_ctx tc = {tools, mode == 1 ? "get_weather" : NULL, mode == 2, mode == 2 ? "" : "<tool_call>\n"};
        CHECK(st_json_schema_compile_tools(tools_text, strlen(tools_text), tc.only, tc.parallel, 0, &sc) == ST_OK);
        completed = 0;
        CHECK(sample_runs(v, sc, prompt, mode == 2 ? bare : np, n_vocab, check_calls, &tc, &completed));
        CHECKF(completed >= 10, "tools mode %d: only %d of 40 runs finished", mode, completed);
        st_json_constraint *c = NULL;
        CHECK(st_json_constraint_new_schema(v, sc, prompt, np, &c) == ST_OK);
        CHECK(c && !st_json_constraint_allows(c, im_end) && !st_json_constraint_allows(c, id_of_raw("x")) &&
              st_json_constraint_allows(c, id_of_raw("{\"")));
        st_json_constraint_free(c);
        st_json_schema_free(sc);
    }
    /* a named tool's forced opening is read from the prompt: only its arguments are left */
    CHECK(st_json_schema_compile_tools(tools_text, strlen(tools_text), "get_time", 0, 0, &sc) == ST_OK);
    int complete2 = 0;
    st_json_constraint *c = NULL;
    CHECK(st_json_constraint_new_schema(v, sc, prompt, np, &c) == ST_OK);
    const char *call = "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    size_t i = 0;
    for (; call[i]; i++) if (st_json_constraint_accept(c, (unsigned char)call[i]) != ST_OK) break;
    complete2 = st_json_constraint_complete(c);
    CHECKF(!call[i] && complete2, "named call refused at %zu", i);
    CHECK(st_json_constraint_allows(c, im_end) && !st_json_constraint_allows(c, id_of_raw("\n")));
    st_json_constraint_free(c);
    st_json_schema_free(sc);
    CHECK(st_json_schema_compile_tools(tools_text, strlen(tools_text), "launch", 0, 0, &sc) == ST_ERR_INVALID && !sc);
    st_clear_error();

    /* Qwen 3.5's XML form: each value the JSON text of its argument, on its property's rules */
    CHECK(st_json_schema_compile_tools(tools_text, strlen(tools_text), NULL, 0, 1, &sc) == ST_OK);
    const char *w = "<tool_call>\n<function=get_weather>\n";
    char doc[256];
    schema_doc(v, sc, "<tool_call>\n<function=get_weather>\n<parameter=unit>\n\"c\"\n</parameter>\n<parameter=city>\n\"Paris\"\n</parameter>\n"
                      "</function>\n</tool_call>", ok);
    schema_doc(v, sc, "\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>", ok);
    schema_doc(v, sc, "<tool_call>\n<function=get_time>\n<parameter=zone>\n [1, {\"a\": null},\n 2.5e3] \n</parameter>\n<parameter=x>\n-7\n"
                      "</parameter>\n</function>\n</tool_call>", ok);
    snprintf(doc, sizeof doc, "%s<parameter=city>\nParis", w);
    schema_doc(v, sc, doc, 52);                           /* a string in its quotes */
    snprintf(doc, sizeof doc, "%s</", w);
    schema_doc(v, sc, doc, 36);                           /* city and unit are required */
    snprintf(doc, sizeof doc, "%s<parameter=town", w);
    schema_doc(v, sc, doc, 46);                           /* closed */
    snprintf(doc, sizeof doc, "%s<parameter=city>\n\"a<", w);
    schema_doc(v, sc, doc, 54);                           /* no '<' in a value */
    snprintf(doc, sizeof doc, "%s<parameter=unit>\n\"k", w);
    schema_doc(v, sc, doc, 53);                           /* the enum */
    snprintf(doc, sizeof doc, "%s<parameter=unit>\n\"c\"\n</parameter>\n<parameter=unit", w);
    schema_doc(v, sc, doc, 80);                           /* each key once */
    snprintf(doc, sizeof doc, "%s<parameter=city>\n\"Oslo\"</parameter>", w);
    schema_doc(v, sc, doc, 58);                           /* the value's line ends first */
    schema_doc(v, sc, "<tool_call>\n{", 12);             /* not the JSON form */
    schema_doc(v, sc, "<tool_call>\n<function=get_weathe>", 32);
    complete = 1;
    snprintf(doc, sizeof doc, "%s<parameter=unit>\n\"c\"\n</parameter>\n<parameter=city>\n\"x\"\n</parameter>\n</function>", w);
    schema_accepts(v, sc, doc, &complete);
    CHECK(!complete);
    logits = malloc(sizeof *logits * (size_t)n_vocab);
    masks_along(v, sc, n_vocab, logits, "<tool_call>\n<function=get_weather>\n<parameter=city>\n\"hello there\"\n</parameter>\n<parameter=unit>\n\"f\"\n"
                                        "</parameter>\n</function>\n</tool_call>");
    masks_along(v, sc, n_vocab, logits, "<tool_call>\n<function=get_time>\n<parameter=q>\n{\"k\": [true, 123]}\n</parameter>\n</function>\n</tool_call>");
    free(logits);
    st_json_schema_free(sc);
    for (int mode = 0; mode < 3; mode++) {
        tools_ctx tc = {tools, mode == 1 ? "get_weather" : NULL, mode == 2, mode == 0 ? "<tool_call>\n<function=" : ""};
        CHECK(st_json_schema_compile_tools(tools_text, strlen(tools_text), tc.only, tc.parallel, 1, &sc) == ST_OK);
        int32_t xp[32];
        size_t nx = 0;
        for (size_t k = 0; k < bare; k++) xp[nx++] = prompt[k];
        if (mode == 0) {
            xp[nx++] = id_of_raw("<tool_call>");
            xp[nx++] = id_of_raw("\n");
            for (const char *q = "<function="; *q; q++) xp[nx++] = (unsigned char)*q;
        }
        completed = 0;
        CHECK(sample_runs(v, sc, xp, nx, n_vocab, check_xml_calls, &tc, &completed));
        CHECKF(completed >= 10, "xml tools mode %d: only %d of 40 runs finished", mode, completed);
        st_json_schema_free(sc);
    }
    /* names the XML form cannot write */
    const char *angle = "[{\"type\":\"function\",\"function\":{\"name\":\"a>b\"}}]";
    CHECK(st_json_schema_compile_tools(angle, strlen(angle), NULL, 0, 0, &sc) == ST_OK);
    st_json_schema_free(sc);
    CHECK(st_json_schema_compile_tools(angle, strlen(angle), NULL, 0, 1, &sc) == ST_ERR_INVALID && !sc);
    st_clear_error();
    const char *lt = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":{\"a\":{\"enum\":[\"<x>\"]}}}}}]";
    CHECK(st_json_schema_compile_tools(lt, strlen(lt), NULL, 0, 1, &sc) == ST_ERR_INVALID && !sc);
    st_clear_error();
    json_decref(tools);
    st_json_vocab_free(v);
    st_tokenizer_free(t);
}

int main(void) {
    test_automaton();
    test_close_cost();
    test_constraint();
    test_sampler();
    test_schema_compile();
    test_schema_constraint();
    return test_report("test_json_grammar");
}
