/* device_model.h: a model's weights resident on a GPU (model/device.h's st_device_model on CUDA),
 * as the device sessions (engine/cuda/session_cuda.c) read them: the CUDA context and the
 * weights' table with device pointers. Internal to the CUDA build. */
#ifndef ST_MODEL_CUDA_DEVICE_MODEL_H
#define ST_MODEL_CUDA_DEVICE_MODEL_H

#include "backend/cuda/cuda_backend.h"
#include "model/cuda/forward_cuda.h"
#include "model/device.h"

struct st_device_model {
    st_cuda *cu;
    void *blob;                  /* the data section on the device, or (tiers) the tensors kept there */
    void *host_blob;             /* tiers: the routed experts left in pinned host memory, or NULL */
    uint8_t *host_layer;         /* tiers: per layer, 1 when its routed experts are in host_blob */
    struct st_host_moe *host_moe; /* tiers: the CPU's share of those layers' experts, or NULL */
    char plan[512];              /* what sits where (st_device_model_plan) */
    uint64_t budget;             /* the device memory the process may have in use */
    void **owned;                /* vectors uploaded on their own */
    int n_owned, cap_owned;
    st_dweights w;
    st_layer *layers;
    void **f16_gu, **f16_down;  /* per layer, when the experts' f16 copies are made */
    int64_t n_layers;
    void *ple_pin;               /* qwen4exp: the PLE table's copy in pinned mapped memory (w.ple_dev), or NULL */
};

/* Memory tiers (device_tiers.c): whether the bound weights need more than `room` bytes of device
 * memory; and their placement under `room`: the dense weights and the routed experts of the first
 * MoE layers that fit on the device (dm->blob), the other layers' routed experts in pinned mapped
 * host memory (dm->host_blob), dm->layers and dm->w set, dm->plan written. */
int st_device_tiers_needed(const struct st_model *m, uint64_t room);
st_status st_device_tiers_upload(st_device_model *dm, const struct st_model *m, uint64_t room, int progress);

#endif
