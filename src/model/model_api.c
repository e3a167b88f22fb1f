/* model_api.c: the public model functions of strata.h: load (open the GGUF, read hyperparameters,
 * bind weights, load the tokenizer if supported, optionally fault the weights in with a progress
 * line), the model's facts, and tokenization through src/text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "base/log.h"
#include "base/mmap.h"
#include "model/device.h"
#include "model/model.h"
#include "quant/repack.h"
#include "quant/types.h"
#include "text/tokenizer.h"

st_model_params st_model_default_params(void) {
    return (st_model_params){.progress = 1, .prefault = 1, .copy_weights = -1, .device = ST_DEVICE_AUTO};
}

static uint64_t tensor_bytes(const st_tensor *t) {
    if (!t->data) return 0;
    return (uint64_t)t->row_bytes * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

/* Bytes one decoded token reads: all dense weights, k/E of the expert weights, one embedding row
 * (and qwen4exp's n_ple PLE table rows). */
static uint64_t decode_bytes(const struct st_model *m) {
    const st_hparams *hp = &m->hp;
    uint64_t b = m->tok_embd.row_bytes + tensor_bytes(&m->output) + tensor_bytes(&m->output_norm);
    b += tensor_bytes(&m->hc_head_norm) + tensor_bytes(&m->hc_head_down) + tensor_bytes(&m->hc_head_up);
    if (m->ple_table.data) b += (uint64_t)hp->ple_n_heads * m->ple_table.row_bytes;
    for (int64_t i = 0; i < hp->n_layer; i++)
        for (int j = 0; j < ST_LAYER_N_TENSORS; j++) {
            uint64_t tb = tensor_bytes(st_layer_tensor_get(&m->layers[i], j));
            if (st_layer_tensors[j].kind != ST_LT_EXPERTS) b += tb;
            else if (hp->n_expert) b += tb * (uint64_t)hp->n_expert_used[i] / (uint64_t)hp->n_expert;
        }
    return b;
}

/* The PLE table is read a few rows per token straight from the mapping: it is never prefaulted
 * or copied (it may be larger than the machine's memory). */
static int is_ple_table(const struct st_model *m, const st_gguf_tensor *t) {
    return m->ple_table.data && t->data == m->ple_table.data;
}

/* Reads one byte of every page of the tensor data, so the first tokens do not wait on page faults. */
static void prefault(const struct st_model *m, int progress) {
    int64_t nt = st_gguf_n_tensors(m->gguf);
    size_t total = 0, done = 0;
    for (int64_t i = 0; i < nt; i++)
        if (!is_ple_table(m, st_gguf_tensor_at(m->gguf, i))) total += st_gguf_tensor_at(m->gguf, i)->size;
    volatile unsigned char sink = 0;
    for (int64_t i = 0; i < nt; i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(m->gguf, i);
        if (is_ple_table(m, t)) continue;
        const unsigned char *p = t->data;
        for (size_t off = 0; off < t->size; off += 4096) sink ^= p[off];
        done += t->size;
        if (progress && (i % 16 == 0 || i == nt - 1)) st_progress("loading", (double)done, (double)total);
    }
    (void)sink;
    if (progress) st_progress_end();
}

/* The data section [base, base+size) as copied: everything but a hole [hole, hole+hole_size)
 * (the PLE table, which stays in the mapping), the bytes after the hole moved down by its size. */
typedef struct copy_map {
    const char *base, *hole;
    size_t size, hole_size;
    char *copy;
} copy_map;

/* Moves a pointer that lies in the copied part of the data section into the copy. */
static const void *rebase(const void *p, const copy_map *c) {
    const char *q = p;
    if (!q || q < c->base || q >= c->base + c->size) return p;
    if (c->hole_size && q >= c->hole && q < c->hole + c->hole_size) return p;
    size_t off = (size_t)(q - c->base);
    if (c->hole_size && q >= c->hole + c->hole_size) off -= c->hole_size;
    return c->copy + off;
}

static void rebase_tensor(st_tensor *t, const copy_map *c) {
    t->data = rebase(t->data, c);
    t->f32 = rebase(t->f32, c);
    t->escale = rebase(t->escale, c);
}

static int overlaps(const st_tensor *a, const st_tensor *b) {
    const char *a0 = a->data, *b0 = b->data;
    return a0 < b0 + tensor_bytes(b) && b0 < a0 + tensor_bytes(a);
}

