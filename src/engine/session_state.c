/* session_state.c: strata.h's "Session state": the ids a session holds, cutting it back to a
 * prefix of them, checkpoints of its recurrent state, and the whole state as one self-checking
 * byte string (in memory or through a FILE*).
 *
 * The invariant everything here keeps: the state stands for exactly the held ids (the first
 * n_past of session.c's id buffer). Attention layers can forget positions (n_past shrinks; cells
 * past it are overwritten by the next feed). A Gated DeltaNet layer folds every position into its
 * conv and delta state and cannot run backwards, so a hybrid model goes back only to a checkpoint:
 * a copy of every linear layer's recurrent state taken at a position (qwen4exp's PLE conv history
 * included). qwen4exp's pooled QSA block keys are derived from the raw indexer keys and are never
 * saved: the forward drops those past a cut, and a load drops them all. Checkpoints are kept sorted
 * by position; the ones past a cut are dropped (they stand for ids about to be overwritten), a
 * reset clears them (session.c), and at most ST_SESSION_CHECKPOINTS are held, oldest dropped.
 *
 * The byte string (host order, little-endian on every machine Strata runs on):
 *   0    "STRATAST"
 *   8    u32 version (1), u32 kv_type (ggml type id of the KV cache: f16 or f32)
 *   16   char[64] the model's fingerprint (st_model_fingerprint), NUL-padded
 *   80   u32 n_layer, u32 n_ckpt
 *   88   u64 n_ids, u64 ckpt_floats, u64 bytes (the whole string, checksum included)
 *   112  i32 ids[n_ids]
 *        per layer: attention K rows then V rows of positions < n_ids (qwen4exp QSA layers: then
 *        the raw indexer keys of those positions); linear: conv then delta state (qwen4exp's PLE
 *        layer: then its conv history)
 *        per checkpoint: u64 position, f32[ckpt_floats]
 *   end  u64 FNV-1a 64 of every byte before it
 * Loading checks all of it (magic, version, fingerprint, shapes, length, checksum, ids inside the
 * vocabulary, checkpoints in order) before it changes anything, so a refused string leaves the
 * session as it was.
 *
 * A session on a device (engine/device.h) keeps its KV caches and recurrent states there, in the
 * host st_state's layouts: saving downloads the KV rows of the held positions and the recurrent
 * states, loading uploads them, a checkpoint downloads the recurrent state into host memory and a
 * cut uploads it back. The bytes are the same either way, so a state saved on a GPU loads on the
 * CPU and the other way round (when the KV type matches). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/status.h"
#include "engine/session_internal.h"
#include "engine/session_state.h"
#include "model/model.h"

#define STATE_MAGIC "STRATAST"
#define STATE_VERSION 1u

typedef struct state_head {
    char magic[8];
    uint32_t version, kv_type;
    char fingerprint[64];
    uint32_t n_layer, n_ckpt;
    uint64_t n_ids, ckpt_floats, bytes;
} state_head;
_Static_assert(sizeof(state_head) == 112, "the saved state's header is 112 bytes with no padding");

/* Where a session's state lives: the host st_state with every layer's buffers, or the session's
 * device, st then holding only n_ctx, kv_type and n_past (the parts cross with device.h's
 * st_device_session_read_state / _write_state, in the same layouts). */
typedef struct state_ref {
    st_state *st;
    st_device_session *dev;  /* NULL: on the host */
} state_ref;

static st_status state_of(st_session *s, const char *what, state_ref *r) {
    r->st = st_session_state(s);
    r->dev = st_session_device(s);
    if (!r->dev && !r->st->layers) return st_fail(ST_ERR_INVALID, "%s: the session has no state", what);
    return ST_OK;
}

/* The host address of one part of layer il (host state only). */
static void *host_part(const state_ref *r, int64_t il, int part) {
    st_layer_state *L = &r->st->layers[il];
    switch (part) {
    case ST_DSTATE_CONV: return L->conv;
    case ST_DSTATE_SSM: return L->ssm;
    case ST_DSTATE_K: return L->k_cache;
    case ST_DSTATE_IDX: return L->idx_cache;
    case ST_DSTATE_PLE: return L->ple_hist;
    default: return L->v_cache;
    }
}

