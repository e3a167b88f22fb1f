/* reply_print.c: a chat reply as `strata chat` and `strata run` show it (cli.h's cli_reply): the
 * raw text kept for the conversation, the answer streamed to stdout, the reasoning folded; and
 * the chat template style of a model (cli_chat_style). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/model.h"
#include "text/chat.h"

/* Drops the blank start of a part (the model writes "<think>\n\n</think>\n\n" before an answer);
 * 1 when nothing is left of this piece. */
static int blank_start(int started, const char **t, size_t *len) {
    if (started) return 0;
    while (*len && (**t == ' ' || **t == '\n' || **t == '\r' || **t == '\t')) (*t)++, (*len)--;
    return *len == 0;
}

static st_status on_event(void *ctx, const st_chat_event *e) {
    cli_reply *r = ctx;
    const char *t = e->text;
    size_t len = e->len;
    int reasoning = e->part == ST_CHAT_REASONING;
    if (blank_start(reasoning ? r->reasoning : r->answering, &t, &len)) return ST_OK;
    if (reasoning) {
        if (!r->reasoning && r->tty) {
            fputs(r->show_thinking ? "\033[2m" : "\033[2m(thinking...)\033[0m", stderr);
            r->note = !r->show_thinking;
        }
        r->reasoning = 1;
        if (r->show_thinking) fwrite(t, 1, len, stderr);
        fflush(stderr);
        return ST_OK;
    }
    if (!r->answering) {
        r->answering = 1;
        if (r->note) fputs("\r\033[K", stderr);
        else if (r->reasoning && r->show_thinking) fputs(r->tty ? "\033[0m\n" : "\n", stderr);
        r->note = 0;
        fflush(stderr);
    }
    fwrite(t, 1, len, stdout);
    fflush(stdout);
    return ST_OK;
}

void cli_reply_text(void *ctx, const char *text, size_t len) {
    cli_reply *r = ctx;
    if (r->len + len + 1 > r->cap) {
        size_t cap = 2 * (r->len + len + 1);
        char *g = realloc(r->text, cap);
        if (!g) {
            r->failed = 1;
            return;
        }
        r->text = g;
        r->cap = cap;
    }
    memcpy(r->text + r->len, text, len);
    r->len += len;
    st_chat_parser_feed(r->parser, text, len, on_event, r);
}

int cli_reply_begin(cli_reply *r, int in_reasoning) {
    r->len = 0;
    r->answering = r->reasoning = r->note = 0;
    if (st_chat_parser_new(in_reasoning, &r->parser) != ST_OK) return cli_fail("reply");
    return 0;
}

void cli_reply_end(cli_reply *r) {
    st_chat_parser_finish(r->parser, on_event, r);
    if (r->note) fputs("\r\033[K", stderr);
    else if (r->reasoning && r->show_thinking && !r->answering) fputs(r->tty ? "\033[0m\n" : "\n", stderr);
    fflush(stderr);
    fputc('\n', stdout);
    fflush(stdout);
    st_chat_parser_free(r->parser);
    r->parser = NULL;
}

void cli_reply_free(cli_reply *r) {
    st_chat_parser_free(r->parser);
    free(r->text);
    r->parser = NULL;
    r->text = NULL;
    r->len = r->cap = 0;
}

int cli_chat_style(const st_model *m, st_chat_options *opt) {
    const char *tmpl;
    size_t len;
    if (st_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, &len) != ST_OK) {
        st_clear_error();
        return 0;
    }
    char *t = malloc(len + 1);
    if (t) {
        memcpy(t, tmpl, len);
        t[len] = 0;
        int known;
        opt->style = st_chat_style_detect(t, &known);
        free(t);
    }
    return 1;
}