/* The CPU kernels' layouts (quant/repack.h), in place in the copy, for the matrices that only the
 * matrix products read: not the token embedding (rows are looked up and dequantized), not a
 * tensor read as f32 (f32 != NULL), only bytes inside the copy, not one whose bytes another tensor shares with a different
 * extent (a tied output head is the token embedding). Same bytes per row, so nothing moves. The
 * CUDA upload never sees this: it reads the mapping and returns before the copy. */
static void repack_weights(struct st_model *m, const char *copy, size_t size) {
    int64_t n = st_model_n_tensor_slots(m);
    st_tensor **ts = malloc((size_t)n * sizeof *ts);
    if (!ts) return; /* the plain layout is always correct */
    for (int64_t i = 0; i < n; i++) ts[i] = st_model_tensor_slot(m, i);
    for (int64_t i = 0; i < n; i++) {
        st_tensor *t = ts[i];
        uint32_t to = st_repack_target(t->type);
        if (!t->data || t->repacked || t->f32 || to == t->type || t == &m->tok_embd) continue;
        if ((const char *)t->data < copy || (const char *)t->data + tensor_bytes(t) > copy + size) continue;
        int ok = !overlaps(t, &m->tok_embd), twins = 0;
        for (int64_t j = 0; j < n && ok; j++) {
            if (j == i || !ts[j]->data || !overlaps(t, ts[j])) continue;
            if (ts[j]->data == t->data && tensor_bytes(ts[j]) == tensor_bytes(t) && ts[j]->type == t->type && !ts[j]->f32) twins++;
            else ok = 0;
        }
        if (!ok) continue;
        const st_type_info *ti = st_type_get(t->type);
        int64_t blocks = (int64_t)(tensor_bytes(t) / (uint64_t)ti->type_size);
        if (!st_repack_blocks(to, (void *)t->data, t->data, blocks)) continue;
        t->type = to;
        t->repacked = 1;
        /* tensors bound to the very same bytes (same extent) follow */
        for (int64_t j = 0; j < n && twins; j++)
            if (j != i && ts[j]->data == t->data && tensor_bytes(ts[j]) == tensor_bytes(t)) {
                ts[j]->type = to;
                ts[j]->repacked = 1;
                twins--;
            }
    }
    free(ts);
}

size_t st_host_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    fclose(f);
    return (size_t)kib * 1024;
}

st_ctx_fit st_model_ctx_fit(const st_model *m, int kv_f32) {
    const st_hparams *hp = &m->hp;
    st_ctx_fit f = {.n_ctx_train = hp->n_ctx_train > 0 ? hp->n_ctx_train : 4096, .cell_bytes = sizeof(int32_t)};
    uint32_t kv = kv_f32 ? ST_TYPE_F32 : ST_TYPE_F16;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if (!(st_hp_is_hybrid(hp) && hp->is_linear[il])) f.cell_bytes += 2 * st_kv_row_bytes(kv, hp->n_head_kv[il] * hp->head_dim);
        /* qwen4exp QSA: the raw indexer key of each cell, and 1/r of a pooled f32 block key */
        if (st_hp_qsa(hp, il))
            f.cell_bytes += st_kv_row_bytes(kv, hp->idx_dim) + (uint64_t)hp->idx_dim * sizeof(float) / (uint64_t)hp->compress_ratio[il];
    }
    f.free_bytes = m->dev ? st_device_model_free_bytes(m->dev) : st_host_available_bytes();
    f.n_ctx = f.n_ctx_train;
    uint64_t fits = f.free_bytes / 2 / f.cell_bytes / 256 * 256;
    if (f.free_bytes && (uint64_t)f.n_ctx > fits) {
        f.n_ctx = fits > 256 ? (int64_t)fits : 256;
        f.capped = f.n_ctx < f.n_ctx_train;
        if (!f.capped) f.n_ctx = f.n_ctx_train;
    }
    return f;
}

