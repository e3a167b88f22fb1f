/* device.h: a model's weights resident on an accelerator (st_model.dev). A model loaded for a
 * device keeps every bound weight there in its file type; the sessions over it (engine/device.h)
 * keep their state there and run the device forward (model/cuda/).
 *
 * Built with -DSTRATA_CUDA=ON this is model/cuda/device_model.c; otherwise device_model_none.c answers
 * that the build has no device (st_device_count() == 0). model_api.c dispatches here when the
 * model is loaded for a device. */
#ifndef ST_MODEL_DEVICE_H
#define ST_MODEL_DEVICE_H

#include <stdint.h>
#include "strata.h"

struct st_model;
typedef struct st_device_model st_device_model;

/* Usable devices of this build (0 without CUDA, without a driver or without a GPU). */
int st_device_count(void);

/* Uploads every bound weight of m in its file type; refuses (naming the tensor) what the device
 * forward cannot run. progress: a progress line while uploading. budget: the device memory the
 * process may take with this model and a session (0: what the device has free, less 1 GiB); when
 * the weights do not fit it, the routed experts of the layers that do not fit stay in pinned host
 * memory, read in place by the same kernels over the bus (model/cuda/device_tiers.c). */
st_status st_device_model_load(const struct st_model *m, int progress, uint64_t budget, st_device_model **out);
void st_device_model_free(st_device_model *dm);
/* "NVIDIA H200, 132 SMs, 139.8 GiB, cc 9.0" */
const char *st_device_model_describe(const st_device_model *dm);
/* The device memory's read bandwidth in GB/s, measured now; 0 if it cannot be. */
double st_device_model_bandwidth(st_device_model *dm);
/* What sits where: "all 18.0 GiB of weights on the GPU", or the tiers' split (st_model_device_plan). */
const char *st_device_model_plan(const st_device_model *dm);
/* The bus, measured now (st_model_device_bus_bandwidth); zeros if it cannot be. */
void st_device_model_bus_bandwidth(st_device_model *dm, size_t bytes, double *mapped, double *copy);
/* The device memory free now (for sizing a session's context), 0 if unknown. */
uint64_t st_device_model_free_bytes(const st_device_model *dm);

#endif
