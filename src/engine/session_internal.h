/* session_internal.h: a session's insides, shared by session.c (which owns them), session_state.c
 * (checkpoints, save and load read and write the state and the device half through these) and the
 * tests that check the ownership rule (state and weights untouched by workspace growth). Not
 * part of the public API. */
#ifndef ST_ENGINE_SESSION_INTERNAL_H
#define ST_ENGINE_SESSION_INTERNAL_H

#include "base/workspace.h"
#include "engine/device.h"
#include "model/state.h"

st_state *st_session_state(st_session *s);
st_workspace *st_session_workspace(st_session *s);
/* The session's device half (NULL for a CPU session; its st_state then holds only n_past). */
st_device_session *st_session_device(st_session *s);
/* Grows the workspace as a feed would between chunks. */
st_status st_session_reserve_rows(st_session *s, int64_t rows);

#endif
