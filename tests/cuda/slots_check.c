/* slots_check.c: parallel slots on the GPU: the rows of several sessions in one forward
 * (st_session_feed_seqs, the server's step) against the same rows fed to each session alone.
 *
 *   slots_check MODEL.gguf [--cpu] [--slots N] [--prompt P] [--decode D]
 *
 * N sessions (default 4) read prompts of their own (P + 5k tokens, default P = 230, so that the
 * decode steps cross the 256-cell graph bucket), then take D steps (default 40) together: in most
 * a decode row each; in some one session's rows are another kind beside the others' decode rows:
 * a prompt piece of 3 rows (grouped with them), one of 20 rows (fed alone), a verify chunk of 4
 * rows keeping every row's state (hybrids; its row 1 kept afterwards), and a step where only one
 * session takes part. A twin of every session is fed the same rows alone (a decode row replays its
 * graph). Every row's logits must equal the twin's bit for bit: on a GPU each group of at most 8
 * rows takes the kernels of its sessions' own steps, on the CPU every row's arithmetic is its
 * sequence's alone.
 *
 * One PASS/FAIL line. Exit: 0 pass, 1 fail, 77 no GPU (skipped). --cpu loads the model on the CPU:
 * the same check of the CPU's forward of several sequences, and of this program on a machine
 * without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/session_spec.h"
#include "logit_compare.h"
#include "strata.h"

enum { MAX_SLOTS = 8, MAX_ROWS = 20, VERIFY_ROWS = 4 };

static int64_t V;

typedef struct tally {
    int64_t rows, equal;
    double worst;      /* the largest |difference| of a row that differed */
} tally;

static void compare(tally *t, const float *ref, const float *got, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) {
        t->rows++;
        if (!memcmp(ref + r * V, got + r * V, (size_t)V * sizeof(float))) {
            t->equal++;
            continue;
        }
        for (int64_t i = 0; i < V; i++) {
            double d = fabs((double)ref[r * V + i] - (double)got[r * V + i]);
            if (d > t->worst) t->worst = d;
        }
    }
}

