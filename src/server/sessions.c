/* sessions.c: saved sessions. POST /v1/sessions/save {"name"} writes the engine's state to
 * STATE_DIR/NAME.session; POST /v1/sessions/restore {"name"} reads it back; GET /v1/sessions lists
 * them. Save and restore run on the engine thread (queued like any request), so they never meet a
 * running generation.
 *
 * The file, little-endian:
 *   0   "STRATASS"            magic
 *   8   u32 version (1), u32 0
 *   16  char[64] fingerprint  the model's (sv_model_info.fingerprint), NUL-padded
 *   80  u64 n                 payload bytes
 *   88  payload               the engine's blob (engine_port.h state_save; for the real engine
 *                             strata.h's st_session_state_save, which checks its own again)
 *   88+n u64 checksum         FNV-1a 64 of every byte before it
 * It is written to a temporary file in the same folder, flushed, and renamed over the name, so a
 * crash leaves the old file or the new one, never half of one. Restoring refuses (and leaves the
 * session as it was) a name that is not a plain file name, a file of another version or model, a
 * truncated or altered file, and a payload the engine does not accept.
 * The file functions (session_file.h) serve `strata chat`'s /save and /load too. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/status.h"
#include "server/internal.h"
#include "server/session_file.h"

#define SESSION_MAGIC "STRATASS"
#define SESSION_VERSION 1u
#define SESSION_HEADER 88
#define SESSION_MAX_BYTES (64ull << 30)

#define FNV_START 14695981039346656037ULL

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

int sv_session_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 64 || name[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int make_dirs(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0700) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(tmp, 0700) && errno != EEXIST ? -1 : 0;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

st_status sv_session_file_write(const char *dir, const char *name, const char *fingerprint, const void *blob, size_t n,
                                size_t *bytes) {
    unsigned char head[SESSION_HEADER] = {0};
    memcpy(head, SESSION_MAGIC, 8);
    uint32_t version = SESSION_VERSION;
    memcpy(head + 8, &version, 4);
    memcpy(head + 16, fingerprint, strnlen(fingerprint, 64));
    uint64_t len = n;
    memcpy(head + 80, &len, 8);
    uint64_t h = fnv1a(fnv1a(FNV_START, head, SESSION_HEADER), blob, n);

    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s.session", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.session.%ld.tmp", dir, name, (long)getpid());
    int ok = 0, fd = -1;
    if (make_dirs(dir) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0 && !write_all(fd, head, SESSION_HEADER) && !write_all(fd, blob, n) && !write_all(fd, &h, 8) && !fsync(fd)) {
        close(fd);
        fd = -1;
        if (!rename(tmp, path)) {
            int dfd = open(dir, O_RDONLY | O_DIRECTORY);
            if (dfd >= 0) { fsync(dfd); close(dfd); }
            ok = 1;
        }
    }
    int err = errno;
    if (fd >= 0) close(fd);
    *bytes = SESSION_HEADER + n + 8;
    if (ok) return ST_OK;
    unlink(tmp);
    return st_fail(ST_ERR_IO, "could not write %s: %s", path, strerror(err));
}

st_status sv_session_file_read(const char *dir, const char *name, const char *fingerprint, void **file, const void **blob,
                               size_t *n, int *missing) {
    *file = NULL;
    *missing = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.session", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        *missing = errno == ENOENT;
        return st_fail(ST_ERR_IO, *missing ? "no saved session '%s'" : "could not open %s: %s", *missing ? name : path, strerror(errno));
    }
    struct stat st;
    unsigned char *buf = NULL;
    size_t size = 0;
    if (!fstat(fileno(f), &st) && st.st_size >= 0 && (uint64_t)st.st_size <= SESSION_MAX_BYTES) {
        size = (size_t)st.st_size;
        buf = malloc(size ? size : 1);
        if (buf && fread(buf, 1, size, f) != size) { free(buf); buf = NULL; }
    }
    fclose(f);
    if (!buf) return st_fail(ST_ERR_IO, "could not read %s", path);
    uint32_t version = 0;
    uint64_t len = 0, want = 0;
    char fp[65] = {0};
    st_status r = ST_ERR_FORMAT;
    if (size < SESSION_HEADER + 8 || memcmp(buf, SESSION_MAGIC, 8)) {
        st_fail(r, "'%s' is not a Strata session file (%zu bytes)", name, size);
    } else if (memcpy(&version, buf + 8, 4), version != SESSION_VERSION) {
        st_fail(r, "'%s' is a version %u session; this build reads version %u", name, version, SESSION_VERSION);
    } else if (memcpy(fp, buf + 16, 64), strcmp(fp, fingerprint)) {
        st_fail(r, "'%s' was saved for another model (fingerprint %s; this model is %s)", name, fp, fingerprint);
    } else if (memcpy(&len, buf + 80, 8), len != size - SESSION_HEADER - 8) {
        st_fail(r, "'%s' is truncated or padded: its header says %llu payload bytes, the file holds %zu", name, (unsigned long long)len,
                size - SESSION_HEADER - 8);
    } else if (memcpy(&want, buf + size - 8, 8), want != fnv1a(FNV_START, buf, size - 8)) {
        st_fail(r, "'%s' has been altered: its checksum does not match", name);
    } else {
        r = ST_OK;
    }
    if (r != ST_OK) {
        free(buf);
        return r;
    }
    *file = buf;
    *blob = buf + SESSION_HEADER;
    *n = (size_t)len;
    return ST_OK;
}

static int save_file(sv_server *s, const char *name, size_t *tokens, size_t *bytes, sv_error *e) {
    sv_engine *g = s->engine;
    void *blob = NULL;
    size_t n = 0;
    if (g->ops->state_save(g, &blob, &n, tokens) != ST_OK)
        return sv_error_set(e, 500, "server_error", NULL, NULL, "saving the session state failed: %s", st_last_error());
    st_status st = sv_session_file_write(s->cfg.state_dir, name, s->info.fingerprint, blob, n, bytes);
    free(blob);
    return st == ST_OK ? 0 : sv_error_set(e, 500, "server_error", NULL, NULL, "%s", st_last_error());
}

static int restore_file(sv_server *s, const char *name, size_t *tokens, sv_error *e) {
    void *file = NULL;
    const void *blob = NULL;
    size_t n = 0;
    int missing = 0;
    st_status st = sv_session_file_read(s->cfg.state_dir, name, s->info.fingerprint, &file, &blob, &n, &missing);
    if (missing) return sv_error_set(e, 404, "not_found_error", "session_not_found", "name", "%s", st_last_error());
    if (st == ST_ERR_FORMAT) return sv_error_set(e, 400, "invalid_request_error", "invalid_session", "name", "%s", st_last_error());
    if (st != ST_OK) return sv_error_set(e, 500, "server_error", NULL, NULL, "%s", st_last_error());
    int rc = 0;
    if (s->engine->ops->state_load(s->engine, blob, n, tokens) != ST_OK)
        rc = sv_error_set(e, 400, "invalid_request_error", "invalid_session", "name", "'%s' does not fit this engine: %s", name,
                          st_last_error());
    free(file);
    return rc;
}

/* Runs on the engine thread in place of a generation. */
typedef struct session_op {
    int save;
    char name[80];
} session_op;