uint64_t st_model_decode_kv_bytes(const st_model *m, int kv_f32, int64_t n_past) {
    const st_hparams *hp = &m->hp;
    const uint32_t kv = kv_f32 ? ST_TYPE_F32 : ST_TYPE_F16;
    const int64_t seen = n_past + 1; /* the new token's own cell included */
    uint64_t bytes = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if (st_hp_is_hybrid(hp) && hp->is_linear[il]) continue;
        const uint64_t kv_row = 2 * st_kv_row_bytes(kv, hp->n_head_kv[il] * hp->head_dim);
        if (!st_hp_qsa(hp, il)) {
            bytes += kv_row * (uint64_t)seen;
            continue;
        }
        /* QSA: the W cells it selects, the pooled key of every complete block it scores, and
         * r raw indexer keys for each block it pools (one a token on average) */
        const int64_t W = st_hp_qsa_width(hp, il);
        bytes += st_kv_row_bytes(kv, hp->idx_dim);
        if (seen <= W) {
            bytes += kv_row * (uint64_t)seen;
            continue;
        }
        bytes += kv_row * (uint64_t)W + (uint64_t)(seen / hp->compress_ratio[il]) * (uint64_t)hp->idx_dim * sizeof(float);
    }
    return bytes;
}

/* The automatic choice: copy when the tensor data (without the PLE table, which is never copied)
 * takes at most half of the available memory, so a model that barely fits is still served from
 * the page cache without a second copy. */
static int copy_weights_auto(const struct st_model *m) {
    size_t size = st_gguf_file_size(m->gguf) - st_gguf_data_offset(m->gguf) - (size_t)m->ple_table_bytes;
    size_t avail = st_host_available_bytes();
    return avail > 0 && size <= avail / 2;
}

/* copy_weights: the whole data section into one anonymous buffer (huge pages where the kernel
 * gives them), every bound pointer moved. Streaming weights from anonymous huge-page memory is
 * about twice as fast per core as from the file mapping on the machines measured
 * (bench/results/2026-11-29-cpu-qwen35moe-small.md). The mapping's pages are dropped from this
 * process piece by piece as they are copied (st_copy_from_mapping), so the resident peak at load is
 * the copy plus 2 MiB, not twice the weights; the page cache keeps them only as long as the kernel
 * likes. */
typedef struct copy_count { size_t done, total; } copy_count;
static void copy_progress(void *ctx, size_t copied) {
    copy_count *c = ctx;
    c->done += copied;
    st_progress("copying weights", (double)c->done, (double)c->total);
}

static st_status copy_weights(struct st_model *m, int progress) {
    size_t off = st_gguf_data_offset(m->gguf), size = st_gguf_file_size(m->gguf) - off;
    if (st_gguf_n_tensors(m->gguf) == 0 || size == 0) return ST_OK;
    const st_gguf_tensor *t0 = st_gguf_tensor_at(m->gguf, 0);
    copy_map c = {.base = (const char *)t0->data - t0->offset, .size = size};
    if (m->ple_table.data) {
        c.hole = m->ple_table.data;
        c.hole_size = (size_t)m->ple_table_bytes;
    }
    size_t align = 2u << 20, kept = size - c.hole_size;
    char *copy = aligned_alloc(align, (kept + align - 1) / align * align + align);
    if (!copy) return st_fail(ST_ERR_NOMEM, "copy_weights: out of memory for %zu bytes of tensor data", kept);
    madvise(copy, (kept + align - 1) / align * align, MADV_HUGEPAGE);
    size_t head = c.hole_size ? (size_t)(c.hole - c.base) : size;
    copy_count count = {0, kept};
    void (*report)(void *, size_t) = progress ? copy_progress : NULL;
    st_copy_from_mapping(copy, c.base, head, report, &count);
    if (c.hole_size) st_copy_from_mapping(copy + head, c.hole + c.hole_size, size - head - c.hole_size, report, &count);
    if (progress) st_progress_end();
    c.copy = copy;
    for (int64_t i = 0; i < st_model_n_tensor_slots(m); i++) rebase_tensor(st_model_tensor_slot(m, i), &c);
    m->weights_copy = copy;
    repack_weights(m, copy, kept);
    return ST_OK;
}