static uint32_t rng = 12345;
static int32_t next_id(void) {
    rng = rng * 1664525u + 1013904223u;
    return (int32_t)((rng >> 8) % (uint32_t)V);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int cpu = 0, n_slots = 4, prompt = 230, decode = 40;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu")) cpu = 1;
        else if (!strcmp(argv[i], "--slots") && i + 1 < argc) n_slots = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--decode") && i + 1 < argc) decode = atoi(argv[++i]);
        else if (!path && argv[i][0] != '-') path = argv[i];
        else return fprintf(stderr, "usage: slots_check MODEL.gguf [--cpu] [--slots N] [--prompt P] [--decode D]\n"), 2;
    }
    if (!path || n_slots < 2 || n_slots > MAX_SLOTS || prompt < 1 || decode < 1)
        return fprintf(stderr, "usage: slots_check MODEL.gguf [--cpu] [--slots 2..%d] [--prompt P] [--decode D]\n", MAX_SLOTS), 2;
    st_model *m = NULL;
    if (lc_load(path, cpu ? ST_DEVICE_CPU : ST_DEVICE_CUDA, &m) != ST_OK) {
        fprintf(stderr, "slots_check: %s\n", st_last_error());
        return cpu ? 1 : 77;
    }
    V = st_model_n_vocab(m);
    int hybrid = strcmp(st_model_arch(m), "qwen3") && strcmp(st_model_arch(m), "qwen3moe");
    int verify = hybrid && strcmp(st_model_arch(m), "qwen4exp"); /* no verify chunk for it (engine/spec.c) */

    /* bat[k] steps together, ref[k] alone */
    st_session *bat[MAX_SLOTS] = {0}, *ref[MAX_SLOTS] = {0};
    float *lr = malloc((size_t)(MAX_ROWS * V) * sizeof(float));
    float *la[MAX_SLOTS] = {0};
    int32_t *toks[MAX_SLOTS] = {0};
    int rc = 1;
    tally t = {0};
    if (!lr) goto done;
    for (int k = 0; k < n_slots; k++) {
        st_session_params sp = st_session_default_params();
        sp.n_ctx = prompt + 5 * MAX_SLOTS + decode * MAX_ROWS + 64;
        if (st_session_new(m, &sp, &bat[k]) != ST_OK || st_session_new(m, &sp, &ref[k]) != ST_OK) goto fail;
        if (verify && (st_session_reserve_steps(bat[k], VERIFY_ROWS) != ST_OK ||
                       st_session_reserve_steps(ref[k], VERIFY_ROWS) != ST_OK))
            goto fail;
        if (!(la[k] = malloc((size_t)(MAX_ROWS * V) * sizeof(float))) || !(toks[k] = malloc(MAX_ROWS * sizeof(int32_t)))) goto done;
        int64_t n = prompt + 5 * k;
        int32_t *p = malloc((size_t)n * sizeof *p);
        if (!p) goto done;
        for (int64_t i = 0; i < n; i++) p[i] = next_id();
        st_status s = st_session_feed(bat[k], p, n, NULL);
        if (s == ST_OK) s = st_session_feed(ref[k], p, n, NULL);
        free(p);
        if (s != ST_OK) goto fail;
        compare(&t, st_session_logits(ref[k]), st_session_logits(bat[k]), 1);
    }

    for (int step = 0; step < decode; step++) {
        st_feed_rows rows[MAX_SLOTS];
        int n_rows = 0;
        int solo = step == 7; /* only session 0 takes part */
        for (int k = 0; k < n_slots && !(solo && k > 0); k++) {
            /* the kind of this session's rows at this step */
            int64_t n = 1;
            int keep = 0;
            if (k == 1 % n_slots && step == 5) n = 3;
            if (k == 2 % n_slots && step == 9) n = MAX_ROWS;
            if (verify && k == 3 % n_slots && (step == 12 || step == 25)) n = VERIFY_ROWS, keep = 1;
            /* the next token is the one the twin's last row picks, then ids of our own */
            toks[k][0] = (int32_t)lc_argmax(st_session_logits(ref[k]), V);
            for (int64_t i = 1; i < n; i++) toks[k][i] = next_id();
            rows[n_rows++] = (st_feed_rows){.s = bat[k], .tokens = toks[k], .n = n, .logits_all = keep ? la[k] : NULL,
                                            .keep_steps = keep};
        }
        int64_t pos0[MAX_SLOTS];
        for (int j = 0; j < n_rows; j++) pos0[j] = st_session_n_past(rows[j].s);
        if (st_session_feed_seqs(bat[0], rows, n_rows) != ST_OK) goto fail;
        for (int j = 0; j < n_rows; j++) {
            int k = 0;
            while (bat[k] != rows[j].s) k++;
            const st_feed_rows *q = &rows[j];
            if (q->keep_steps) {
                if (st_session_feed_rows(ref[k], q->tokens, q->n, lr, NULL, 1) != ST_OK) goto fail;
                compare(&t, lr, q->logits_all, q->n);
                /* back to the state after row 1, both */
                st_session_keep_row(bat[k], pos0[j], 1);
                st_session_keep_row(ref[k], pos0[j], 1);
                st_session_set_logits(bat[k], q->logits_all + V);
                st_session_set_logits(ref[k], lr + V);
            } else {
                if (st_session_feed(ref[k], q->tokens, q->n, NULL) != ST_OK) goto fail;
                compare(&t, st_session_logits(ref[k]), st_session_logits(bat[k]), 1);
            }
        }
    }
    rc = t.equal == t.rows ? 0 : 1;
    printf("slots_check: %s: %d sessions, %lld rows compared, %lld bit for bit%s", rc ? "FAIL" : "PASS", n_slots,
           (long long)t.rows, (long long)t.equal, rc ? "" : "\n");
    if (rc) printf(", largest difference %.3g\n", t.worst);
    goto done;
fail:
    fprintf(stderr, "slots_check: %s\n", st_last_error());
    rc = 1;
done:
    for (int k = 0; k < n_slots; k++) {
        st_session_free(bat[k]);
        st_session_free(ref[k]);
        free(la[k]);
        free(toks[k]);
    }
    free(lr);
    st_model_free(m);
    return rc;
}
