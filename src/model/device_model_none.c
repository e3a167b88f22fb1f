/* device_model_none.c: model/device.h in a build without an accelerator backend (configure with
 * -DSTRATA_CUDA=ON for the CUDA one). There are no devices; a model asked to run on one is
 * refused with the reason. */
#ifndef STRATA_HAVE_CUDA
#include "base/status.h"
#include "model/device.h"

int st_device_count(void) { return 0; }
st_status st_device_model_load(const struct st_model *m, int progress, uint64_t budget, st_device_model **out) {
    *out = NULL;
    return st_fail(ST_ERR_UNSUPPORTED, "this build of Strata has no CUDA backend (configure with -DSTRATA_CUDA=ON)");
}
void st_device_model_free(st_device_model *dm) {}
const char *st_device_model_describe(const st_device_model *dm) { return "none"; }
double st_device_model_bandwidth(st_device_model *dm) { return 0.0; }
const char *st_device_model_plan(const st_device_model *dm) { return ""; }
void st_device_model_bus_bandwidth(st_device_model *dm, size_t bytes, double *mapped, double *copy) {
    *mapped = *copy = 0.0;
}
uint64_t st_device_model_free_bytes(const st_device_model *dm) { return 0; }
#else
typedef int st_device_none_unused; /* ISO C wants a translation unit to declare something */
#endif
