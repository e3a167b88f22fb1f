/* test_chat.c: st_chat_render against Qwen3's own chat template (the expected texts in
 * tests/data/tokenizer/qwen3_chat_cases.json were rendered by jinja2 as transformers does; see
 * gen_chat_cases.py there), st_chat_tojson's Python formatting, and the streaming parser of
 * generated text fed whole and one byte at a time. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test.h"
#include "text/chat.h"

static st_chat_role role_of(const char *r) {
    if (strcmp(r, "system") == 0) return ST_ROLE_SYSTEM;
    if (strcmp(r, "user") == 0) return ST_ROLE_USER;
    if (strcmp(r, "assistant") == 0) return ST_ROLE_ASSISTANT;
    return ST_ROLE_TOOL;
}

static void check_case(json_t *c, st_chat_style style) {
    const char *name = json_string_value(json_object_get(c, "name"));
    json_t *msgs = json_object_get(c, "messages");
    size_t n = json_array_size(msgs);
    st_chat_message *m = calloc(n + 1, sizeof *m);
    st_chat_tool_call *calls = calloc(64, sizeof *calls);
    char *owned[64];
    size_t n_calls = 0, n_owned = 0;
    int raw = json_is_true(json_object_get(c, "raw_arguments"));
    for (size_t i = 0; i < n; i++) {
        json_t *jm = json_array_get(msgs, i);
        m[i].role = role_of(json_string_value(json_object_get(jm, "role")));
        m[i].content = json_string_value(json_object_get(jm, "content"));
        m[i].reasoning_content = json_string_value(json_object_get(jm, "reasoning_content"));
        json_t *tcs = json_object_get(jm, "tool_calls");
        if (json_array_size(tcs)) {
            m[i].tool_calls = &calls[n_calls];
            m[i].n_tool_calls = json_array_size(tcs);
            for (size_t k = 0; k < json_array_size(tcs); k++) {
                json_t *f = json_object_get(json_array_get(tcs, k), "function");
                json_t *args = json_object_get(f, "arguments");
                calls[n_calls].name = json_string_value(json_object_get(f, "name"));
                if (json_is_string(args)) {
                    calls[n_calls].arguments = json_string_value(args);
                } else {
                    owned[n_owned] = json_dumps(args, JSON_COMPACT); /* any formatting: it is re-serialized */
                    calls[n_calls].arguments = owned[n_owned++];
                }
                calls[n_calls].raw_arguments = raw;
                n_calls++;
            }
        }
    }
    json_t *tools = json_object_get(c, "tools");
    const char *tool_texts[8];
    char *tool_owned[8];
    size_t n_tools = json_array_size(tools);
    for (size_t k = 0; k < n_tools; k++) tool_texts[k] = tool_owned[k] = json_dumps(json_array_get(tools, k), JSON_COMPACT);
    st_chat_options o = {0};
    o.tools = tool_texts;
    o.n_tools = n_tools;
    o.add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt"));
    o.enable_thinking = !json_is_false(json_object_get(c, "enable_thinking"));
    o.style = style;
    char *out = NULL;
    size_t len = 0;
    st_status s = st_chat_render(m, n, &o, &out, &len);
    const char *want = json_string_value(json_object_get(c, "expected"));
    if (!want) {
        /* the template raised an error: so must we */
        CHECKF(s == ST_ERR_INVALID && !out, "case '%s' (style %d): the template refuses it (%s), we gave %d",
               name, (int)style, json_string_value(json_object_get(c, "error")), (int)s);
    } else {
        CHECKF(s == ST_OK && out && strcmp(out, want) == 0, "case '%s' (style %d):\n--- ours\n%s\n--- template\n%s",
               name, (int)style, out ? out : "(null)", want);
        CHECK(s != ST_OK || len == strlen(out));
    }
    free(out);
    for (size_t k = 0; k < n_tools; k++) free(tool_owned[k]);
    for (size_t k = 0; k < n_owned; k++) free(owned[k]);
    free(calls);
    free(m);
}

/* ---- parser ---- */
typedef struct collected {
    char content[4096], reasoning[4096];
    size_t nc, nr;
    int n_tools;
    char tool_name[4][64], tool_args[4][256];
    int events;
} collected;

