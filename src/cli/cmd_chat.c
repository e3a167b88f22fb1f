/* cmd_chat.c: `strata chat -m MODEL`: an interactive conversation in Qwen's ChatML, streamed.
 *
 * Each turn renders the whole conversation with the chat template (src/text/chat.h), tokenizes
 * it, and feeds it through strata.h's reuse policy (st_session_prompt, the server's too): the
 * session keeps all of the previous turn, its reply as the model wrote it (the template drops the
 * reasoning; the held reply stands in for the rendered one), and what differs is cut back to the
 * last message boundary before it. The whole reply is held (feed_last), so the next turn extends it.
 *
 * The reply is parsed as it streams (st_chat_parser): the answer goes to stdout, the reasoning
 * (<think>...</think>) is folded: hidden by default (a dim "(thinking...)" note on a terminal
 * while it lasts), shown on stderr with --show-thinking, dimmed on a terminal.
 *
 * /save NAME and /load NAME keep the session in STATE_DIR/NAME.session, the file `strata serve`
 * uses (server/session_file.h): same folder rules, format and refusals. A loaded session brings
 * its conversation back: the messages are read from the held ids. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "model/model.h"
#include "server/session_file.h"
#include "strata.h"
#include "text/chat.h"
#include "text/tokenizer.h"

/* chat's own flags */
typedef struct chat_flags {
    int n_reply;
    const char *system, *state_dir;
    int no_think, show_thinking;
} chat_flags;

#define OWN(field) offsetof(chat_flags, field)
static const cli_flag chat_own[] = {
    {"-n", NULL, "N", CLI_INT, OWN(n_reply), 1, 1 << 30, NULL, NULL, "at most N tokens per reply (default 2048)", 0},
    {"--system", NULL, "TEXT", CLI_STRING, OWN(system), 0, 0, NULL, NULL, "a system prompt", 0},
    {"--no-think", NULL, NULL, CLI_SWITCH, OWN(no_think), 1, 0, NULL, NULL, "start with reasoning off", 0},
    {"--show-thinking", NULL, NULL, CLI_SWITCH, OWN(show_thinking), 1, 0, NULL, NULL,
     "print the model's reasoning (on stderr, dimmed on a terminal); by default\n"
     "it is hidden and only the answer is printed", 0},
    {"--state-dir", NULL, "DIR", CLI_STRING, OWN(state_dir), 0, 0, NULL, NULL,
     "where /save and /load keep sessions (default " SV_STATE_DIR_DEFAULT ", as for\n`strata serve`)", 0},
    {NULL},
};

static const cli_command chat_command = {
    "chat", "[-m MODEL] [options]",
    "An interactive chat (Qwen ChatML), streaming the replies. Type a message and Enter.\n"
    "Commands: /reset (new conversation), /think on|off (reasoning), /save NAME, /load NAME,\n"
    "/help, /quit.",
    CLI_MODEL | CLI_SESSION | CLI_SAMPLING | CLI_SPEC, chat_own, 0};

static void help(void) {
    fprintf(stderr,
            "  /reset       start a new conversation\n"
            "  /think on|off  let the model reason before answering, or not\n"
            "  /save NAME   save the session (ids, KV cache, recurrent state) to STATE_DIR/NAME.session\n"
            "  /load NAME   restore a saved session and its conversation\n"
            "  /help        this list\n"
            "  /quit        leave (also /exit, or end of input)\n"
            "  NAME is 1-64 letters, digits, '.', '_' or '-', not starting with '.'.\n");
}

typedef struct conversation {
    st_chat_message *msgs;
    char **texts;        /* owned contents */
    size_t n, cap;
} conversation;

static int conv_add(conversation *c, st_chat_role role, const char *text, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        st_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return 0;
        c->msgs = m;
        char **t = realloc(c->texts, cap * sizeof *t);
        if (!t) return 0;
        c->texts = t;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return 0;
    memcpy(copy, text, len);
    copy[len] = 0;
    c->texts[c->n] = copy;
    c->msgs[c->n] = (st_chat_message){.role = role, .content = copy};
    c->n++;
    return 1;
}

static void conv_clear(conversation *c, size_t keep) {
    while (c->n > keep) free(c->texts[--c->n]);
}

/* The conversation as it stands in ChatML ids (a loaded session's): each
 * <|im_start|>ROLE\n...<|im_end|> is a message; the last may be an unfinished reply. */
