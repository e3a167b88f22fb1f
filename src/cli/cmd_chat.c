/* cmd_chat.c: `strata chat -m MODEL`: an interactive conversation in Qwen's ChatML, streamed.
 *
 * Each turn renders the whole conversation with the chat template (src/text/chat.h), tokenizes
 * it, and feeds only what the session does not hold yet. When the new prompt does not extend the
 * held tokens (the template drops earlier reasoning, or a reply re-tokenizes differently), the
 * session is reset and the conversation fed again: the Gated DeltaNet state cannot be cut back,
 * so that is the only exact choice. Commands: /reset, /think on|off, /quit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "strata.h"
#include "text/chat.h"
#include "text/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: strata chat [-m MODEL] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
            "                   [--system TEXT] [--no-think] [--prefill N] [-t THREADS] [--ctx N]\n"
            "  An interactive chat (Qwen ChatML), streaming the replies. Type a message and Enter.\n"
            "  Commands: /reset (new conversation), /think on|off (reasoning), /quit.\n"
            "  -m MODEL      a GGUF file (default: the demo model, models/strata-demo-q8_0.gguf)\n"
            "  -n N          at most N tokens per reply (default 2048)\n"
            "  --system TEXT a system prompt\n"
            "  --no-think    start with reasoning off\n"
            "  --temp, --top-k, --top-p, --min-p, --seed, --prefill, -t, --ctx: as for `strata run`\n");
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

typedef struct held {
    int32_t *ids;
    size_t n, cap;
} held;

static int held_push(held *h, int32_t id) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        int32_t *g = realloc(h->ids, cap * sizeof *g);
        if (!g) return 0;
        h->ids = g;
        h->cap = cap;
    }
    h->ids[h->n++] = id;
    return 1;
}

/* Feeds the prompt, reusing the session when it already holds a prefix of it. */
static int feed_prompt(st_session *s, held *h, const int32_t *ids, size_t n) {
    size_t common = 0;
    while (common < h->n && common < n && h->ids[common] == ids[common]) common++;
    if (common < h->n || common == n) {
        /* Not an extension (or nothing new to feed, which leaves no fresh logits): start over. */
        st_session_reset(s);
        h->n = 0;
        common = 0;
    }
    if (st_session_feed(s, ids + common, (int64_t)(n - common), NULL) != ST_OK) return cli_fail("chat");
    for (size_t i = common; i < n; i++)
        if (!held_push(h, ids[i])) return 1;
    return 0;
}