static st_status collect(void *ctx, const st_chat_event *e) {
    collected *c = ctx;
    c->events++;
    if (e->part == ST_CHAT_CONTENT) { memcpy(c->content + c->nc, e->text, e->len); c->nc += e->len; c->content[c->nc] = 0; }
    else if (e->part == ST_CHAT_REASONING) { memcpy(c->reasoning + c->nr, e->text, e->len); c->nr += e->len; c->reasoning[c->nr] = 0; }
    else if (c->n_tools < 4) {
        snprintf(c->tool_name[c->n_tools], 64, "%s", e->name ? e->name : "(none)");
        snprintf(c->tool_args[c->n_tools], 256, "%s", e->arguments ? e->arguments : "(none)");
        c->n_tools++;
    }
    return ST_OK;
}

static void parse(const char *text, int in_reasoning, size_t step, collected *c) {
    memset(c, 0, sizeof *c);
    st_chat_parser *p = NULL;
    CHECK(st_chat_parser_new(in_reasoning, &p) == ST_OK);
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += step) {
        size_t k = i + step <= n ? step : n - i;
        CHECK(st_chat_parser_feed(p, text + i, k, collect, c) == ST_OK);
    }
    CHECK(st_chat_parser_finish(p, collect, c) == ST_OK);
    st_chat_parser_free(p);
}

static void check_parse(const char *text, int in_reasoning, const char *reasoning, const char *content,
                        int n_tools, const char *tool0, const char *args0) {
    size_t steps[] = {1, 2, 3, 7, 100000};
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        collected c;
        parse(text, in_reasoning, steps[s], &c);
        CHECKF(strcmp(c.reasoning, reasoning) == 0, "reasoning '%s' (step %zu) for '%s'", c.reasoning, steps[s], text);
        CHECKF(strcmp(c.content, content) == 0, "content '%s' (step %zu) for '%s'", c.content, steps[s], text);
        CHECKF(c.n_tools == n_tools, "%d tool calls (step %zu)", c.n_tools, steps[s]);
        if (n_tools > 0) {
            CHECKF(strcmp(c.tool_name[0], tool0) == 0, "tool name '%s'", c.tool_name[0]);
            CHECKF(strcmp(c.tool_args[0], args0) == 0, "tool args '%s'", c.tool_args[0]);
        }
    }
}