static int conv_from_ids(conversation *c, const st_model *m, const int32_t *ids, size_t n) {
    char *text;
    size_t len;
    if (st_detokenize(m->tok, ids, n, 1, &text, &len) != ST_OK) return 0;
    static const char open[] = "<|im_start|>", close[] = "<|im_end|>";
    int ok = 1;
    for (const char *p = strstr(text, open); p && ok; p = strstr(p, open)) {
        p += sizeof open - 1;
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        const char *end = strstr(nl + 1, close);
        if (!end) end = text + len;
        size_t rl = (size_t)(nl - p);
        st_chat_role role = rl == 6 && !memcmp(p, "system", 6) ? ST_ROLE_SYSTEM
                            : rl == 9 && !memcmp(p, "assistant", 9) ? ST_ROLE_ASSISTANT
                                                                    : ST_ROLE_USER;
        ok = conv_add(c, role, nl + 1, (size_t)(end - (nl + 1)));
        p = end;
    }
    free(text);
    return ok;
}

/* Feeds the prompt through strata.h's reuse policy (st_session_prompt), the pieces through the
 * speculative decoder, so its MTP head follows the conversation too. */
static int feed_prompt(st_session *s, st_spec *d, const int32_t *ids, size_t n) {
    st_prompt p;
    st_spec_finish(d);
    if (st_session_prompt(s, NULL, ids, (int64_t)n, &p) != ST_OK) return cli_fail("chat");
    while (p.done < p.n) {
        int64_t rows = st_session_prompt_piece(s, &p, 0);
        if (st_spec_prompt(d, p.ids + p.done, rows) != ST_OK) {
            st_prompt_free(&p);
            return cli_fail("chat");
        }
        st_session_prompt_advance(s, &p, rows);
    }
    st_prompt_free(&p);
    return 0;
}

/* ---- /save and /load ---- */

typedef struct chat {
    st_model *m;
    st_session *s;
    conversation conv;
    const char *system;
    const char *state_dir;
    char fingerprint[65];
} chat;

static void chat_reset(chat *c) {
    conv_clear(&c->conv, 0);
    if (c->system) conv_add(&c->conv, ST_ROLE_SYSTEM, c->system, strlen(c->system));
    st_session_reset(c->s);
}

static int name_of(const char *line, const char *cmd, const char **name) {
    *name = line + strlen(cmd);
    while (**name == ' ') (*name)++;
    if (!sv_session_name_ok(*name)) {
        fprintf(stderr, "strata: chat: %s '%s': %s\n", cmd, *name, SV_SESSION_NAME_RULE);
        return 0;
    }
    return 1;
}

static void chat_save(chat *c, const char *line) {
    const char *name;
    if (!name_of(line, "/save", &name)) return;
    void *blob = NULL;
    size_t n = 0, bytes = 0;
    if (st_session_state_save(c->s, &blob, &n) != ST_OK ||
        sv_session_file_write(c->state_dir, name, c->fingerprint, blob, n, &bytes) != ST_OK)
        cli_fail("chat: /save");
    else
        fprintf(stderr, "(saved '%s': %lld tokens, %zu bytes, in %s/%s.session)\n", name, (long long)st_session_n_past(c->s), bytes,
                c->state_dir, name);
    free(blob);
}

/* Refusals leave the session and the conversation as they were. */
static void chat_load(chat *c, const char *line) {
    const char *name;
    if (!name_of(line, "/load", &name)) return;
    void *file = NULL;
    const void *blob = NULL;
    size_t n = 0;
    int missing = 0;
    if (sv_session_file_read(c->state_dir, name, c->fingerprint, &file, &blob, &n, &missing) != ST_OK) {
        cli_fail("chat: /load");
        return;
    }
    conversation loaded = {0};
    if (st_session_state_load(c->s, blob, n) != ST_OK) {
        fprintf(stderr, "strata: chat: /load: '%s' does not fit this session: %s\n", name, st_last_error());
    } else if (!conv_from_ids(&loaded, c->m, (const int32_t *)st_session_ids(c->s), (size_t)st_session_n_past(c->s))) {
        /* The state is in; without its messages it cannot be continued: start over instead. */
        fprintf(stderr, "strata: chat: /load: '%s': out of memory for its conversation; new conversation\n", name);
        conv_clear(&loaded, 0);
        chat_reset(c);
    } else {
        conv_clear(&c->conv, 0);
        free(c->conv.msgs);
        free(c->conv.texts);
        c->conv = loaded;
        loaded = (conversation){0};
        fprintf(stderr, "(loaded '%s': %lld tokens, %zu messages)\n", name, (long long)st_session_n_past(c->s), c->conv.n);
    }
    free(loaded.msgs);
    free(loaded.texts);
    free(file);
}