static void run_session_op(sv_server *s, sv_job *j) {
    session_op *op = j->api;
    sv_error e = {0};
    size_t tokens = 0, bytes = 0;
    int bad = op->save ? save_file(s, op->name, &tokens, &bytes, &e) : restore_file(s, op->name, &tokens, &e);
    char *body;
    if (bad) {
        body = sv_error_openai(&e);
        j->http_status = e.status;
    } else {
        json_t *r = op->save ? json_pack("{s:s,s:I,s:I}", "saved", op->name, "tokens", (json_int_t)tokens, "bytes", (json_int_t)bytes)
                             : json_pack("{s:s,s:I}", "restored", op->name, "tokens", (json_int_t)tokens);
        body = json_dumps(r, JSON_COMPACT);
        json_decref(r);
    }
    sv_job_write(j, body, strlen(body));
    free(body);
}

static void session_op_request(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e, int save) {
    const char *name = NULL;
    if (!s->engine->ops->state_save || !s->engine->ops->state_load) {
        sv_error_set(e, 501, "invalid_request_error", "unsupported", NULL, "the %s engine cannot save sessions", s->engine->ops->kind);
        return;
    }
    if (sv_get_string(req, "name", &name, e) < 0) return;
    if (!name) { sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "name", "'name' is required"); return; }
    if (!sv_session_name_ok(name)) {
        sv_error_set(e, 400, "invalid_request_error", "invalid_value", "name", "'name': %s", SV_SESSION_NAME_RULE);
        return;
    }
    sv_job *j = sv_job_new();
    session_op *op = calloc(1, sizeof *op);
    op->save = save;
    snprintf(op->name, sizeof op->name, "%s", name);
    j->api = op;
    j->control = run_session_op;
    snprintf(j->endpoint, sizeof j->endpoint, "sessions");
    sv_enqueue(s, j, out, e);
}

void sv_api_session_save(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) { session_op_request(s, req, out, e, 1); }
void sv_api_session_restore(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) { session_op_request(s, req, out, e, 0); }

char *sv_api_sessions(sv_server *s) {
    json_t *list = json_array();
    DIR *d = opendir(s->cfg.state_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n <= 8 || strcmp(de->d_name + n - 8, ".session") || de->d_name[0] == '.') continue;
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", s->cfg.state_dir, de->d_name);
        if (stat(path, &st)) continue;
        json_array_append_new(list, json_pack("{s:s%,s:I,s:I}", "name", de->d_name, n - 8, "bytes", (json_int_t)st.st_size,
                                              "modified", (json_int_t)st.st_mtime));
    }
    if (d) closedir(d);
    json_t *r = json_pack("{s:s,s:o}", "folder", s->cfg.state_dir, "sessions", list);
    char *out = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    return out;
}