/* Copies `bytes` of one part of layer il (its first n_cells cells for K and V) out to dst. */
static st_status read_part(const state_ref *r, int64_t il, int part, int64_t n_cells, size_t bytes, void *dst) {
    if (r->dev) return st_device_session_read_state(r->dev, il, part, n_cells, dst);
    if (bytes) memcpy(dst, host_part(r, il, part), bytes);
    return ST_OK;
}

/* And back in from src. */
static st_status write_part(const state_ref *r, int64_t il, int part, int64_t n_cells, size_t bytes, const void *src) {
    if (r->dev) return st_device_session_write_state(r->dev, il, part, n_cells, src);
    if (bytes) memcpy(host_part(r, il, part), src, bytes);
    return ST_OK;
}

static const st_hparams *hparams(const st_session *s) { return &st_session_model(s)->hp; }

static int linear_layer(const st_hparams *hp, int64_t il) { return st_hp_is_hybrid(hp) && hp->is_linear[il]; }
static size_t conv_floats(const st_hparams *hp) { return (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)); }
static size_t ssm_floats(const st_hparams *hp) { return (size_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state); }
/* qwen4exp: the PLE conv history of layer il (0 elsewhere), and whether il keeps indexer keys. */
static size_t ple_floats(const st_hparams *hp, int64_t il) {
    return hp->arch == ST_ARCH_QWEN4EXP && il == hp->ple_layer ? (size_t)(hp->n_hc * hp->n_embd * st_hp_ple_hist(hp)) : 0;
}
static int has_idx(const st_hparams *hp, int64_t il) { return st_hp_qsa(hp, il); }

/* Floats of layer il's recurrent state: conv, delta state and PLE history. */
static size_t layer_recurrent_floats(const st_hparams *hp, int64_t il) {
    return linear_layer(hp, il) ? conv_floats(hp) + ssm_floats(hp) + ple_floats(hp, il) : 0;
}

/* Floats in one checkpoint: every linear layer's recurrent state. */
static size_t recurrent_floats(const st_hparams *hp) {
    size_t n = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) n += layer_recurrent_floats(hp, il);
    return n;
}

/* Bytes of layer il's indexer keys for n_pos positions (0 without QSA). */
static size_t idx_bytes(const st_hparams *hp, uint32_t kv_type, int64_t il, uint64_t n_pos) {
    return has_idx(hp, il) ? (size_t)n_pos * st_kv_row_bytes(kv_type, hp->idx_dim) : 0;
}

/* Bytes of one attention layer's K (or V) rows for n_pos positions. */
static size_t kv_bytes(const st_hparams *hp, uint32_t kv_type, int64_t il, uint64_t n_pos) {
    return (size_t)n_pos * st_kv_row_bytes(kv_type, hp->n_head_kv[il] * hp->head_dim);
}

/* Copies every linear layer's recurrent state into buf (save) or back from it (!save). */
static st_status copy_recurrent(const st_hparams *hp, const state_ref *r, float *buf, int save) {
    size_t conv = conv_floats(hp), ssm = ssm_floats(hp);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if (!linear_layer(hp, il)) continue;
        size_t ple = ple_floats(hp, il);
        if (save) {
            ST_TRY(read_part(r, il, ST_DSTATE_CONV, 0, conv * sizeof *buf, buf));
            ST_TRY(read_part(r, il, ST_DSTATE_SSM, 0, ssm * sizeof *buf, buf + conv));
            if (ple) ST_TRY(read_part(r, il, ST_DSTATE_PLE, 0, ple * sizeof *buf, buf + conv + ssm));
        } else {
            ST_TRY(write_part(r, il, ST_DSTATE_CONV, 0, conv * sizeof *buf, buf));
            ST_TRY(write_part(r, il, ST_DSTATE_SSM, 0, ssm * sizeof *buf, buf + conv));
            if (ple) ST_TRY(write_part(r, il, ST_DSTATE_PLE, 0, ple * sizeof *buf, buf + conv + ssm));
        }
        buf += conv + ssm + ple;
    }
    return ST_OK;
}

/* ---- ids, cut-back, checkpoints ---- */

const int32_t *st_session_ids(const st_session *s) { return st_session_id_buffer((st_session *)s); }

int st_session_is_recurrent(const st_session *s) { return recurrent_floats(hparams(s)) > 0; }

int st_session_checkpoints(const st_session *s, int64_t *pos, int cap) {
    const struct st_checkpoints *c = *st_session_checkpoint_slot((st_session *)s);
    int n = c ? c->n : 0;
    for (int i = 0; i < n && i < cap; i++) pos[i] = c->pos[i];
    return n;
}