int cmd_chat(int argc, char **argv) {
    const char *model = NULL, *system = NULL;
    int n_reply = 2048, think = 1;
    st_session_params sp = st_session_default_params();
    st_sampler_params sa = st_sampler_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") && has) model = argv[++i];
        else if (!strcmp(a, "-n") && has) n_reply = atoi(argv[++i]);
        else if (!strcmp(a, "--system") && has) system = argv[++i];
        else if (!strcmp(a, "--no-think")) think = 0;
        else if (!strcmp(a, "--temp") && has) sa.temperature = (float)atof(argv[++i]);
        else if (!strcmp(a, "--top-k") && has) sa.top_k = atoi(argv[++i]);
        else if (!strcmp(a, "--top-p") && has) sa.top_p = (float)atof(argv[++i]);
        else if (!strcmp(a, "--min-p") && has) sa.min_p = (float)atof(argv[++i]);
        else if (!strcmp(a, "--seed") && has) sa.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--prefill") && has) sp.n_prefill = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && has) sp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--ctx") && has) sp.n_ctx = atoll(argv[++i]);
        else {
            fprintf(stderr, "strata: chat: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!(model = cli_model_or_default(model, "chat"))) return 1;
    if (!model || sp.n_prefill <= 0 || n_reply <= 0) {
        usage(stderr);
        return 2;
    }
    st_model *m;
    if (cli_load_model(model, &m)) return 1;
    int rc = 1;
    st_session *s = NULL;
    st_sampler *smp = NULL;
    st_detok *dt = NULL;
    conversation conv = {0};
    held h = {0};
    char *line = NULL;
    size_t line_cap = 0;
    if (!st_model_has_tokenizer(m)) {
        fprintf(stderr, "strata: chat: this model has no supported tokenizer\n");
        goto done;
    }
    st_chat_options opt = {.add_generation_prompt = 1};
    const char *tmpl;
    size_t tmpl_len;
    if (st_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, &tmpl_len) == ST_OK) {
        char *t = malloc(tmpl_len + 1);
        if (t) {
            memcpy(t, tmpl, tmpl_len);
            t[tmpl_len] = 0;
            int known;
            opt.style = st_chat_style_detect(t, &known);
            free(t);
        }
    }
    st_clear_error();
    if (st_session_new(m, &sp, &s) != ST_OK || st_sampler_new(&sa, st_model_n_vocab(m), &smp) != ST_OK ||
        st_detok_new(m->tok, 0, &dt) != ST_OK) {
        cli_fail("chat");
        goto done;
    }
    if (system && !conv_add(&conv, ST_ROLE_SYSTEM, system, strlen(system))) goto done;
    size_t n_fixed = conv.n;
    fprintf(stderr, "strata chat: %s. /reset, /think on|off, /quit. Reasoning is %s.\n", st_model_arch(m), think ? "on" : "off");
    for (;;) {
        fprintf(stderr, "> ");
        fflush(stderr);
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (got == 0) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            conv_clear(&conv, n_fixed);
            st_session_reset(s);
            h.n = 0;
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
        if (!conv_add(&conv, ST_ROLE_USER, line, (size_t)got)) goto done;
        opt.enable_thinking = think;
        char *prompt;
        size_t prompt_len;
        int32_t *ids;
        size_t n_ids;
        if (st_chat_render(conv.msgs, conv.n, &opt, &prompt, &prompt_len) != ST_OK) {
            cli_fail("chat: template");
            conv_clear(&conv, conv.n - 1);
            continue;
        }
        st_status ts = st_model_tokenize(m, prompt, prompt_len, 0, 1, &ids, &n_ids);
        free(prompt);
        if (ts != ST_OK) {
            cli_fail("chat: tokenize");
            goto done;
        }
        if (h.n + (n_ids > h.n ? n_ids - h.n : n_ids) + (size_t)n_reply > (size_t)st_session_n_ctx(s) &&
            n_ids + (size_t)n_reply > (size_t)st_session_n_ctx(s)) {
            fprintf(stderr, "strata: chat: the conversation no longer fits the context (%lld tokens); /reset\n",
                    (long long)st_session_n_ctx(s));
            free(ids);
            conv_clear(&conv, conv.n - 1);
            continue;
        }
        int fail = feed_prompt(s, &h, ids, n_ids);
        free(ids);
        if (fail) goto done;

        /* Generate and stream the reply; keep its text for the next render. */
        char *reply = NULL;
        size_t reply_len = 0, reply_cap = 0;
        st_detok_reset(dt);
        for (int i = 0; i < n_reply; i++) {
            int32_t tok;
            if (st_sampler_sample(smp, st_session_logits(s), &tok) != ST_OK) {
                cli_fail("chat: sample");
                goto done;
            }
            if (st_model_is_eog(m, tok)) break;
            st_sampler_accept(smp, tok);
            const char *text;
            size_t len;
            if (st_detok_push(dt, tok, &text, &len) == ST_OK && len) {
                fwrite(text, 1, len, stdout);
                fflush(stdout);
                if (reply_len + len + 1 > reply_cap) {
                    reply_cap = 2 * (reply_len + len + 1);
                    char *g = realloc(reply, reply_cap);
                    if (!g) goto done;
                    reply = g;
                }
                memcpy(reply + reply_len, text, len);
                reply_len += len;
            }
            if (st_session_n_past(s) >= st_session_n_ctx(s) || st_session_feed(s, &tok, 1, NULL) != ST_OK) break;
            held_push(&h, tok);
        }
        const char *tail;
        size_t tail_len;
        st_detok_flush(dt, &tail, &tail_len);
        fwrite(tail, 1, tail_len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        conv_add(&conv, ST_ROLE_ASSISTANT, reply ? reply : "", reply_len);
        free(reply);
    }
    rc = 0;
done:
    free(line);
    conv_clear(&conv, 0);
    free(conv.msgs);
    free(conv.texts);
    free(h.ids);
    st_detok_free(dt);
    st_sampler_free(smp);
    st_session_free(s);
    st_model_free(m);
    return rc;
}
