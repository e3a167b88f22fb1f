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
 * forward cannot run. progress: a progress line while uploading. */
st_status st_device_model_load(const struct st_model *m, int progress, st_device_model **out);
void st_device_model_free(st_device_model *dm);
/* "NVIDIA H200, 132 SMs, 139.8 GiB, cc 9.0" */
const char *st_device_model_describe(const st_device_model *dm);
/* The device memory's read bandwidth in GB/s, measured now; 0 if it cannot be. */
double st_device_model_bandwidth(st_device_model *dm);
/* The device memory free now (for sizing a session's context), 0 if unknown. */
uint64_t st_device_model_free_bytes(const st_device_model *dm);

#endif