st_status st_session_checkpoint(st_session *s) {
    const st_hparams *hp = hparams(s);
    size_t nf = recurrent_floats(hp);
    if (!nf) return ST_OK; /* attention only: a cut needs no checkpoint */
    state_ref r;
    ST_TRY(state_of(s, "checkpoint", &r));
    st_state *st = r.st;
    struct st_checkpoints **slot = st_session_checkpoint_slot(s);
    if (!*slot && !(*slot = calloc(1, sizeof **slot))) return st_fail(ST_ERR_NOMEM, "checkpoint: out of memory");
    struct st_checkpoints *c = *slot;
    if (c->n && c->pos[c->n - 1] == st->n_past) return ST_OK;
    if (c->n == ST_SESSION_CHECKPOINTS) {
        float *oldest = c->data[0];
        memmove(c->pos, c->pos + 1, (ST_SESSION_CHECKPOINTS - 1) * sizeof *c->pos);
        memmove(c->data, c->data + 1, (ST_SESSION_CHECKPOINTS - 1) * sizeof *c->data);
        c->n--;
        c->data[c->n] = oldest;
    }
    if (!c->data[c->n] && !(c->data[c->n] = malloc(nf * sizeof(float))))
        return st_fail(ST_ERR_NOMEM, "checkpoint: out of memory for %zu floats of recurrent state", nf);
    /* A failed download adds nothing (the buffer stays for the next checkpoint). */
    ST_TRY(copy_recurrent(hp, &r, c->data[c->n], 1));
    c->pos[c->n++] = st->n_past;
    return ST_OK;
}

st_status st_session_cut(st_session *s, int64_t n, int64_t *kept) {
    state_ref r;
    ST_TRY(state_of(s, "cut", &r));
    st_state *st = r.st;
    if (n < 0 || n > st->n_past)
        return st_fail(ST_ERR_RANGE, "cut: position %lld is outside the %lld held", (long long)n, (long long)st->n_past);
    struct st_checkpoints *c = *st_session_checkpoint_slot(s);
    int64_t to = n;
    if (n < st->n_past && st_session_is_recurrent(s)) {
        if (n == 0) {
            st_session_reset(s);
            if (kept) *kept = 0;
            return ST_OK;
        }
        int i = c ? c->n - 1 : -1;
        while (i >= 0 && c->pos[i] > n) i--;
        if (i < 0)
            return st_fail(ST_ERR_RANGE,
                           "cut: no checkpoint at or before position %lld (%d held%s): the recurrent state cannot run backwards",
                           (long long)n, c ? c->n : 0, c && c->n ? ", all later" : "");
        to = c->pos[i];
        st_status cs = copy_recurrent(hparams(s), &r, c->data[i], 0);
        if (cs != ST_OK) {
            /* A half-written state matches no ids: start a fresh sequence, keep the message. */
            st_session_reset(s);
            if (kept) *kept = 0;
            return cs;
        }
    }
    while (c && c->n && c->pos[c->n - 1] > to) c->n--;
    st->n_past = to;
    if (st->mtp_n_past > to) st->mtp_n_past = to; /* the MTP head's cache forgets as attention does */
    if (kept) *kept = to;
    return ST_OK;
}

st_status st_session_reuse(st_session *s, const int32_t *prompt, int64_t n, int64_t *kept) {
    if (n <= 0) return st_fail(ST_ERR_INVALID, "reuse: a prompt of %lld tokens", (long long)n);
    const int32_t *held = st_session_ids(s);
    int64_t n_held = st_session_n_past(s), p = 0;
    while (p < n_held && p < n && held[p] == prompt[p]) p++;
    if (p == n) p = n - 1; /* the last prompt token is fed again: its logits start the reply */
    *kept = p;
    if (p == n_held) return ST_OK;
    if (st_session_cut(s, p, kept) != ST_OK) {
        /* No exact way back (or a state that cannot be cut): a fresh sequence is always exact. */
        st_clear_error();
        st_session_reset(s);
        *kept = 0;
    }
    return ST_OK;
}

/* ---- the fingerprint ---- */