int main(void) {
    const char *src = getenv("STRATA_SOURCE_DIR");
    const char *files[2] = {"qwen3_chat_cases.json", "qwen35_chat_cases.json"};
    for (int f = 0; f < 2; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s", src ? src : ".", files[f]);
        json_error_t err;
        json_t *root = json_load_file(path, 0, &err);
        CHECKF(root != NULL, "cannot read %s: %s", path, err.text);
        json_t *cases = json_object_get(root, "cases");
        CHECK(json_array_size(cases) >= 10);
        st_chat_style style = strcmp(json_string_value(json_object_get(root, "style")), "qwen35") == 0 ? ST_CHAT_QWEN35 : ST_CHAT_QWEN3;
        CHECK(style == (f ? ST_CHAT_QWEN35 : ST_CHAT_QWEN3));
        /* the template text itself is recognised */
        int known = 0;
        CHECK(st_chat_style_detect(json_string_value(json_object_get(root, "template")), &known) == style && known);
        for (size_t i = 0; i < json_array_size(cases); i++) check_case(json_array_get(cases, i), style);
        json_decref(root);
    }
    st_chat_options oo = {NULL, 0, 1, 1, ST_CHAT_QWEN35};
    CHECK(st_chat_opens_reasoning(&oo));
    oo.enable_thinking = 0;
    CHECK(!st_chat_opens_reasoning(&oo));
    oo.enable_thinking = 1;
    oo.style = ST_CHAT_QWEN3;
    CHECK(!st_chat_opens_reasoning(&oo));
    int known = 1;
    CHECK(st_chat_style_detect("{{ bos_token }}{% for m in messages %}[INST]{% endfor %}", &known) == ST_CHAT_QWEN3 && !known);

    /* tojson: Python's json.dumps formatting */
    char *j = NULL;
    CHECK(st_chat_tojson("{\"b\":1,\"a\":[1.5,0.1,2.0,1e300,-0.0,true,null],\"s\":\"\\u00e9\\n\\u001b/\"}", &j) == ST_OK);
    CHECKF(j && strcmp(j, "{\"b\": 1, \"a\": [1.5, 0.1, 2.0, 1e+300, -0.0, true, null], \"s\": \"\xc3\xa9\\n\\u001b/\"}") == 0, "%s", j);
    free(j);
    CHECK(st_chat_tojson("{not json", &j) == ST_ERR_INVALID);
    /* floats as Python's repr writes them (checked against python3) */
    CHECK(st_chat_tojson("[1e15, 1.5e15, 1e16, 123456789.0, 0.0001, 1e-5, 1.2345e-3, 3.0e-300, 100.0, 0.30000000000000004, 1.6529836533095738e16, -5e-324]", &j) == ST_OK);
    CHECKF(j && strcmp(j, "[1000000000000000.0, 1500000000000000.0, 1e+16, 123456789.0, 0.0001, 1e-05, 0.0012345, 3e-300, 100.0, 0.30000000000000004, 1.6529836533095738e+16, -5e-324]") == 0, "%s", j);
    free(j);

    /* a bad role and a bad tool are refused */
    st_chat_message bad = {(st_chat_role)9, "x", NULL, NULL, 0};
    char *out;
    CHECK(st_chat_render(&bad, 1, NULL, &out, NULL) == ST_ERR_INVALID);
    st_chat_message u = {ST_ROLE_USER, "x", NULL, NULL, 0};
    const char *bad_tool[] = {"{oops"};
    st_chat_options bo = {bad_tool, 1, 1, 1, ST_CHAT_QWEN3};
    CHECK(st_chat_render(&u, 1, &bo, &out, NULL) == ST_ERR_INVALID);

    /* the parser */
    check_parse("<think>\nLet me think.\n</think>\n\nThe answer is 4.", 0, "Let me think.", "The answer is 4.", 0, NULL, NULL);
    check_parse("Let me think.\n\n</think>\n\nFour.", 1, "Let me think.", "Four.", 0, NULL, NULL);
    check_parse("<think>\n\n</think>\n\nNo reasoning.", 0, "", "No reasoning.", 0, NULL, NULL);
    check_parse("Plain answer with a < sign and <b>tags</b> and <thin air.", 0, "",
                "Plain answer with a < sign and <b>tags</b> and <thin air.", 0, NULL, NULL);
    check_parse("<think>a\n\nb</think>I will call.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                0, "a\n\nb", "I will call.", 1, "get_weather", "{\"city\":\"Paris\"}");
    check_parse("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>",
                0, "", "", 2, "f", "{}");
    /* an unterminated call with complete JSON is still a call; with broken JSON it is content */
    check_parse("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}", 0, "", "", 1, "f", "{\"a\":1}");
    check_parse("<tool_call>\n{\"name\": \"f\", \"argu", 0, "", "<tool_call>\n{\"name\": \"f\", \"argu", 0, NULL, NULL);
    /* Qwen3.5's XML form: parameters become a JSON object, values read as JSON when they are */
    check_parse("reasoning here\n</think>\n\nLet me look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n<parameter=note>\ntwo\nlines\n</parameter>\n"
                "</function>\n</tool_call>", 1, "reasoning here", "Let me look.", 1, "get_weather",
                "{\"city\":\"Paris\",\"days\":3,\"opts\":{\"a\":[1,2]},\"note\":\"two\\nlines\"}");
    /* a held partial tag at the end is released as text */
    check_parse("ends with <thi", 0, "", "ends with <thi", 0, NULL, NULL);
    /* multi-byte text split anywhere comes back whole */
    check_parse("<think>\xe6\x80\x9d\xe8\x80\x83</think>\xe7\xad\x94\xe6\xa1\x88 \xf0\x9f\x98\x80", 0,
                "\xe6\x80\x9d\xe8\x80\x83", "\xe7\xad\x94\xe6\xa1\x88 \xf0\x9f\x98\x80", 0, NULL, NULL);
    /* any split of random tag soup gives what the whole text gives (and nothing crashes) */
    {
        static const char *const frags[] = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<", "</", "<tool",
            "<thi", "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "\n", "x", " ", "<function=g>", "<parameter=a>",
            "</parameter>", "</function>", "\xe4\xb8\xad", "think>", "}", "{"};
        uint64_t r = 99;
        int differ = 0;
        for (int iter = 0; iter < 3000; iter++) {
            char text[512];
            size_t n = 0;
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int pieces = 1 + (int)((r >> 33) % 24);
            for (int k = 0; k < pieces; k++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                const char *f = frags[(r >> 33) % (sizeof frags / sizeof *frags)];
                memcpy(text + n, f, strlen(f));
                n += strlen(f);
            }
            text[n] = 0;
            int in_reasoning = (int)(r >> 60) & 1;
            collected whole, bytes, odd;
            parse(text, in_reasoning, 100000, &whole);
            parse(text, in_reasoning, 1, &bytes);
            parse(text, in_reasoning, 5, &odd);
            int same = 1;
            const collected *cs[2] = {&bytes, &odd};
            for (int c = 0; c < 2; c++) {
                same &= strcmp(cs[c]->content, whole.content) == 0 && strcmp(cs[c]->reasoning, whole.reasoning) == 0 &&
                        cs[c]->n_tools == whole.n_tools;
                for (int k = 0; k < whole.n_tools && k < 4; k++)
                    same &= strcmp(cs[c]->tool_name[k], whole.tool_name[k]) == 0 && strcmp(cs[c]->tool_args[k], whole.tool_args[k]) == 0;
            }
            if (!same && differ++ < 3) fprintf(stderr, "split-dependent parse of: %s\n", text);
        }
        CHECKF(differ == 0, "%d texts parse differently when split", differ);
    }
    /* options: without tools a tool block is text; without reasoning a think block is text; a think
     * block is reasoning only at the start of the reply; a call needs a name and an object (the
     * whitespace before the tag goes either way: it is decided before the body is) */
    {
        static const struct { int reasoning, tools; const char *text, *reasoning_out, *content; int n_tools; } cases[] = {
            {1, 0, "<think>r</think> <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>", "r",
             "<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>", 0},
            {0, 1, "<think>r</think>x", "", "<think>r</think>x", 0},
            {1, 1, "Say <think>x</think> now", "", "Say <think>x</think> now", 0},
            {1, 1, "a\n<tool_call>{\"arguments\":{}}</tool_call>", "", "a<tool_call>{\"arguments\":{}}</tool_call>", 0},
            {1, 1, "a \n<tool_call>{\"name\":\"f\"}</tool_call>\n\nb", "", "ab", 1},
        };
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
            for (size_t step = 1; step <= 64; step *= 4) {
                st_chat_parser_options o = {.reasoning = cases[k].reasoning, .tools = cases[k].tools};
                st_chat_parser *p = NULL;
                collected c;
                memset(&c, 0, sizeof c);
                CHECK(st_chat_parser_new_with(&o, &p) == ST_OK);
                size_t n = strlen(cases[k].text);
                for (size_t i = 0; i < n; i += step)
                    CHECK(st_chat_parser_feed(p, cases[k].text + i, i + step <= n ? step : n - i, collect, &c) == ST_OK);
                CHECK(st_chat_parser_finish(p, collect, &c) == ST_OK);
                st_chat_parser_free(p);
                CHECKF(!strcmp(c.reasoning, cases[k].reasoning_out) && !strcmp(c.content, cases[k].content) && c.n_tools == cases[k].n_tools,
                       "case %zu step %zu: reasoning '%s' content '%s' %d calls", k, step, c.reasoning, c.content, c.n_tools);
            }
    }
        /* streaming: content is released before the end when no tag can start */
    {
        st_chat_parser *p;
        collected c;
        memset(&c, 0, sizeof c);
        CHECK(st_chat_parser_new(0, &p) == ST_OK);
        CHECK(st_chat_parser_feed(p, "Hello wor", 9, collect, &c) == ST_OK);
        CHECK(strcmp(c.content, "Hello wor") == 0);
        CHECK(st_chat_parser_feed(p, "ld <", 4, collect, &c) == ST_OK);
        CHECK(strcmp(c.content, "Hello world") == 0); /* " <" held: the space goes if <tool_call> follows */
        CHECK(st_chat_parser_feed(p, "3", 1, collect, &c) == ST_OK);
        CHECK(strcmp(c.content, "Hello world <3") == 0);
        st_chat_parser_free(p);
    }
    return test_report("test_chat");
}
