/* synth_vocab.c: the vocabulary `strata synth` writes when no tokenizer.json is given: a small but
 * real byte-level BPE in llama.cpp's "gpt2" form, so llama.cpp and Strata both load the file and
 * text round-trips through it.
 *
 * Layout, n_vocab entries in all:
 *   0 .. 255        the 256 byte tokens in GPT-2's bytes_to_unicode order (printable bytes first),
 *                   as in Qwen's own vocabulary;
 *   256 ..          merges learned here by plain BPE training on a fixed English text (at most as
 *                   many as the vocabulary has room for), each merge adding the token it forms;
 *   then            Qwen's special tokens <|endoftext|>, <|im_start|>, <|im_end|> (control) and
 *                   <think>, </think> (user-defined);
 *   the rest        "[PADi]" fillers of type unused, as the converter pads a vocabulary up to
 *                   the model's vocab_size.
 * Training is deterministic: the most frequent pair wins, ties go to the lower pair of ids. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/synth.h"

enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };
#define MAX_MERGES 2048
#define TOKEN_MAX 64

static const char training_text[] =
    "Strata reads a model file, maps its weights, and runs the layers one after another. "
    "The first layer turns each token into a vector; the last one turns the vector back into "
    "a score for every token in the vocabulary. In between, attention layers look back over the "
    "tokens that came before, and the recurrent layers carry a small state from one token to the "
    "next. A mixture of experts sends each token to the few experts that suit it best, and adds "
    "their answers together with the weights the router gave them. The shared expert sees every "
    "token. When the prompt is long, the engine reads it in chunks, and the state at the end of "
    "one chunk is the state at the start of the next, so the answer does not depend on where the "
    "prompt was cut. The tests compare every number with the reference, position by position, and "
    "they fail when the two disagree. This is the text the tokenizer learns its merges from: it is "
    "short, it is plain, and it contains the most common pairs of letters in English words, such as "
    "th, he, in, er, an, re, on, at, en, nd, ti, es, or, te, of, ed, is, it, al, ar, st, to, nt, "
    "ng, se, ha, as, ou, io, le, ve, co, me, de, hi, ri, ro, ic, ne, ea, ra, ce. Numbers such as "
    "2024, 3.14 and 100 are split into single digits. Code looks like this: int main(void) { "
    "return 0; } and for (int i = 0; i < n; i++) sum += x[i] * y[i];\n"
    "New lines, tabs\tand   runs of spaces are tokens too.\n";

typedef struct vocab {
    char (*text)[TOKEN_MAX];
    int32_t *type;
    int n;
    char (*merges)[2 * TOKEN_MAX + 2];
    int n_merges;
} vocab;

/* GPT-2's bytes_to_unicode: printable bytes keep their code point, the other 68 map to U+0100.. */
static void byte_order(int order[256], int cp[256]) {
    int n = 0, extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        if (printable) { order[n++] = b; cp[b] = b; }
    }
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        if (!printable) { order[n++] = b; cp[b] = 0x100 + extra++; }
    }
}

static void utf8(int cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); out[2] = 0; }
}

/* Splits the text into words the way a GPT-2 pre-tokenizer roughly does (an optional leading
 * space glued to a run of letters; anything else alone) and returns each as byte-token ids. */
typedef struct word { int *ids; int n; } word;

static int is_letter(unsigned char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }

static void free_words(word *w, int n) {
    for (int i = 0; i < n; i++) free(w[i].ids);
    free(w);
}

static int split_words(const int byte_id[256], word **out) {
    size_t len = strlen(training_text);
    word *w = calloc(len, sizeof *w);
    if (!w) return -1;
    int nw = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        if (training_text[j] == ' ' && j + 1 < len && is_letter((unsigned char)training_text[j + 1])) j++;
        if (is_letter((unsigned char)training_text[j])) while (j < len && is_letter((unsigned char)training_text[j])) j++;
        else j++;
        w[nw].n = (int)(j - i);
        w[nw].ids = malloc((size_t)w[nw].n * sizeof(int));
        if (!w[nw].ids) {
            free_words(w, nw);
            return -1;
        }
        for (size_t k = i; k < j; k++) w[nw].ids[k - i] = byte_id[(unsigned char)training_text[k]];
        nw++;
        i = j;
    }
    *out = w;
    return nw;
}