void st_model_fingerprint(const st_model *m, char out[65]) {
    const char *name = "";
    size_t len = 0;
    if (st_gguf_get_str(m->gguf, "general.name", &name, &len) != ST_OK) name = "", len = 0;
    char desc[512];
    snprintf(desc, sizeof desc, "%s|%lld|%d|%llu|%.*s", st_model_arch(m), (long long)st_model_n_layer(m), st_model_n_vocab(m),
             (unsigned long long)st_model_weight_bytes(m), (int)(len < 300 ? len : 300), name);
    uint64_t h = 14695981039346656037ULL;
    for (const char *p = desc; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    snprintf(out, 65, "%016llx", (unsigned long long)h);
}

/* ---- the byte string ---- */

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}
#define FNV_START 14695981039346656037ULL

/* Bytes of the whole string for these counts. */
static uint64_t state_bytes(const st_hparams *hp, uint32_t kv_type, uint64_t n_ids, uint64_t n_ckpt, uint64_t ckpt_floats) {
    uint64_t b = sizeof(state_head) + n_ids * sizeof(int32_t) + 8;
    for (int64_t il = 0; il < hp->n_layer; il++)
        b += linear_layer(hp, il) ? layer_recurrent_floats(hp, il) * sizeof(float)
                               : 2 * kv_bytes(hp, kv_type, il, n_ids) + idx_bytes(hp, kv_type, il, n_ids);
    return b + n_ckpt * (sizeof(uint64_t) + ckpt_floats * sizeof(float));
}

/* Where the string goes: a buffer or a file, hashed on the way. */
typedef struct sink {
    unsigned char *buf;
    FILE *f;
    uint64_t hash;
    int failed;
    int unsealed;  /* the prompt cache's copy: no checksum computed (its bytes never leave memory) */
} sink;

static void put(sink *k, const void *p, size_t n) {
    if (!n) return;
    if (!k->unsealed) k->hash = fnv1a(k->hash, p, n);
    if (k->buf) {
        memcpy(k->buf, p, n);
        k->buf += n;
    } else if (!k->failed && fwrite(p, 1, n, k->f) != n) {
        k->failed = 1;
    }
}

/* Puts one part of layer il: straight from the host state, or downloaded into stage first. */
static st_status put_part(sink *k, const state_ref *r, int64_t il, int part, int64_t n_cells, size_t bytes, void *stage) {
    if (!r->dev) {
        put(k, host_part(r, il, part), bytes);
        return ST_OK;
    }
    ST_TRY(read_part(r, il, part, n_cells, bytes, stage));
    put(k, stage, bytes);
    return ST_OK;
}

/* The largest part of any layer for n_ids positions: a device state's staging buffer. */
static size_t largest_part(const st_hparams *hp, uint32_t kv_type, uint64_t n_ids) {
    size_t b = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        size_t p = linear_layer(hp, il) ? layer_recurrent_floats(hp, il) * sizeof(float) : kv_bytes(hp, kv_type, il, n_ids);
        size_t q = idx_bytes(hp, kv_type, il, n_ids);
        if (p > b) b = p;
        if (q > b) b = q;
    }
    return b;
}

static st_status write_state(st_session *s, const state_ref *r, const state_head *h, sink *k) {
    const st_hparams *hp = hparams(s);
    const struct st_checkpoints *c = *st_session_checkpoint_slot(s);
    void *stage = NULL;
    if (r->dev) {
        size_t sb = largest_part(hp, h->kv_type, h->n_ids);
        if (!(stage = malloc(sb ? sb : 1)))
            return st_fail(ST_ERR_NOMEM, "save: out of memory for a staging buffer of %zu bytes", sb);
    }
    put(k, h, sizeof *h);
    put(k, st_session_ids(s), (size_t)h->n_ids * sizeof(int32_t));
    st_status st = ST_OK;
    int64_t n = (int64_t)h->n_ids;
    for (int64_t il = 0; il < hp->n_layer && st == ST_OK; il++) {
        if (linear_layer(hp, il)) {
            st = put_part(k, r, il, ST_DSTATE_CONV, 0, conv_floats(hp) * sizeof(float), stage);
            if (st == ST_OK) st = put_part(k, r, il, ST_DSTATE_SSM, 0, ssm_floats(hp) * sizeof(float), stage);
            if (st == ST_OK && ple_floats(hp, il))
                st = put_part(k, r, il, ST_DSTATE_PLE, 0, ple_floats(hp, il) * sizeof(float), stage);
        } else {
            st = put_part(k, r, il, ST_DSTATE_K, n, kv_bytes(hp, h->kv_type, il, h->n_ids), stage);
            if (st == ST_OK) st = put_part(k, r, il, ST_DSTATE_V, n, kv_bytes(hp, h->kv_type, il, h->n_ids), stage);
            if (st == ST_OK && has_idx(hp, il))
                st = put_part(k, r, il, ST_DSTATE_IDX, n, idx_bytes(hp, h->kv_type, il, h->n_ids), stage);
        }
    }
    free(stage);
    ST_TRY(st);
    for (uint32_t i = 0; i < h->n_ckpt; i++) {
        uint64_t pos = (uint64_t)c->pos[i];
        put(k, &pos, sizeof pos);
        put(k, c->data[i], (size_t)h->ckpt_floats * sizeof(float));
    }
    uint64_t sum = k->hash;
    put(k, &sum, sizeof sum);
    return ST_OK;
}