st_status st_model_load(const char *path, const st_model_params *params, st_model **out) {
    st_model_params p = params ? *params : st_model_default_params();
    *out = NULL;
    if (!(p.gpu_mem_gib >= 0.0 && p.gpu_mem_gib < 1e6))
        return st_fail(ST_ERR_INVALID, "gpu_mem_gib %g: expected a size in GiB, or 0 for all of the GPU", p.gpu_mem_gib);
    struct st_model *m = calloc(1, sizeof *m);
    if (!m) return st_fail(ST_ERR_NOMEM, "out of memory");
    st_status s = st_gguf_open(path, &m->gguf);
    if (s == ST_OK) s = st_hparams_load(m->gguf, &m->hp);
    if (s == ST_OK) s = st_model_bind(m);
    if (s != ST_OK) {
        st_model_free(m);
        return s;
    }
    m->decode_bytes = decode_bytes(m);
    /* The tokenizer's failure is kept, so a CLI can warn and go on with token ids. */
    if (st_tokenizer_load(m->gguf, &m->tok) != ST_OK) {
        snprintf(m->tokenizer_error, sizeof m->tokenizer_error, "%s", st_last_error());
        m->tok = NULL;
        st_clear_error();
    } else if (st_tokenizer_n_vocab(m->tok) != m->hp.n_vocab) {
        snprintf(m->tokenizer_error, sizeof m->tokenizer_error, "the tokenizer has %d tokens, the model %lld",
                 st_tokenizer_n_vocab(m->tok), (long long)m->hp.n_vocab);
        st_tokenizer_free(m->tok);
        m->tok = NULL;
    }
    if (p.device == ST_DEVICE_CUDA || (p.device != ST_DEVICE_CPU && st_device_count() > 0)) {
        /* Uploaded straight from the mapping; the host keeps no copy. */
        st_status ds = st_device_model_load(m, p.progress, (uint64_t)(p.gpu_mem_gib * (double)(1ull << 30)), &m->dev);
        if (ds == ST_OK) {
            *out = m;
            return ST_OK;
        }
        if (p.device == ST_DEVICE_CUDA) {
            st_model_free(m);
            return ds;
        }
        st_warn("%s: running on the CPU: %s", path, st_last_error());
        st_clear_error();
    }
    if (p.copy_weights < 0) p.copy_weights = copy_weights_auto(m);
    if (p.copy_weights) {
        st_status cs = copy_weights(m, p.progress);
        if (cs != ST_OK) {
            st_model_free(m);
            return cs;
        }
    } else if (p.prefault) {
        prefault(m, p.progress);
    }
    *out = m;
    return ST_OK;
}

void st_model_free(st_model *m) {
    if (!m) return;
    if (m->tok) st_tokenizer_free(m->tok);
    st_device_model_free(m->dev);
    st_model_unbind(m);
    free(m->weights_copy);
    if (m->gguf) st_gguf_close(m->gguf);
    free(m);
}

const char *st_model_arch(const st_model *m) { return m->hp.arch_name; }
int32_t st_model_n_vocab(const st_model *m) { return (int32_t)m->hp.n_vocab; }
int64_t st_model_n_ctx_train(const st_model *m) { return m->hp.n_ctx_train; }
int64_t st_model_n_layer(const st_model *m) { return m->hp.n_layer; }
const char *st_model_device(const st_model *m) { return m->dev ? st_device_model_describe(m->dev) : "cpu"; }
double st_model_device_bandwidth(const st_model *m) { return m->dev ? st_device_model_bandwidth(m->dev) : 0.0; }
const char *st_model_device_plan(const st_model *m) { return m->dev ? st_device_model_plan(m->dev) : ""; }
void st_model_device_bus_bandwidth(const st_model *m, size_t bytes, double *mapped, double *copy) {
    *mapped = *copy = 0.0;
    if (m->dev) st_device_model_bus_bandwidth(m->dev, bytes, mapped, copy);
}
uint64_t st_model_weight_bytes(const st_model *m) { return m->weight_bytes; }
uint64_t st_model_decode_bytes(const st_model *m) { return m->decode_bytes; }
uint64_t st_model_ple_table_bytes(const st_model *m) { return m->ple_table_bytes; }

int st_model_has_tokenizer(const st_model *m) { return m->tok != NULL; }
const char *st_model_tokenizer_error(const st_model *m) { return m->tokenizer_error; }

st_status st_model_tokenize(const st_model *m, const char *text, size_t len, int add_special, int parse_special,
                            int32_t **ids, size_t *n) {
    if (!m->tok)
        return st_fail(ST_ERR_UNSUPPORTED, "this model's tokenizer is not supported (%s); give token ids instead",
                       m->tokenizer_error);
    return st_tokenize(m->tok, text, len, add_special, parse_special, ids, n);
}

int st_model_is_eog(const st_model *m, int32_t id) { return m->tok ? st_tokenizer_is_eog(m->tok, id) : 0; }