static st_status learn_merges(vocab *v, int budget) {
    int order[256], cp[256], byte_id[256];
    byte_order(order, cp);
    for (int i = 0; i < 256; i++) {
        utf8(cp[order[i]], v->text[i]);
        v->type[i] = TOK_NORMAL;
        byte_id[order[i]] = i;
    }
    v->n = 256;
    word *words = NULL;
    int nw = split_words(byte_id, &words);
    if (nw < 0) return st_fail(ST_ERR_NOMEM, "synth: out of memory training the vocabulary");
    if (budget > MAX_MERGES) budget = MAX_MERGES;
    int side = 256 + budget;
    /* Pair counts in a dense table, cleared after each round through the list of pairs seen. */
    int *count = calloc((size_t)side * side, sizeof *count);
    int *seen = malloc(sizeof(training_text) * sizeof *seen);
    if (!count || !seen) {
        free(count);
        free(seen);
        free_words(words, nw);
        return st_fail(ST_ERR_NOMEM, "synth: out of memory training the vocabulary");
    }
    while (v->n_merges < budget) {
        int best = -1, best_count = 1, n_seen = 0;
        for (int i = 0; i < nw; i++)
            for (int k = 0; k + 1 < words[i].n; k++) {
                int p = words[i].ids[k] * side + words[i].ids[k + 1];
                if (count[p]++ == 0) seen[n_seen++] = p;
                if (count[p] > best_count || (count[p] == best_count && p < best)) { best = p; best_count = count[p]; }
            }
        for (int i = 0; i < n_seen; i++) count[seen[i]] = 0;
        if (best < 0) break;    /* no pair occurs twice: nothing left worth merging */
        int a = best / side, b = best % side, id = v->n;
        size_t la = strlen(v->text[a]), lb = strlen(v->text[b]);
        if (la + lb >= TOKEN_MAX) break;
        memcpy(v->text[id], v->text[a], la);
        memcpy(v->text[id] + la, v->text[b], lb + 1);
        char *m = v->merges[v->n_merges++];
        memcpy(m, v->text[a], la);
        m[la] = ' ';
        memcpy(m + la + 1, v->text[b], lb + 1);
        v->type[id] = TOK_NORMAL;
        v->n++;
        for (int i = 0; i < nw; i++) {
            int m = 0;
            for (int k = 0; k < words[i].n; k++) {
                if (k + 1 < words[i].n && words[i].ids[k] == a && words[i].ids[k + 1] == b) { words[i].ids[m++] = id; k++; }
                else words[i].ids[m++] = words[i].ids[k];
            }
            words[i].n = m;
        }
    }
    free(count);
    free(seen);
    free_words(words, nw);
    return ST_OK;
}

st_status synth_vocab_write(st_gguf_writer *w, const char *pre, int64_t n_vocab, int64_t *eos_out) {
    static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"};
    static const int32_t special_type[] = {TOK_CONTROL, TOK_CONTROL, TOK_CONTROL, TOK_USER, TOK_USER};
    const int n_special = 5;
    if (n_vocab < 256 + n_special || n_vocab > (1 << 24))
        return st_fail(ST_ERR_INVALID, "synth: a vocabulary of %lld tokens cannot hold the 256 bytes and %d special tokens",
                       (long long)n_vocab, n_special);
    vocab v = {0};
    v.text = calloc((size_t)n_vocab, sizeof *v.text);
    v.type = calloc((size_t)n_vocab, sizeof *v.type);
    v.merges = calloc(MAX_MERGES, sizeof *v.merges);
    const char **ptrs = calloc((size_t)n_vocab, sizeof *ptrs);
    const char **mptrs = calloc(MAX_MERGES, sizeof *mptrs);
    st_status s = ST_OK;
    if (!v.text || !v.type || !v.merges || !ptrs || !mptrs) {
        s = st_fail(ST_ERR_NOMEM, "synth: out of memory for a vocabulary of %lld tokens", (long long)n_vocab);
        goto done;
    }
    if ((s = learn_merges(&v, (int)(n_vocab - 256 - n_special))) != ST_OK) goto done;
    int first_special = v.n;
    for (int i = 0; i < n_special; i++, v.n++) {
        snprintf(v.text[v.n], TOKEN_MAX, "%s", specials[i]);
        v.type[v.n] = special_type[i];
    }
    for (; v.n < n_vocab; v.n++) {
        snprintf(v.text[v.n], TOKEN_MAX, "[PAD%d]", v.n);
        v.type[v.n] = TOK_UNUSED;
    }
    for (int64_t i = 0; i < n_vocab; i++) ptrs[i] = v.text[i];
    for (int i = 0; i < v.n_merges; i++) mptrs[i] = v.merges[i];
    static const char chatml[] =
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
#define TRY_DONE(expr) do { if ((s = (expr)) != ST_OK) goto done; } while (0)
    TRY_DONE(st_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    TRY_DONE(st_gguf_set_str(w, "tokenizer.ggml.pre", pre));
    TRY_DONE(st_gguf_set_str_array(w, "tokenizer.ggml.tokens", ptrs, (uint64_t)n_vocab));
    TRY_DONE(st_gguf_set_array(w, "tokenizer.ggml.token_type", ST_GGUF_INT32, v.type, (uint64_t)n_vocab));
    TRY_DONE(st_gguf_set_str_array(w, "tokenizer.ggml.merges", mptrs, (uint64_t)v.n_merges));
    TRY_DONE(st_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)first_special + 2));
    TRY_DONE(st_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)first_special));
    TRY_DONE(st_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)first_special));
    TRY_DONE(st_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 0));
    TRY_DONE(st_gguf_set_str(w, "tokenizer.chat_template", chatml));
    if (eos_out) *eos_out = first_special + 2;
#undef TRY_DONE
done:
    free(v.text);
    free(v.type);
    free(v.merges);
    free(ptrs);
    free(mptrs);
    return s;
}