static st_status make_head(st_session *s, state_ref *r, state_head *h) {
    ST_TRY(state_of(s, "save", r));
    const st_state *st = r->st;
    const st_hparams *hp = hparams(s);
    const struct st_checkpoints *c = *st_session_checkpoint_slot(s);
    memset(h, 0, sizeof *h);
    memcpy(h->magic, STATE_MAGIC, 8);
    h->version = STATE_VERSION;
    h->kv_type = st->kv_type;
    char fp[65];
    st_model_fingerprint(st_session_model(s), fp);
    memcpy(h->fingerprint, fp, strlen(fp));
    h->n_layer = (uint32_t)hp->n_layer;
    h->n_ckpt = c ? (uint32_t)c->n : 0;
    h->n_ids = (uint64_t)st->n_past;
    h->ckpt_floats = recurrent_floats(hp);
    h->bytes = state_bytes(hp, h->kv_type, h->n_ids, h->n_ckpt, h->ckpt_floats);
    return ST_OK;
}

static st_status save_state(const st_session *cs, void **buf, size_t *n, int unsealed) {
    st_session *s = (st_session *)cs;
    state_ref r;
    state_head h;
    *buf = NULL;
    *n = 0;
    ST_TRY(make_head(s, &r, &h));
    unsigned char *b = malloc((size_t)h.bytes);
    if (!b) return st_fail(ST_ERR_NOMEM, "save: out of memory for a session state of %llu bytes", (unsigned long long)h.bytes);
    sink k = {.buf = b, .hash = FNV_START, .unsealed = unsealed};
    st_status ws = write_state(s, &r, &h, &k);
    if (ws != ST_OK) {
        free(b);
        return ws;
    }
    *buf = b;
    *n = (size_t)h.bytes;
    return ST_OK;
}

st_status st_session_state_save(const st_session *s, void **buf, size_t *n) { return save_state(s, buf, n, 0); }
st_status st_session_state_copy(const st_session *s, void **buf, size_t *n) { return save_state(s, buf, n, 1); }

st_status st_session_state_write(const st_session *cs, FILE *f) {
    st_session *s = (st_session *)cs;
    state_ref r;
    state_head h;
    ST_TRY(make_head(s, &r, &h));
    sink k = {.f = f, .hash = FNV_START};
    ST_TRY(write_state(s, &r, &h, &k));
    if (k.failed || fflush(f))
        return st_fail(ST_ERR_IO, "save: writing %llu bytes of session state failed: %s", (unsigned long long)h.bytes, strerror(errno));
    return ST_OK;
}

