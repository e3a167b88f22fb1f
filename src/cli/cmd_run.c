/* cmd_run.c: `strata run [-m MODEL] -p TEXT [-n N] [options]`: one answer to TEXT, streamed to
 * stdout. When the model has a chat template (tokenizer.chat_template) TEXT is the user's message
 * and the prompt is the template's conversation of it, opened for the assistant's reply, as
 * llama-completion's conversation mode does; the reply is shown as `strata chat` shows one
 * (reasoning folded: --show-thinking prints it on stderr, --no-think asks for none). --raw, or a
 * model without a template, feeds TEXT as it is and prints its continuation. The prompt goes
 * through the prompt chain, then cli_generate (generate.c) samples until N tokens or an
 * end-of-generation token. Timings go to stderr. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "model/model.h"
#include "strata.h"
#include "text/chat.h"
#include "text/tokenizer.h"

typedef struct run_flags {
    const char *prompt;
    int n_predict, raw, no_think, show_thinking;
} run_flags;

#define OWN(field) offsetof(run_flags, field)
static const cli_flag run_own[] = {
    {"--prompt", "-p", "TEXT", CLI_STRING, OWN(prompt), 0, 0, NULL, NULL,
     "the user's message (with --raw, or a model without a chat template:\n"
     "the text to continue)", 0},
    {"-n", NULL, "N", CLI_INT, OWN(n_predict), 0, 1 << 30, NULL, NULL, "tokens to generate (default 128)", 0},
    {"--raw", NULL, NULL, CLI_SWITCH, OWN(raw), 1, 0, NULL, NULL,
     "feed TEXT as it is, without the chat template, and print its\ncontinuation", 0},
    {"--no-think", NULL, NULL, CLI_SWITCH, OWN(no_think), 1, 0, NULL, NULL, "ask a reasoning model for no reasoning", 0},
    {"--show-thinking", NULL, NULL, CLI_SWITCH, OWN(show_thinking), 1, 0, NULL, NULL,
     "print the model's reasoning on stderr (hidden by default)", 0},
    {NULL},
};

static const cli_command run_command = {
    "run", "[-m MODEL] -p TEXT [-n N] [options]",
    "Prints the model's answer to TEXT (its chat template's reply to a user message), streaming,\n"
    "to stdout; with --raw, the continuation of TEXT.",
    CLI_MODEL | CLI_SESSION | CLI_SAMPLING | CLI_SPEC, run_own, 0};

static void print_text(void *ctx, const char *text, size_t len) {
    (void)ctx;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* The prompt's ids: TEXT in the chat template (*chat = 1, opt filled) or as it is. */
static int prompt_ids(st_model *m, const run_flags *rf, st_chat_options *opt, int *chat, int32_t **ids, size_t *n) {
    *chat = !rf->raw && cli_chat_style(m, opt);
    if (!*chat) {
        if (st_model_tokenize(m, rf->prompt, strlen(rf->prompt), 1, 1, ids, n) != ST_OK) return cli_fail("run: tokenize");
        return 0;
    }
    opt->add_generation_prompt = 1;
    opt->enable_thinking = !rf->no_think;
    st_chat_message msg = {.role = ST_ROLE_USER, .content = rf->prompt};
    char *text;
    size_t len;
    if (st_chat_render(&msg, 1, opt, &text, &len) != ST_OK) return cli_fail("run: chat template");
    st_status s = st_model_tokenize(m, text, len, 0, 1, ids, n);
    free(text);
    return s == ST_OK ? 0 : cli_fail("run: tokenize");
}

int cmd_run(int argc, char **argv) {
    cli_options o;
    cli_options_default(&o);
    run_flags rf = {.n_predict = 128};
    int prc = cli_parse(&run_command, argc, argv, &o, &rf);
    if (prc >= 0) return prc;
    if (!rf.prompt) {
        fprintf(stderr, "strata run: -p TEXT is missing\n");
        cli_usage(&run_command, stderr);
        return 2;
    }

    st_model *m;
    if (cli_load_model("run", &o, &m)) return 1;
    int rc = 1, chat = 0;
    st_session *s = NULL;
    st_sampler *smp = NULL;
    st_detok *dt = NULL;
    st_spec *spec = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    st_chat_options opt = {0};
    cli_reply r = {.show_thinking = rf.show_thinking, .tty = isatty(STDERR_FILENO)};
    if (!st_model_has_tokenizer(m)) {
        fprintf(stderr, "strata: run: this model has no supported tokenizer; use `strata eval --tokens` instead\n");
        goto done;
    }
    if (prompt_ids(m, &rf, &opt, &chat, &ids, &n_ids)) goto done;
    if (n_ids == 0) {
        fprintf(stderr, "strata: run: the prompt is empty\n");
        goto done;
    }
    if (o.session.n_ctx == 0) {
        /* Room for the prompt and the whole continuation. */
        cli_fit_context("run", m, &o.session);
        if ((int64_t)n_ids + rf.n_predict > o.session.n_ctx) o.session.n_ctx = (int64_t)n_ids + rf.n_predict;
    }
    if (st_session_new(m, &o.session, &s) != ST_OK || st_sampler_new(&o.sampling, st_model_n_vocab(m), &smp) != ST_OK ||
        st_detok_new(m->tok, 0, &dt) != ST_OK || st_spec_new(s, &o.spec, &spec) != ST_OK) {
        cli_fail("run");
        goto done;
    }
    for (size_t i = 0; i < n_ids; i++) st_sampler_accept(smp, ids[i]);

    double t0 = st_now();
    if (st_spec_prompt(spec, ids, (int64_t)n_ids) != ST_OK) {
        cli_fail("run: prompt");
        goto done;
    }
    double t1 = st_now();
    int generated = 0;
    cli_generation g = {.model = m, .session = s, .sampler = smp, .detok = dt, .spec = spec, .on_text = print_text,
                        .what = "run"};
    if (chat) {
        g.on_text = cli_reply_text;
        g.ctx = &r;
        if (cli_reply_begin(&r, st_chat_opens_reasoning(&opt))) goto done;
    }
    int fail = cli_generate(&g, rf.n_predict, &generated);
    if (chat) cli_reply_end(&r);
    else fputc('\n', stdout);
    if (fail) goto done;
    double t2 = st_now();
    fprintf(stderr, "strata: prompt %zu tokens in %.2f s (%.1f tok/s), generated %d tokens in %.2f s (%.1f tok/s)\n",
            n_ids, t1 - t0, (double)n_ids / (t1 - t0), generated, t2 - t1, generated > 0 ? generated / (t2 - t1) : 0.0);
    cli_spec_report(spec);
    rc = 0;
done:
    cli_reply_free(&r);
    st_spec_free(spec);
    st_detok_free(dt);
    st_sampler_free(smp);
    st_session_free(s);
    free(ids);
    st_model_free(m);
    return rc;
}