int cmd_chat(int argc, char **argv) {
    cli_options o;
    cli_options_default(&o);
    chat_flags cf = {.n_reply = 2048, .state_dir = SV_STATE_DIR_DEFAULT};
    int prc = cli_parse(&chat_command, argc, argv, &o, &cf);
    if (prc >= 0) return prc;
    int think = !cf.no_think;
    st_model *m;
    if (cli_load_model("chat", &o, &m)) return 1;
    int rc = 1;
    chat c = {.m = m, .system = cf.system, .state_dir = cf.state_dir};
    st_sampler *smp = NULL;
    st_detok *dt = NULL;
    st_spec *spec = NULL;
    cli_reply r = {.show_thinking = cf.show_thinking, .tty = isatty(STDERR_FILENO)};
    char *line = NULL;
    size_t line_cap = 0;
    if (!st_model_has_tokenizer(m)) {
        fprintf(stderr, "strata: chat: this model has no supported tokenizer\n");
        goto done;
    }
    st_chat_options opt = {.add_generation_prompt = 1};
    cli_chat_style(m, &opt);
    cli_fit_context("chat", m, &o.session);
    if (st_session_new(m, &o.session, &c.s) != ST_OK || st_sampler_new(&o.sampling, st_model_n_vocab(m), &smp) != ST_OK ||
        st_detok_new(m->tok, 0, &dt) != ST_OK || st_spec_new(c.s, &o.spec, &spec) != ST_OK) {
        cli_fail("chat");
        goto done;
    }
    st_model_fingerprint(m, c.fingerprint);
    chat_reset(&c);
    cli_generation g = {.model = m, .session = c.s, .sampler = smp, .detok = dt, .spec = spec, .on_text = cli_reply_text,
                        .ctx = &r, .what = "chat", .feed_last = 1};
    fprintf(stderr, "strata chat: %s. /help for commands. Reasoning is %s%s.\n", st_model_arch(m), think ? "on" : "off",
            think && !cf.show_thinking ? " (hidden; --show-thinking shows it)" : "");
    for (;;) {
        fprintf(stderr, "> ");
        fflush(stderr);
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (got == 0) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/help")) {
            help();
            continue;
        }
        if (!strcmp(line, "/reset")) {
            chat_reset(&c);
            fprintf(stderr, "(new conversation)\n");
            continue;
        }
        if (!strncmp(line, "/think", 6)) {
            if (!strcmp(line, "/think on")) think = 1;
            else if (!strcmp(line, "/think off")) think = 0;
            else fprintf(stderr, "usage: /think on|off\n");
            fprintf(stderr, "(reasoning %s)\n", think ? "on" : "off");
            continue;
        }
        if (!strncmp(line, "/save", 5) && (line[5] == ' ' || !line[5])) {
            chat_save(&c, line);
            continue;
        }
        if (!strncmp(line, "/load", 5) && (line[5] == ' ' || !line[5])) {
            chat_load(&c, line);
            continue;
        }
        if (!conv_add(&c.conv, ST_ROLE_USER, line, (size_t)got)) goto done;
        opt.enable_thinking = think;
        char *prompt;
        size_t prompt_len;
        int32_t *ids;
        size_t n_ids;
        if (st_chat_render(c.conv.msgs, c.conv.n, &opt, &prompt, &prompt_len) != ST_OK) {
            cli_fail("chat: template");
            conv_clear(&c.conv, c.conv.n - 1);
            continue;
        }
        st_status ts = st_model_tokenize(m, prompt, prompt_len, 0, 1, &ids, &n_ids);
        free(prompt);
        if (ts != ST_OK) {
            cli_fail("chat: tokenize");
            goto done;
        }
        if (n_ids + (size_t)cf.n_reply > (size_t)st_session_n_ctx(c.s)) {
            fprintf(stderr, "strata: chat: the conversation and a reply of %d tokens no longer fit the context (%lld tokens); /reset\n",
                    cf.n_reply, (long long)st_session_n_ctx(c.s));
            free(ids);
            conv_clear(&c.conv, c.conv.n - 1);
            continue;
        }
        int fail = feed_prompt(c.s, spec, ids, n_ids);
        free(ids);
        if (fail) {
            /* A failed feed resets the session; the conversation stays, to be fed again. */
            conv_clear(&c.conv, c.conv.n - 1);
            continue;
        }

        if (cli_reply_begin(&r, st_chat_opens_reasoning(&opt))) goto done;
        int generated;
        cli_generate(&g, cf.n_reply, &generated);
        cli_reply_end(&r);
        if (r.failed) goto done;
        conv_add(&c.conv, ST_ROLE_ASSISTANT, r.text ? r.text : "", r.len);
    }
    rc = 0;
done:
    free(line);
    cli_reply_free(&r);
    conv_clear(&c.conv, 0);
    free(c.conv.msgs);
    free(c.conv.texts);
    st_detok_free(dt);
    st_spec_free(spec);
    st_sampler_free(smp);
    st_session_free(c.s);
    st_model_free(m);
    return rc;
}