/* The header's own checks: what it is, for which model and shapes, and how long it must be. */
static st_status check_head(st_session *s, const st_state *st, const state_head *h) {
    const st_hparams *hp = hparams(s);
    if (memcmp(h->magic, STATE_MAGIC, 8)) return st_fail(ST_ERR_FORMAT, "not a Strata session state");
    if (h->version != STATE_VERSION)
        return st_fail(ST_ERR_FORMAT, "a version %u session state; this build reads version %u", h->version, STATE_VERSION);
    char fp[65], mine[65];
    memcpy(fp, h->fingerprint, 64);
    fp[64] = 0;
    st_model_fingerprint(st_session_model(s), mine);
    if (strcmp(fp, mine)) return st_fail(ST_ERR_FORMAT, "saved for another model (fingerprint %s; this model is %s)", fp, mine);
    if (h->n_layer != (uint32_t)hp->n_layer || h->kv_type != st->kv_type)
        return st_fail(ST_ERR_FORMAT, "the state has %u layers and KV type %u; this session has %lld and %u", h->n_layer, h->kv_type,
                       (long long)hp->n_layer, st->kv_type);
    if (h->n_ids > (uint64_t)st->n_ctx)
        return st_fail(ST_ERR_RANGE, "the state holds %llu tokens; this session's context has %lld", (unsigned long long)h->n_ids,
                       (long long)st->n_ctx);
    if (h->n_ckpt > ST_SESSION_CHECKPOINTS || (h->n_ckpt && h->ckpt_floats != recurrent_floats(hp)))
        return st_fail(ST_ERR_FORMAT, "the state has %u checkpoints of %llu floats; this session keeps %d of %zu", h->n_ckpt,
                       (unsigned long long)h->ckpt_floats, ST_SESSION_CHECKPOINTS, recurrent_floats(hp));
    uint64_t want = state_bytes(hp, h->kv_type, h->n_ids, h->n_ckpt, h->ckpt_floats);
    if (h->bytes != want)
        return st_fail(ST_ERR_FORMAT, "the state's header says %llu bytes where its counts need %llu: altered",
                       (unsigned long long)h->bytes, (unsigned long long)want);
    return ST_OK;
}

/* Everything past the header: length, checksum, ids, checkpoint order. */
static st_status check_body(st_session *s, const state_head *h, const unsigned char *b, size_t n, int unsealed) {
    if (n != h->bytes)
        return st_fail(ST_ERR_FORMAT, "the state is truncated or padded: its header says %llu bytes, there are %zu",
                       (unsigned long long)h->bytes, n);
    uint64_t sum;
    memcpy(&sum, b + n - 8, 8);
    if (!unsealed && sum != fnv1a(FNV_START, b, n - 8))
        return st_fail(ST_ERR_FORMAT, "the state has been altered: its checksum does not match");
    int32_t n_vocab = st_model_n_vocab(st_session_model(s));
    for (uint64_t i = 0; i < h->n_ids; i++) {
        int32_t id;
        memcpy(&id, b + sizeof *h + i * sizeof id, sizeof id);
        if (id < 0 || id >= n_vocab)
            return st_fail(ST_ERR_FORMAT, "the state's id %llu is %d, outside the vocabulary 0..%d", (unsigned long long)i, id, n_vocab - 1);
    }
    size_t rec = (size_t)(h->ckpt_floats * sizeof(float)) + sizeof(uint64_t);
    const unsigned char *ck = b + n - 8 - (size_t)h->n_ckpt * rec;
    uint64_t last = 0;
    for (uint32_t i = 0; i < h->n_ckpt; i++) {
        uint64_t pos;
        memcpy(&pos, ck + i * rec, sizeof pos);
        if (pos > h->n_ids || (i && pos <= last))
            return st_fail(ST_ERR_FORMAT, "the state's checkpoint %u is at %llu: not in order within %llu tokens", i,
                           (unsigned long long)pos, (unsigned long long)h->n_ids);
        last = pos;
    }
    return ST_OK;
}

