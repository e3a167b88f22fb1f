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
    void *blob;                  /* the data section on the device */
    void **owned;                /* vectors uploaded on their own */
    int n_owned, cap_owned;
    st_dweights w;
    st_layer *layers;
    void **f16_gu, **f16_down;  /* per layer, when the experts' f16 copies are made */
    int64_t n_layers;
};

#endif
