/* device_none.c: the engine's device sessions (engine/device.h) in a build without an
 * accelerator backend (configure with -DSTRATA_CUDA=ON for the CUDA one). No model is ever
 * loaded for a device there (model/device_none.c refuses), so these only answer no. */
#ifndef STRATA_HAVE_CUDA
#include "engine/device.h"
#include "base/status.h"

static st_status no_device(void) {
    return st_fail(ST_ERR_UNSUPPORTED, "this build of Strata has no CUDA backend (configure with -DSTRATA_CUDA=ON)");
}

st_status st_device_session_new(st_device_model *dm, const struct st_model *m, int64_t n_ctx, uint32_t kv_type,
                                st_device_session **out) {
    *out = NULL;
    return no_device();
}
void st_device_session_free(st_device_session *ds) {}
void st_device_session_set_ids(st_device_session *ds, const int32_t *ids) { (void)ds, (void)ids; }
st_status st_device_session_reset(st_device_session *ds) { return no_device(); }
st_status st_device_session_feed(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past,
                                 float *logits_all) {
    return no_device();
}
const float *st_device_session_logits(const st_device_session *ds) { return NULL; }
st_status st_device_session_reserve_steps(st_device_session *ds, int rows) { return no_device(); }
st_status st_device_session_verify(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past,
                                   float *logits_all, float *h_all, int keep_steps) {
    return no_device();
}
void st_device_session_keep_row(st_device_session *ds, int64_t k) {}
void st_device_session_set_logits(st_device_session *ds, const float *row) {}
st_status st_device_session_reserve(st_device_session *ds, int64_t rows) { return no_device(); }
uint64_t st_device_session_state_bytes(const st_device_session *ds) { return 0; }
st_status st_device_session_read_state(st_device_session *ds, int64_t il, int part, int64_t n_cells, void *host) {
    return no_device();
}
st_status st_device_session_write_state(st_device_session *ds, int64_t il, int part, int64_t n_cells, const void *host) {
    return no_device();
}
uint64_t st_device_session_scratch_bytes(const st_device_session *ds) { return 0; }
st_status st_device_mem_info(const st_device_session *ds, size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    return no_device();
}
#else
typedef int st_device_none_unused; /* ISO C wants a translation unit to declare something */
#endif