static st_status load_state(st_session *s, const void *buf, size_t n, int unsealed) {
    state_ref r;
    ST_TRY(state_of(s, "load", &r));
    st_state *st = r.st;
    const st_hparams *hp = hparams(s);
    const unsigned char *b = buf;
    state_head h;
    if (n < sizeof h) {
        if (n >= 8 && memcmp(b, STATE_MAGIC, 8)) return st_fail(ST_ERR_FORMAT, "not a Strata session state");
        return st_fail(ST_ERR_FORMAT, "the state is truncated: %zu bytes, shorter than its %zu-byte header", n, sizeof h);
    }
    memcpy(&h, b, sizeof h);
    ST_TRY(check_head(s, st, &h));
    ST_TRY(check_body(s, &h, b, n, unsealed));
    /* Buffers first, so that running out of memory leaves the session as it was. */
    struct st_checkpoints **slot = st_session_checkpoint_slot(s);
    if (h.n_ckpt && !*slot && !(*slot = calloc(1, sizeof **slot))) return st_fail(ST_ERR_NOMEM, "load: out of memory");
    for (uint32_t i = 0; i < h.n_ckpt; i++)
        if (!(*slot)->data[i] && !((*slot)->data[i] = malloc((size_t)h.ckpt_floats * sizeof(float))))
            return st_fail(ST_ERR_NOMEM, "load: out of memory for checkpoint %u", i);

    /* Everything checked: now the session changes. */
    size_t off = sizeof h;
    memcpy(st_session_id_buffer(s), b + off, (size_t)h.n_ids * sizeof(int32_t));
    off += (size_t)h.n_ids * sizeof(int32_t);
    st_status ls = ST_OK;
    int64_t n_ids = (int64_t)h.n_ids;
    for (int64_t il = 0; il < hp->n_layer && ls == ST_OK; il++) {
        if (linear_layer(hp, il)) {
            size_t conv = conv_floats(hp) * sizeof(float), ssm = ssm_floats(hp) * sizeof(float);
            size_t ple = ple_floats(hp, il) * sizeof(float);
            ls = write_part(&r, il, ST_DSTATE_CONV, 0, conv, b + off);
            if (ls == ST_OK) ls = write_part(&r, il, ST_DSTATE_SSM, 0, ssm, b + off + conv);
            if (ls == ST_OK && ple) ls = write_part(&r, il, ST_DSTATE_PLE, 0, ple, b + off + conv + ssm);
            off += conv + ssm + ple;
        } else {
            size_t kv = kv_bytes(hp, st->kv_type, il, h.n_ids), idx = idx_bytes(hp, st->kv_type, il, h.n_ids);
            ls = write_part(&r, il, ST_DSTATE_K, n_ids, kv, b + off);
            if (ls == ST_OK) ls = write_part(&r, il, ST_DSTATE_V, n_ids, kv, b + off + kv);
            if (ls == ST_OK && idx) ls = write_part(&r, il, ST_DSTATE_IDX, n_ids, idx, b + off + 2 * kv);
            off += 2 * kv + idx;
            /* the pooled block keys belonged to the old keys */
            if (!r.dev) st->layers[il].n_blocks = 0;
        }
    }
    if (ls != ST_OK) {
        /* Only a device's copy fails here: the state is half old, half new and matches no ids. */
        st_session_reset(s);
        return ls;
    }
    st->n_past = (int64_t)h.n_ids;
    st->mtp_n_past = 0; /* not saved: drafts after a load start from an empty head cache */
    st_checkpoints_clear(*slot);
    for (uint32_t i = 0; i < h.n_ckpt; i++) {
        uint64_t pos;
        memcpy(&pos, b + off, sizeof pos);
        memcpy((*slot)->data[i], b + off + sizeof pos, (size_t)h.ckpt_floats * sizeof(float));
        (*slot)->pos[i] = (int64_t)pos;
        off += sizeof pos + (size_t)h.ckpt_floats * sizeof(float);
    }
    if (*slot) (*slot)->n = (int)h.n_ckpt;
    return ST_OK;
}

st_status st_session_state_load(st_session *s, const void *buf, size_t n) { return load_state(s, buf, n, 0); }
st_status st_session_state_paste(st_session *s, const void *buf, size_t n) { return load_state(s, buf, n, 1); }

st_status st_session_state_read(st_session *s, FILE *f) {
    state_ref ref;
    ST_TRY(state_of(s, "load", &ref));
    st_state *st = ref.st;
    state_head h;
    size_t got = fread(&h, 1, sizeof h, f);
    if (got < sizeof h) {
        if (got >= 8 && memcmp(h.magic, STATE_MAGIC, 8)) return st_fail(ST_ERR_FORMAT, "not a Strata session state");
        return st_fail(ST_ERR_FORMAT, "the state is truncated: %zu bytes, shorter than its %zu-byte header", got, sizeof h);
    }
    /* The header decides how much to read: checked before any large allocation. */
    ST_TRY(check_head(s, st, &h));
    unsigned char *b = malloc((size_t)h.bytes);
    if (!b) return st_fail(ST_ERR_NOMEM, "load: out of memory for a session state of %llu bytes", (unsigned long long)h.bytes);
    memcpy(b, &h, sizeof h);
    size_t n = sizeof h + fread(b + sizeof h, 1, (size_t)h.bytes - sizeof h, f);
    st_status r = ferror(f) ? st_fail(ST_ERR_IO, "load: reading the session state failed: %s", strerror(errno))
                            : st_session_state_load(s, b, n);
    free(b);
    return r;
}
